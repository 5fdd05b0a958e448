// Two small probes instead of one big one: ResNet-50 at batch 120 and
// 128x128 takes seconds and gigabytes to size at full batch, and
// milliseconds at batch 1 and 2. A dimension that is the same in both probes
// is fixed; one that doubled is the batch; any other change (a dimension that
// grows some other way, a dtype or rank that differs) makes the scaling
// untrustworthy, and the full-batch pass runs instead.
#include "planner/graph/scaled_shapes.h"

#include <optional>

#include "planner/graph/build_op_graph.h"
#include "planner/graph/run_graph.h"

namespace mp {
namespace {

std::optional<std::vector<int64_t>> ScaleShape(const std::vector<int64_t>& one, const std::vector<int64_t>& two,
                                               int64_t batch) {
  if (one.size() != two.size()) return std::nullopt;
  std::vector<int64_t> out(one.size());
  for (size_t d = 0; d < one.size(); ++d) {
    if (one[d] == two[d]) {
      out[d] = one[d];
    } else if (two[d] == 2 * one[d]) {
      out[d] = one[d] * batch;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// The values of `one` and `two` scaled to `batch`, or false when some value
// does not scale.
bool Scale(const OpGraph& one, const OpGraph& two, int64_t batch, OpGraph& graph) {
  for (size_t v = 0; v < graph.values.size(); ++v) {
    const OpValue& a = one.values[v];
    const OpValue& b = two.values[v];
    if (a.dtype != b.dtype) return false;
    const auto shape = ScaleShape(a.shape, b.shape, batch);
    if (!shape) return false;
    OpValue& value = graph.values[v];
    value.dtype = a.dtype;
    value.shape = *shape;
    if (a.bytes == 0 && b.bytes == 0) {
      value.bytes = 0;  // not a tensor
    } else {
      int64_t numel = 1;
      for (int64_t d : *shape) numel *= d;
      value.bytes = numel * DtypeBytes(a.dtype);
    }
  }
  graph.has_shapes = true;
  return true;
}

}  // namespace

void FillShapesForBatch(const CanonicalGraph& canonical, const std::vector<TensorSpec>& inputs, OpGraph& graph) {
  const int64_t batch = SpecBatch(inputs);
  if (batch > 2) {
    OpGraph one = graph, two = graph;
    bool probed = true;
    try {
      FillShapes(canonical, SyntheticInputs(WithBatch(inputs, 1)), one);
      FillShapes(canonical, SyntheticInputs(WithBatch(inputs, 2)), two);
    } catch (const std::exception&) {
      probed = false;  // e.g. BatchNorm refusing one sample: let the full pass decide
    }
    if (probed && Scale(one, two, batch, graph)) return;
  }
  FillShapes(canonical, SyntheticInputs(inputs), graph);
}

}  // namespace mp
