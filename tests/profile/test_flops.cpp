// FLOP and traffic formulas against hand-computed values, and the timer's
// quantiles and page-fault count.
#include <doctest/doctest.h>

#include <sys/mman.h>

#include "planner/profile/flops.h"
#include "planner/profile/timer.h"

using mp::ArgTensors;
using mp::EstimateWork;
using mp::TensorDims;

namespace {

ArgTensors T(std::vector<int64_t> sizes, int64_t element_bytes = 4) { return {TensorDims{sizes, element_bytes}}; }

}  // namespace

TEST_CASE("conv2d: 2 * outputs * Cin/groups * kh * kw") {
  // [2,3,8,8] * [4,3,3,3] -> [2,4,6,6]: 288 outputs, each a 27-long dot product.
  auto w = EstimateWork("aten::conv2d", {T({2, 3, 8, 8}), T({4, 3, 3, 3}), T({4})}, {T({2, 4, 6, 6})});
  CHECK(w.flops == doctest::Approx(2.0 * 288 * 27));
  CHECK(w.bytes_moved == doctest::Approx(4.0 * (384 + 108 + 4 + 288)));
  // Depthwise: groups = channels, weight [4,1,3,3]: 9 MACs per output.
  auto dw = EstimateWork("aten::conv2d", {T({1, 4, 8, 8}), T({4, 1, 3, 3})}, {T({1, 4, 6, 6})});
  CHECK(dw.flops == doctest::Approx(2.0 * 144 * 9));
}

TEST_CASE("linear, matmul, bmm, addmm") {
  // [5,10] x [20,10]^T + bias: 100 outputs of 10 MACs, plus 100 bias adds.
  CHECK(EstimateWork("aten::linear", {T({5, 10}), T({20, 10}), T({20})}, {T({5, 20})}).flops ==
        doctest::Approx(2100));
  CHECK(EstimateWork("aten::linear", {T({5, 10}), T({20, 10}), {}}, {T({5, 20})}).flops == doctest::Approx(2000));
  // Batched [2,3,4] x [2,4,5] -> [2,3,5]: 30 outputs of 4 MACs.
  CHECK(EstimateWork("aten::matmul", {T({2, 3, 4}), T({2, 4, 5})}, {T({2, 3, 5})}).flops == doctest::Approx(240));
  CHECK(EstimateWork("aten::bmm", {T({2, 3, 4}), T({2, 4, 5})}, {T({2, 3, 5})}).flops == doctest::Approx(240));
  // addmm(bias, [3,4], [4,5]): 15 outputs of 4 MACs plus 15 adds.
  CHECK(EstimateWork("aten::addmm", {T({5}), T({3, 4}), T({4, 5})}, {T({3, 5})}).flops == doctest::Approx(135));
}

TEST_CASE("attention, lstm, embedding") {
  // q, k, v [2,4,16,8]: 128 query rows x 16 keys: QK^T and (.)V are 2*128*16*8 each.
  auto a = EstimateWork("aten::scaled_dot_product_attention", {T({2, 4, 16, 8}), T({2, 4, 16, 8}), T({2, 4, 16, 8})},
                        {T({2, 4, 16, 8})});
  CHECK(a.flops == doctest::Approx(32768 + 5 * 2048 + 32768));
  // Two-layer LSTM(8 -> 32), batch-first input [4,12,8]: 48 (step, sample) rows
  // through w_ih0 [128,8], w_hh0 [128,32], w_ih1 [128,32], w_hh1 [128,32].
  ArgTensors params = {{{128, 8}, 4}, {{128, 32}, 4}, {{128}, 4}, {{128}, 4},
                       {{128, 32}, 4}, {{128, 32}, 4}, {{128}, 4}, {{128}, 4}};
  auto l = EstimateWork("aten::lstm", {T({4, 12, 8}), {{{2, 4, 32}, 4}, {{2, 4, 32}, 4}}, params},
                        {T({4, 12, 32}), T({2, 4, 32}), T({2, 4, 32})});
  CHECK(l.flops == doctest::Approx(2.0 * 48 * (1024 + 3 * 4096)));
  // Embedding: a gather of 512 rows of 128 floats; reads the rows, not the table.
  auto e = EstimateWork("aten::embedding", {T({1024, 128}), T({8, 64}, 8)}, {T({8, 64, 128})});
  CHECK(e.flops == 0);
  CHECK(e.bytes_moved == doctest::Approx(2.0 * 8 * 64 * 128 * 4 + 8 * 64 * 8));
}

