// Input specs: the `dtype[d0,...]` flag syntax and the JSON that bundled
// models carry. Every malformed spec is an InputError that quotes it.
#include "planner/graph/input_spec.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>

#include "common/error.h"

namespace mp {
namespace {

const std::map<std::string, int64_t>& DtypeSizes() {
  static const std::map<std::string, int64_t> sizes = {
      {"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2},
      {"int64", 8},   {"int32", 4},   {"int16", 2},   {"int8", 1},
      {"uint8", 1},   {"bool", 1},
  };
  return sizes;
}

std::string KnownDtypes() {
  std::string out;
  for (const auto& [name, size] : DtypeSizes()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

void CheckDtype(const std::string& dtype, const std::string& where) {
  if (DtypeSizes().count(dtype) == 0) {
    throw InputError(Concat(where, ": unknown dtype '", dtype, "' (expected one of ",
                            KnownDtypes(), ")"));
  }
}

// An integer as written in the JSON: nlohmann's get<int64_t>() casts a
// float (1e300) or an unsigned above INT64_MAX without a check, which is
// undefined or wraps.
int64_t JsonInt(const nlohmann::json& value, const std::string& where) {
  if (!value.is_number_integer() ||
      (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))) {
    throw InputError(Concat(where, ": expected an integer, found ", value.dump()));
  }
  return value.get<int64_t>();
}

std::vector<int64_t> JsonIntList(const nlohmann::json& value, const std::string& where) {
  if (!value.is_array()) throw InputError(Concat(where, ": expected a list of integers, found ", value.dump()));
  std::vector<int64_t> out;
  for (size_t i = 0; i < value.size(); ++i) out.push_back(JsonInt(value[i], Concat(where, "[", i, "]")));
  return out;
}

// An identifier: letters, digits and '_', not starting with a digit.
bool IsWord(const std::string& name) {
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  return !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
         std::all_of(name.begin(), name.end(), word);
}

// A forward argument's name, or a tuple element's (`hidden[0]`).
bool IsInputName(const std::string& name) {
  if (IsWord(name)) return true;
  const auto element = TupleElement(name);
  return element && IsWord(element->first);
}

}  // namespace

std::optional<std::pair<std::string, size_t>> TupleElement(const std::string& name) {
  const size_t open = name.find('[');
  if (open == std::string::npos || open == 0 || name.size() < open + 3 || name.back() != ']') return std::nullopt;
  const std::string digits = name.substr(open + 1, name.size() - open - 2);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return std::nullopt;
  }
  // An index past any tuple's size reads as the largest.
  size_t index = 0;
  for (char c : digits) {
    const size_t digit = size_t(c - '0');
    index = index > (std::numeric_limits<size_t>::max() - digit) / 10 ? std::numeric_limits<size_t>::max()
                                                                     : index * 10 + digit;
  }
  return std::make_pair(name.substr(0, open), index);
}

int64_t DtypeBytes(const std::string& dtype) {
  auto it = DtypeSizes().find(dtype);
  return it == DtypeSizes().end() ? 0 : it->second;
}

bool IsIntegerDtype(const std::string& dtype) {
  return dtype.rfind("int", 0) == 0 || dtype == "uint8";
}

TensorSpec ParseTensorSpec(const std::string& text) {
  const std::string where = Concat("--input '", text, "'");
  TensorSpec spec;
  std::string body = text;
  if (const auto eq = text.find('='); eq != std::string::npos) {
    spec.name = text.substr(0, eq);
    if (!IsInputName(spec.name)) {
      throw InputError(Concat(where, ": '", spec.name, "' is not an input's name (forward's argument, or hidden[0] "
                              "for a tuple's element)"));
    }
    body = text.substr(eq + 1);
  }
  const auto open = body.find('[');
  if (open == std::string::npos || body.empty() || body.back() != ']') {
    throw InputError(Concat(where, ": expected dtype[d0,d1,...] or name=dtype[d0,d1,...], e.g. float32[4,3,64,64]"));
  }
  spec.dtype = body.substr(0, open);
  if (const auto colon = spec.dtype.find(':'); colon != std::string::npos && spec.name.empty()) {
    throw InputError(Concat(where, ": a name comes before '=', not ':' (", spec.dtype.substr(0, colon), "=",
                            body.substr(colon + 1), ")"));
  }
  CheckDtype(spec.dtype, where);
  const std::string dims = body.substr(open + 1, body.size() - open - 2);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t end = dims.find(',', pos);
    if (end == std::string::npos) end = dims.size();
    const std::string dim = dims.substr(pos, end - pos);
    bool digits = !dim.empty() && dim.size() < 16;
    for (char c : dim) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (!digits || std::stoll(dim) <= 0) {
      throw InputError(Concat(where, ": dimension '", dim, "' is not a positive integer"));
    }
    spec.shape.push_back(std::stoll(dim));
    pos = end + 1;
    if (end + 1 == dims.size()) {
      throw InputError(Concat(where, ": trailing ',' in the shape"));
    }
  }
  return spec;
}

std::vector<TensorSpec> ParseSpecJson(const std::string& text, const std::string& source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(Concat(source, ": input spec is not valid JSON: ", e.what()));
  }
  if (!doc.is_object() || !doc.contains("inputs") || !doc["inputs"].is_array()) {
    throw InputError(Concat(source, ": input spec needs an \"inputs\" array"));
  }
  std::vector<TensorSpec> specs;
  for (size_t i = 0; i < doc["inputs"].size(); ++i) {
    const auto& item = doc["inputs"][i];
    const std::string where = Concat(source, ": inputs[", i, "]");
    try {
      TensorSpec spec;
      spec.name = item.value("name", "");
      spec.dtype = item.at("dtype").get<std::string>();
      CheckDtype(spec.dtype, where);
      spec.shape = JsonIntList(item.at("shape"), where + ".shape");
      for (size_t d = 0; d < spec.shape.size(); ++d) {
        if (spec.shape[d] < 1) {
          throw InputError(Concat(where, ".shape[", d, "]: expected a dimension of at least 1, found ", spec.shape[d]));
        }
      }
      const int64_t batch_dim = item.contains("batch_dim") ? JsonInt(item["batch_dim"], where + ".batch_dim") : 0;
      if (batch_dim < 0 || (batch_dim >= static_cast<int64_t>(spec.shape.size()) && !spec.shape.empty())) {
        throw InputError(Concat(where, ".batch_dim: ", batch_dim, " out of range for ",
                                spec.shape.size(), " dimensions"));
      }
      spec.batch_dim = static_cast<int>(batch_dim);
      if (item.contains("range")) {
        auto range = JsonIntList(item["range"], where + ".range");
        if (range.size() != 2 || range[0] >= range[1]) {
          throw InputError(Concat(where, ".range: expected [low, high) with low < high"));
        }
        spec.has_range = true;
        spec.low = range[0];
        spec.high = range[1];
      }
      specs.push_back(spec);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(Concat(where, ": ", e.what()));
    }
  }
  return specs;
}

