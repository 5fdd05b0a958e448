// OpGraph: the plain view of a canonical graph that the partitioner and
// the reports consume. No LibTorch types: ids, names, shapes and bytes.
#pragma once

#include <boost/graph/adjacency_list.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mp {

// A value crossing between nodes: a model input, a lifted parameter, or
// an output of a top-level node.
struct OpValue {
  int id = 0;
  std::string name;                // IR debug name, or the parameter path
  std::string type;                // Tensor, int, int[], Tensor[], (Tensor, Tensor), ...
  std::string dtype;               // tensors, once shapes are known
  std::vector<int64_t> shape;      // tensors, once shapes are known
  int64_t bytes = 0;               // tensors, once shapes are known; 0 otherwise
  int producer = -1;               // node id; -1 for graph inputs
  bool is_param = false;           // a lifted parameter or buffer
  // A parameter or buffer without a gradient (requires_grad false: a frozen
  // backbone, LoRA's base weights, batch norm's running statistics): in
  // training it has no gradient, no optimizer state and no all-reduce.
  bool frozen = false;
  // In training no gradient reaches it (gradient_free.h: a frozen
  // backbone's activations, a model input); false in a graph built by hand.
  bool gradient_free = false;
  bool is_graph_output = false;
  bool rematerializable = false;   // a constant or a list of them: cloned, never sent
  // In training, whether autograd keeps it until the backward, and whether
  // it shares another value's storage (saved_values.h); a graph built by
  // hand keeps every value, each with storage of its own.
  bool kept_for_backward = true;
  bool alias = false;
  std::vector<int> consumers;      // node ids reading it (ascending, unique)
};

struct OpNode {
  int id = 0;
  std::string kind;                // aten::conv2d, prim::Constant, prim::If, ...
  std::string layer;               // layer2.3.conv1; "" for the root module
  std::vector<int> inputs;         // value ids, including values read inside blocks
  std::vector<int> outputs;        // value ids
  bool has_blocks = false;         // prim::If / prim::Loop: an atomic unit
  bool mutates = false;            // writes to one of its inputs in place
  // In training, what autograd keeps of it beyond graph values, as a
  // multiple of its outputs' bytes (SavedValues::extra).
  double kept_extra = 0;
};

// A parameter or buffer that forward writes in place and that more than
// one node reads or writes: a running mean kept by hand
// (`mean.mul_(0.9).add_(h.mean(0))`, read by the next layer). BatchNorm's
// running statistics are read and written by its one node.
struct SharedState {
  int value = -1;          // its value id (a param)
  std::vector<int> nodes;  // the top-level nodes that read or write it, ascending
};

struct OpGraph {
  std::vector<OpNode> nodes;       // index = canonical node id
  std::vector<OpValue> values;     // index = value id: inputs, params, then node outputs
  std::vector<int> inputs;         // model input value ids
  std::vector<int> params;         // parameter value ids
  std::vector<int> outputs;        // graph output value ids
  std::vector<SharedState> shared_state;
  std::string fingerprint;
  bool has_shapes = false;
};

// Node-to-node dependency DAG: an edge u -> v for every value u produces
// and v reads. Vertex index = canonical node id.
using OpDag = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;

OpDag MakeDag(const OpGraph& graph);

// The node reads parameters (or buffers), and every one of them is frozen
// (LoRA's base linear, a frozen layer a gradient still passes through):
// its backward makes its input's gradient only, and no weight's.
bool ReadsOnlyFrozen(const OpGraph& graph, const OpNode& node);

// A topological order of the nodes computed by Boost.Graph (not merely
// the canonical order, which is one too).
std::vector<int> TopologicalOrder(const OpGraph& graph);

// reach[u][v] == true iff there is a path u -> ... -> v (u != v).
std::vector<std::vector<bool>> Reachability(const OpGraph& graph);

}  // namespace mp
