// Graph execution helpers shared by the canonical-graph checks, shape
// probing and (later) the profiler and executor.
#include "planner/graph/run_graph.h"

#include "common/error.h"
#include "planner/graph/warn_once.h"

namespace mp {

GraphRunner::GraphRunner(const std::shared_ptr<torch::jit::Graph>& graph, const std::string& name)
    : code_(graph, name) {}

namespace {

// The code the interpreter's traceback marks as failing in its innermost
// frame (the last `~~~~ <--- HERE`): the marked span of the line above,
// whitespace collapsed, and the frame's file (base name) and line when it
// names one: "F.linear`, linear.py:114". "" when nothing is marked.
std::string MarkedCode(const std::string& what) {
  const size_t here = what.rfind(" <--- HERE");
  if (here == std::string::npos) return "";
  const size_t marks_start = what.rfind('\n', here);
  if (marks_start == std::string::npos || marks_start == 0) return "";
  const size_t code_newline = what.rfind('\n', marks_start - 1);
  const size_t code_start = code_newline == std::string::npos ? 0 : code_newline + 1;
  const std::string marks = what.substr(marks_start + 1, here - marks_start - 1);
  const std::string code = what.substr(code_start, marks_start - code_start);
  const size_t from = marks.find('~');
  if (from == std::string::npos || from >= code.size()) return "";
  const size_t to = marks.find_last_of('~') + 1;
  std::string span;
  for (char c : code.substr(from, to - from)) {
    if (c == ' ' && !span.empty() && span.back() == ' ') continue;
    span += c;
  }
  if (span.size() > 60) span = span.substr(0, 57) + "...";
  // The frame's header: `  File "/path/linear.py", line 114, in forward`.
  const size_t file = what.rfind("  File \"", code_start);
  if (file == std::string::npos) return span;
  const size_t name_end = what.find('"', file + 8);
  const size_t line_at = what.find(", line ", name_end);
  const size_t line_end = what.find(',', line_at + 7);
  if (name_end == std::string::npos || line_at != name_end + 1 || line_end == std::string::npos) return span;
  std::string path = what.substr(file + 8, name_end - file - 8);
  if (path.front() == '<') return span;  // "<string>": source given as text
  path = path.substr(path.find_last_of('/') + 1);
  return span + "`, " + path + ":" + what.substr(line_at + 7, line_end - line_at - 7);
}

}  // namespace

std::string ErrorLine(const std::string& what) {
  std::string line;
  if (what.find("The following operation failed in the TorchScript interpreter") == std::string::npos) {
    line = what.substr(0, what.find('\n'));
  } else {
    const size_t end = what.find_last_not_of(" \n");
    const size_t newline = what.find_last_of('\n', end);
    const size_t start = newline == std::string::npos ? 0 : newline + 1;
    line = what.substr(start, end - start + 1);
    // The op that failed, as the model's code spells it.
    const std::string code = MarkedCode(what);
    if (!code.empty()) line += " (at `" + code + (code.find('`') == std::string::npos ? "`)" : ")");
  }
  // "[enforce fail at inline_container.cc:129] . file in archive is ...":
  // the source location is LibTorch's, not the user's.
  const std::string enforce = "[enforce fail at ";
  const size_t close = line.find("] ");
  if (line.rfind(enforce, 0) == 0 && close != std::string::npos) {
    line = line.substr(close + 2);
    if (line.rfind(". ", 0) == 0) line = line.substr(2);
  }
  return line;
}

std::vector<c10::IValue> GraphRunner::Run(std::vector<c10::IValue> inputs) const {
  const WarnOnceScope warn_once;  // the model's `warnings.warn`, once a process
  torch::jit::InterpreterState state(code_);
  state.run(inputs);
  return inputs;  // the interpreter leaves the outputs on the stack
}

std::vector<at::Tensor> FlattenTensors(const c10::IValue& value) {
  std::vector<at::Tensor> out;
  if (value.isTensor()) {
    out.push_back(value.toTensor());
  } else if (value.isTuple()) {
    for (const auto& item : value.toTupleRef().elements()) {
      auto inner = FlattenTensors(item);
      out.insert(out.end(), inner.begin(), inner.end());
    }
  } else if (value.isList()) {
    for (const auto& item : value.toListRef()) {
      auto inner = FlattenTensors(item);
      out.insert(out.end(), inner.begin(), inner.end());
    }
  } else if (value.isGenericDict()) {
    for (const auto& item : value.toGenericDict()) {  // in insertion order
      auto inner = FlattenTensors(item.value());
      out.insert(out.end(), inner.begin(), inner.end());
    }
  }
  return out;
}

c10::IValue MapTensors(const c10::IValue& value, const std::function<at::Tensor(const at::Tensor&)>& fn) {
  if (value.isTensor()) return fn(value.toTensor());
  if (value.isTuple()) {
    std::vector<c10::IValue> items;
    for (const auto& item : value.toTupleRef().elements()) items.push_back(MapTensors(item, fn));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : value.toTensorVector()) out.push_back(fn(t));
    return out;
  }
  if (value.isList()) {
    c10::impl::GenericList out(value.toList().elementType());
    for (const c10::IValue& item : value.toListRef()) out.push_back(MapTensors(item, fn));
    return out;
  }
  if (value.isGenericDict()) {
    const c10::impl::GenericDict dict = value.toGenericDict();
    c10::impl::GenericDict out(dict.keyType(), dict.valueType());
    for (const auto& item : dict) out.insert(item.key(), MapTensors(item.value(), fn));
    return out;
  }
  return value;
}

std::vector<c10::IValue> CloneTensors(const std::vector<c10::IValue>& values) {
  std::vector<c10::IValue> copies;
  for (const auto& v : values) copies.push_back(MapTensors(v, [](const at::Tensor& t) { return t.clone(); }));
  return copies;
}

namespace {

c10::ScalarType ScalarTypeOf(const std::string& dtype) {
  static const std::map<std::string, c10::ScalarType> types = {
      {"float32", at::kFloat}, {"float64", at::kDouble}, {"float16", at::kHalf},
      {"bfloat16", at::kBFloat16}, {"int64", at::kLong}, {"int32", at::kInt},
      {"int16", at::kShort}, {"int8", at::kChar}, {"uint8", at::kByte}, {"bool", at::kBool},
  };
  auto it = types.find(dtype);
  if (it == types.end()) throw InputError(Concat("unknown dtype '", dtype, "'"));
  return it->second;
}

}  // namespace

std::string DtypeName(c10::ScalarType type) {
  switch (type) {
    case at::kFloat: return "float32";
    case at::kDouble: return "float64";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return c10::toString(type);
  }
}

std::vector<c10::IValue> SyntheticInputs(const std::vector<TensorSpec>& specs, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  std::vector<c10::IValue> inputs;
  for (const auto& spec : specs) {
    const auto type = ScalarTypeOf(spec.dtype);
    auto options = at::TensorOptions().dtype(type);
    if (at::isFloatingType(type)) {
      inputs.emplace_back(at::randn(spec.shape, gen, options.dtype(at::kFloat)).to(type));
    } else if (type == at::kBool) {
      inputs.emplace_back(at::randint(0, 2, spec.shape, gen, options));
    } else {
      const int64_t low = spec.has_range ? spec.low : 0;
      const int64_t high = spec.has_range ? spec.high : 2;
      inputs.emplace_back(at::randint(low, high, spec.shape, gen, options));
    }
  }
  return inputs;
}

}  // namespace mp
