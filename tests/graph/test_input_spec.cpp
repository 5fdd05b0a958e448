// Input specs: the --input syntax and the embedded JSON.
#include <doctest/doctest.h>

#include <limits>

#include "common/error.h"
#include "planner/graph/input_spec.h"

using mp::InputError;

TEST_CASE("ParseTensorSpec reads dtype and shape") {
  auto spec = mp::ParseTensorSpec("float32[4,3,64,64]");
  CHECK(spec.dtype == "float32");
  CHECK((spec.shape == std::vector<int64_t>{4, 3, 64, 64}));
  CHECK(mp::FormatTensorSpec(spec) == "float32[4,3,64,64]");
  CHECK((mp::ParseTensorSpec("int64[8,32]").shape == std::vector<int64_t>{8, 32}));
  CHECK(mp::ParseTensorSpec("float64[]").shape.empty());
}

TEST_CASE("ParseTensorSpec reads a name before '='") {
  const auto spec = mp::ParseTensorSpec("attention_mask=int64[8,16]");
  CHECK(spec.name == "attention_mask");
  CHECK(spec.dtype == "int64");
  CHECK((spec.shape == std::vector<int64_t>{8, 16}));
  CHECK(mp::ParseTensorSpec("hidden[1]=float32[2,4,32]").name == "hidden[1]");
  CHECK(mp::ParseTensorSpec("float32[2]").name.empty());
  CHECK_THROWS_WITH_AS(mp::ParseTensorSpec("x:float32[4]"),
                       doctest::Contains("a name comes before '=', not ':' (x=float32[4])"), InputError);
  for (const char* bad : {"=float32[4]", "1x=float32[4]", "a b=float32[4]", "h[]=float32[4]", "h[x]=float32[4]"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(mp::ParseTensorSpec(bad), doctest::Contains("is not an input's name"), InputError);
  }
  CHECK(mp::ParseTensorSpec("h[12]=float32[4]").name == "h[12]");
  CHECK(mp::ParseTensorSpec("h_2=float32[4]").name == "h_2");
}

TEST_CASE("TupleElement reads a tuple element's name, the argument's and the index") {
  CHECK(mp::TupleElement("hidden[1]") == std::make_pair(std::string("hidden"), size_t(1)));
  CHECK(mp::TupleElement("h[12]") == std::make_pair(std::string("h"), size_t(12)));
  for (const char* other : {"hidden", "hidden[]", "[0]", "hidden[x]", "hidden[0", "hidden[0]x", ""}) {
    CAPTURE(other);
    CHECK_FALSE(mp::TupleElement(other).has_value());
  }
  // An index no tuple has: the largest, never an overflow.
  CHECK(mp::TupleElement("h[99999999999999999999999]")->second == std::numeric_limits<size_t>::max());
}

TEST_CASE("ParseTensorSpec rejects malformed specs and names them") {
  CHECK_THROWS_WITH_AS(mp::ParseTensorSpec("float32"), doctest::Contains("expected dtype[d0,d1,...]"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseTensorSpec("float[4]"), doctest::Contains("unknown dtype 'float'"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseTensorSpec("float32[4,x]"), doctest::Contains("dimension 'x'"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseTensorSpec("float32[4,0]"), doctest::Contains("dimension '0'"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseTensorSpec("float32[4,]"), doctest::Contains("trailing ','"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseTensorSpec("float32[4,,3]"), doctest::Contains("dimension ''"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseTensorSpec("float32[-4]"), doctest::Contains("'-4'"), InputError);
  CHECK_THROWS_AS(mp::ParseTensorSpec("float32[99999999999999999999]"), InputError);
  CHECK_THROWS_AS(mp::ParseTensorSpec(""), InputError);
}

TEST_CASE("ParseSpecJson reads the embedded spec") {
  auto specs = mp::ParseSpecJson(
      R"({"inputs": [{"name": "idx", "dtype": "int64", "shape": [8, 64], "batch_dim": 0, "range": [0, 1024]},
                     {"name": "h0", "dtype": "float32", "shape": [2, 4, 32], "batch_dim": 1}]})",
      "m.pt");
  REQUIRE(specs.size() == 2);
  CHECK(specs[0].has_range);
  CHECK(specs[0].high == 1024);
  CHECK(specs[1].batch_dim == 1);
  CHECK_FALSE(specs[1].has_range);
}

TEST_CASE("ParseSpecJson errors name the source and the key") {
  CHECK_THROWS_WITH_AS(mp::ParseSpecJson("{", "m.pt"), doctest::Contains("m.pt: input spec is not valid JSON"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseSpecJson("{}", "m.pt"), doctest::Contains("\"inputs\" array"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseSpecJson(R"({"inputs": [{"shape": [1]}]})", "m.pt"),
                       doctest::Contains("m.pt: inputs[0]"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseSpecJson(R"({"inputs": [{"dtype": "f32", "shape": [1]}]})", "m.pt"),
                       doctest::Contains("unknown dtype 'f32'"), InputError);
  CHECK_THROWS_WITH_AS(
      mp::ParseSpecJson(R"({"inputs": [{"dtype": "float32", "shape": [1], "batch_dim": 3}]})", "m.pt"),
      doctest::Contains("batch_dim: 3 out of range"), InputError);
  CHECK_THROWS_WITH_AS(
      mp::ParseSpecJson(R"({"inputs": [{"dtype": "int64", "shape": [1], "range": [5, 5]}]})", "m.pt"),
      doctest::Contains("range"), InputError);
}

// Found by fuzz/spec_json_fuzz.cpp: numbers that do not fit (or are not
// integers) were cast unchecked, which is undefined or wraps.
TEST_CASE("ParseSpecJson refuses numbers that are not int64 dimensions") {
  CHECK_THROWS_WITH_AS(mp::ParseSpecJson(R"({"inputs": [{"dtype": "float32", "shape": [1e300]}]})", "m.pt"),
                       "m.pt: inputs[0].shape[0]: expected an integer, found 1e+300", InputError);
  CHECK_THROWS_WITH_AS(mp::ParseSpecJson(R"({"inputs": [{"dtype": "float32", "shape": [4.5]}]})", "m.pt"),
                       doctest::Contains("expected an integer"), InputError);
  CHECK_THROWS_WITH_AS(
      mp::ParseSpecJson(R"({"inputs": [{"dtype": "float32", "shape": [2, 3], "batch_dim": 4294967296}]})", "m.pt"),
      doctest::Contains("batch_dim: 4294967296 out of range"), InputError);
  CHECK_THROWS_WITH_AS(
      mp::ParseSpecJson(R"({"inputs": [{"dtype": "float32", "shape": [18446744073709551615]}]})", "m.pt"),
      doctest::Contains("expected an integer"), InputError);
  CHECK_THROWS_WITH_AS(mp::ParseSpecJson(R"({"inputs": [{"dtype": "float32", "shape": [4, 0]}]})", "m.pt"),
                       "m.pt: inputs[0].shape[1]: expected a dimension of at least 1, found 0", InputError);
}

TEST_CASE("dtype sizes") {
  CHECK(mp::DtypeBytes("float32") == 4);
  CHECK(mp::DtypeBytes("int64") == 8);
  CHECK(mp::DtypeBytes("bfloat16") == 2);
  CHECK(mp::DtypeBytes("nope") == 0);
  CHECK(mp::IsIntegerDtype("int32"));
  CHECK_FALSE(mp::IsIntegerDtype("float16"));
}
