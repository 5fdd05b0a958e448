// The shape, dtype and value range of a model input: what `--input
// float32[4,3,64,64]` says on the command line and what a bundled model
// carries in its `mp_input_spec.json` extra file. Plain values, no LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mp {

struct TensorSpec {
  std::string name;              // model argument name, may be empty
  std::string dtype;             // float32, float64, float16, bfloat16, int64, int32, bool, ...
  std::vector<int64_t> shape;
  int batch_dim = 0;
  bool has_range = false;        // integer inputs: values drawn from [low, high)
  int64_t low = 0;
  int64_t high = 0;
};

// Parses `dtype[d0,d1,...]`, e.g. `int64[8,32]`; a scalar is `float32[]`;
// `name=dtype[...]` names the input (forward's argument, `hidden[0]` for a
// tuple's element). Throws InputError naming the text and what was expected.
TensorSpec ParseTensorSpec(const std::string& text);

// `hidden[0]`, a tuple argument's element by name: the argument's name and
// the index. nullopt for a name of any other form.
std::optional<std::pair<std::string, size_t>> TupleElement(const std::string& name);

// Parses the JSON document {"inputs": [{"name", "dtype", "shape",
// "batch_dim", "range"}]}. `source` names the document in errors.
std::vector<TensorSpec> ParseSpecJson(const std::string& json, const std::string& source);

// `float32[4,3,64,64]`, the inverse of ParseTensorSpec.
std::string FormatTensorSpec(const TensorSpec& spec);

// Bytes of one element of a dtype named as in TensorSpec; 0 if unknown.
int64_t DtypeBytes(const std::string& dtype);
bool IsIntegerDtype(const std::string& dtype);

// The batch size of a full-batch spec: every input's batch dimension must
// exist and agree. Throws InputError naming the input otherwise.
int64_t SpecBatch(const std::vector<TensorSpec>& inputs);

// `inputs` with every batch dimension set to `batch`.
std::vector<TensorSpec> WithBatch(std::vector<TensorSpec> inputs, int64_t batch);

}  // namespace mp