std::string FormatTensorSpec(const TensorSpec& spec) {
  std::string out = spec.dtype + "[";
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    out += (i ? "," : "") + std::to_string(spec.shape[i]);
  }
  return out + "]";
}

int64_t SpecBatch(const std::vector<TensorSpec>& inputs) {
  int64_t batch = -1;
  for (const auto& spec : inputs) {
    if (spec.batch_dim < 0 || spec.batch_dim >= static_cast<int>(spec.shape.size()))
      throw InputError(Concat("input '", spec.name, "' ", FormatTensorSpec(spec), " has no batch dimension ",
                              spec.batch_dim));
    const int64_t b = spec.shape[spec.batch_dim];
    if (batch >= 0 && b != batch)
      throw InputError(Concat("inputs disagree on the batch size: ", batch, " and ", b, " (input '", spec.name, "')"));
    batch = b;
  }
  if (inputs.empty()) throw InputError("the model has no inputs, so nothing to split into micro-batches");
  if (batch < 1) throw InputError(Concat("the batch size must be at least 1, got ", batch));
  return batch;
}

std::vector<TensorSpec> WithBatch(std::vector<TensorSpec> inputs, int64_t batch) {
  SpecBatch(inputs);  // every input has a batch dimension
  for (auto& spec : inputs) spec.shape[spec.batch_dim] = batch;
  return inputs;
}

}  // namespace mp