TEST_CASE("PyTorch's fused encoder layer and attention") {
  // _transformer_encoder_layer_fwd on [2,10,16] (20 rows), in_proj [48,16],
  // out_proj [16,16], feed-forward [32,16] and [16,32]: the rows through
  // each weight, attention's two products over 10 x 10 positions, softmax,
  // and the norms and residuals.
  std::vector<ArgTensors> layer(20);
  layer[0] = T({2, 10, 16});
  layer[3] = T({48, 16});
  layer[5] = T({16, 16});
  layer[14] = T({32, 16});
  layer[16] = T({16, 32});
  const double products = 2.0 * 20 * (48 * 16 + 16 * 16 + 32 * 16 + 16 * 32);
  const double attention = 4.0 * 2 * 10 * 10 * 16 + 5.0 * 2 * 10 * 10;
  CHECK(EstimateWork("aten::_transformer_encoder_layer_fwd", layer, {T({2, 10, 16})}).flops ==
        doctest::Approx(products + attention + 10.0 * 20 * 16));
  // _native_multi_head_attention: 2 x 10 queries over 2 x 6 keys.
  std::vector<ArgTensors> mha(13);
  mha[0] = T({2, 10, 16});
  mha[1] = mha[2] = T({2, 6, 16});
  mha[5] = T({48, 16});
  mha[7] = T({16, 16});
  CHECK(EstimateWork("aten::_native_multi_head_attention", mha, {T({2, 10, 16}), T({2, 10, 6})}).flops ==
        doctest::Approx(2.0 * (20 + 2 * 12) * 256 + 2.0 * 20 * 256 + 4.0 * 2 * 10 * 6 * 16 + 5.0 * 2 * 10 * 6));
}

TEST_CASE("elementwise ops count outputs, views and containers are free") {
  auto relu = EstimateWork("aten::relu", {T({4, 10})}, {T({4, 10})});
  CHECK(relu.flops == 40);
  CHECK(relu.bytes_moved == 320);
  auto norm = EstimateWork("aten::layer_norm", {T({4, 10}), {}, T({10}), T({10})}, {T({4, 10})});
  CHECK(norm.flops == 200);
  for (const char* kind : {"aten::view", "aten::transpose", "aten::size", "prim::ListConstruct", "prim::TupleUnpack"}) {
    auto w = EstimateWork(kind, {T({4, 10})}, {T({10, 4})});
    CHECK(w.flops == 0);
    CHECK(w.bytes_moved == 0);
  }
}

TEST_CASE("the middle mean leaves out the lowest and highest tenth, and sees a cost's slow share the median misses") {
  // A small all-reduce on a busy 2-core host: fast in most steps, a
  // scheduler tick in four of ten. The median reads the fast mode alone.
  const std::vector<double> sum_ms = {0.6, 3.4, 0.5, 0.7, 3.9, 0.6, 6.5, 0.8, 3.1, 0.4};
  CHECK(mp::Quantile(sum_ms, 0.5) == doctest::Approx(0.75));
  CHECK(mp::MiddleMean(sum_ms) == doctest::Approx((0.5 + 0.6 + 0.6 + 0.7 + 0.8 + 3.1 + 3.4 + 3.9) / 8));
  CHECK(mp::MiddleMean({1, 2, 3, 4, 5, 6, 7, 8, 9, 1000}) == doctest::Approx(5.5));  // one stall of ten: out
  CHECK(mp::MiddleMean({1, 2, 9}) == doctest::Approx(4));  // under ten samples: all of them
  CHECK(mp::MiddleMean({}) == 0);
}

TEST_CASE("quantiles interpolate between sorted samples") {
  CHECK(mp::Quantile({5, 1, 3}, 0.5) == 3);
  CHECK(mp::Quantile({1, 2, 3, 4}, 0.5) == doctest::Approx(2.5));
  CHECK(mp::Quantile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.1) == doctest::Approx(2));
  CHECK(mp::Quantile({}, 0.5) == 0);
  int runs = 0;
  const auto t = mp::TimeWork([&] { ++runs; }, {2, 3, 0.0});
  CHECK(runs == 5);  // 2 warm-up runs, 3 samples of one run each
  CHECK(t.median_ms >= 0);
}

TEST_CASE("a sample that touched fresh pages is left out of the median while any other is there") {
  // Two split passes' W of the MLP's linear: one on fresh pages, one not.
  CHECK(mp::UnfaultedMedian({0.65, 0.30}, {true, false}) == doctest::Approx(0.30));
  CHECK(mp::UnfaultedMedian({0.65, 0.30, 0.34}, {true, false, false}) == doctest::Approx(0.32));
  CHECK(mp::UnfaultedMedian({0.65, 0.70}, {true, true}) == doctest::Approx(0.675));  // all faulted: all of them
  CHECK(mp::UnfaultedMedian({0.5, 0.7}, {}) == doctest::Approx(0.6));                // none known: all of them
}

#if defined(__linux__)
TEST_CASE("the calling thread's minor faults count its first touches of fresh pages") {
  // 64 fresh pages mapped by hand (not the allocator's, which may hold used
  // ones), touched once each: 64 faults at least, and none on a second pass.
  const size_t page = 4096, pages = 64;
  void* block = mmap(nullptr, page * pages, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(block != MAP_FAILED);
  char* bytes = static_cast<char*>(block);
  const int64_t before = mp::ThreadMinorFaults();
  for (size_t p = 0; p < pages; ++p) bytes[p * page] = 1;
  const int64_t touched = mp::ThreadMinorFaults();
  for (size_t p = 0; p < pages; ++p) bytes[p * page] = 2;
  const int64_t again = mp::ThreadMinorFaults();
  // Checked after both readings: doctest's own first CHECK touched a fresh
  // page between them once (229 against 228, in a fresh clone's tests).
  CHECK(touched - before >= int64_t(pages));
  CHECK(again == touched);
  munmap(block, page * pages);
}
#endif
