// Profile files round-trip, refuse other graphs and inputs, and name bad
// keys; interpolation between measured micro-batch sizes.
#include <doctest/doctest.h>

#include <cmath>

#include "common/error.h"
#include "planner/profile/merge_sizes.h"
#include "planner/profile/profile.h"
#include "planner/profile/pass_scale.h"
#include "planner/profile/profile_file.h"

namespace {

mp::Profile Sample() {
  mp::Profile p;
  p.fingerprint = "1a2b3c4d5e6f7081";
  mp::TensorSpec x = mp::ParseTensorSpec("int64[8,64]");
  x.name = "idx";
  x.has_range = true;
  x.high = 1024;
  p.inputs = {x};
  p.batch = 8;
  p.training = true;
  p.source = "measured";
  p.device = "cpu";
  p.threads = 2;
  p.warmup = 1;
  p.repeats = 5;
  p.microbatch_sizes = {1, 2, 8};
  p.whole_forward_ms = 6.125;
  p.whole_backward_ms = 12.25;
  p.coverage = 0.97;
  p.backward_coverage = 1.02;
  p.shared_slowdown = {1, 1.25};
  p.shared_slowdown_microbatch = 2;
  p.shared_slowdown_sizes = {1, 2};
  p.shared_slowdown_by_size = {{1, 1.5}, {1, 1.25}};
  p.process_slowdown_by_size = {{1, 1.125}, {1, 1.0625}};
  p.shared_slowdown_band = {0.75, 1.5};
  p.shared_slowdown_turns = 25;
  p.worker_speed = {1, 1.375};
  p.handoff_ms = 0.0425;
  p.process_link = {0.5625, 1.25e9};
  p.allreduce_link = {0.25, 0};
  p.allreduce_after_step = {1 << 20, 1.5, 2, 0.375, 12.5};
  p.step_overhead_ms = {0.0625, 0.078125};
  p.pass_band = {0.98, 1.03};
  p.reference_ms = 0.8125;
  p.reference_band = {0.97, 1.05};
  p.pass_scale = 1.0125;
  p.whole_scale = {{0.875, 0.9375}, {0.9375, 1}, {1, 1.0625}};
  p.paced_sizes = {{8, 2, 0.8125}};
  p.sizes_left_out = {{5, "builtins.ValueError: Expected \"more\" than 1 value, got [1, 64] (at `raise`, f.py:2)"}};
  p.accumulate_ms_per_mib = 0.0625;
  p.optimizer_ms_per_mib = {{"sgd", 0.125}, {"momentum", 0.25}, {"adam", 0.5}, {"adamw", 0.5625}};
  p.optimizer_slowdown = {1, 1.5};
  p.node_overhead = {0.00075, 0.000125, 0.003};
  for (int i = 0; i < 3; ++i) {
    mp::NodeCost n;
    n.id = i;
    n.kind = i == 1 ? "aten::linear" : "aten::relu";
    n.layer = i == 0 ? "" : "blocks.0.fc";
    n.forward_ms = {0.5 + i, 1.0 + i, 3.0 + i};
    n.backward_ms = {1.0, 2.0, 6.0};
    if (i == 1) {  // a node measured with I and W
      n.input_backward_ms = {0.4, 0.9, 2.9};
      n.weight_backward_ms = {0.7, 1.2, 3.2};
    }
    n.spread = {0.01, 0.02, 0.03};
    n.flops = {1e6, 2e6, 8e6};
    n.bytes_moved = {4096, 8192, 32768};
    n.output_bytes_per_sample = 512;
    n.output_bytes_fixed = i;
    n.param_bytes = i == 1 ? 65536 : 0;
    if (i == 2) {  // a node whose kept bytes were counted
      n.kept = mp::ValueBytes{2048, 64};
      n.weight_kept = mp::ValueBytes{512, 0};
      n.forward_working_bytes = {0, 1000, 1000};  // a kernel that needs scratch from 2 samples on
      n.backward_working_bytes = {300, 600, 2400};
    }
    p.nodes.push_back(n);
  }
  p.values = {{256, 0}, {0, 65536}, {512, 0}, {512, 1}};
  return p;
}

// Sample()'s YAML with the first `from` replaced by `to`.
std::string SampleYamlWith(const std::string& from, const std::string& to) {
  std::string text = mp::ProfileToYaml(Sample());
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("a profile round-trips through YAML") {
  const mp::Profile p = Sample();
  const mp::Profile q = mp::ProfileFromYaml(mp::ProfileToYaml(p), "p.yaml");
  CHECK(q.fingerprint == p.fingerprint);
  REQUIRE(q.inputs.size() == 1);
  CHECK(mp::FormatTensorSpec(q.inputs[0]) == "int64[8,64]");
  CHECK(q.inputs[0].has_range);
  CHECK(q.inputs[0].high == 1024);
  CHECK(q.training);
  CHECK(q.microbatch_sizes == p.microbatch_sizes);
  CHECK(q.whole_forward_ms == p.whole_forward_ms);
  CHECK(q.coverage == doctest::Approx(p.coverage));
  CHECK(q.shared_slowdown == p.shared_slowdown);
  CHECK(q.shared_slowdown_microbatch == 2);
  CHECK(q.shared_slowdown_band.low == doctest::Approx(0.75));
  CHECK(q.shared_slowdown_band.high == doctest::Approx(1.5));
  CHECK(q.shared_slowdown_turns == 25);
  CHECK(q.worker_speed == p.worker_speed);
  CHECK(q.shared_slowdown_sizes == p.shared_slowdown_sizes);
  CHECK(q.shared_slowdown_by_size == p.shared_slowdown_by_size);
  CHECK(q.process_slowdown_by_size == p.process_slowdown_by_size);
  CHECK(q.handoff_ms == doctest::Approx(p.handoff_ms));
  CHECK(q.process_link.latency_ms == doctest::Approx(0.5625));
  CHECK(q.process_link.bytes_per_s == doctest::Approx(1.25e9));
  CHECK(q.allreduce_link.latency_ms == doctest::Approx(0.25));
  CHECK(q.allreduce_link.bytes_per_s == 0);
  CHECK(q.allreduce_link.Measured());
  CHECK(q.allreduce_after_step.bytes == 1 << 20);
  CHECK(q.allreduce_after_step.ms == doctest::Approx(1.5));
  CHECK(q.allreduce_after_step.microbatch == 2);
  CHECK(q.allreduce_after_step.gap_ms == doctest::Approx(0.375));
  CHECK(q.allreduce_after_step.round_ms == doctest::Approx(12.5));
  CHECK(q.step_overhead_ms == p.step_overhead_ms);
  CHECK(q.pass_band.low == doctest::Approx(0.98));
  CHECK(q.pass_band.high == doctest::Approx(1.03));
  CHECK(q.reference_ms == doctest::Approx(0.8125));
  CHECK(q.pass_scale == doctest::Approx(1.0125));
  CHECK(q.whole_scale == p.whole_scale);
  CHECK(q.accumulate_ms_per_mib == doctest::Approx(0.0625));
  CHECK(q.optimizer_ms_per_mib == p.optimizer_ms_per_mib);
  CHECK(q.optimizer_slowdown == p.optimizer_slowdown);
  CHECK(mp::OptimizerMsPerMib(q, "adamw") == 0.5625);
  CHECK(mp::OptimizerMsPerMib(q, "lion") == 0);
  CHECK(q.node_overhead == p.node_overhead);
  REQUIRE(q.sizes_left_out.size() == 1);
  CHECK(q.sizes_left_out[0].size == 5);
  CHECK(q.sizes_left_out[0].why == p.sizes_left_out[0].why);
  CHECK(q.reference_band.high == doctest::Approx(1.05));
  REQUIRE(q.nodes.size() == p.nodes.size());
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    CHECK(q.nodes[i].kind == p.nodes[i].kind);
    CHECK(q.nodes[i].layer == p.nodes[i].layer);
    CHECK(q.nodes[i].forward_ms == p.nodes[i].forward_ms);
    CHECK(q.nodes[i].backward_ms == p.nodes[i].backward_ms);
    CHECK(q.nodes[i].input_backward_ms == p.nodes[i].input_backward_ms);
    CHECK(q.nodes[i].weight_backward_ms == p.nodes[i].weight_backward_ms);
    CHECK(q.nodes[i].flops == p.nodes[i].flops);
    CHECK(q.nodes[i].output_bytes_fixed == p.nodes[i].output_bytes_fixed);
    CHECK(q.nodes[i].param_bytes == p.nodes[i].param_bytes);
    CHECK(q.nodes[i].kept.has_value() == p.nodes[i].kept.has_value());
    CHECK(q.nodes[i].weight_kept.has_value() == p.nodes[i].weight_kept.has_value());
    if (p.nodes[i].kept) CHECK(q.nodes[i].kept->per_sample == p.nodes[i].kept->per_sample);
    if (p.nodes[i].kept) CHECK(q.nodes[i].kept->fixed == p.nodes[i].kept->fixed);
  }
  CHECK(mp::KeptBytes(q, 2, 4) == 64 + 4 * 2048);
  CHECK(mp::KeptBytes(q, 0, 4) == 0);  // not measured: the rules estimate it
  CHECK(mp::WeightKeptBytes(q, 2, 4) == 4 * 512);
  // Working memory per size, between sizes on the line joining them.
  CHECK(q.nodes[2].forward_working_bytes == p.nodes[2].forward_working_bytes);
  CHECK(q.nodes[2].backward_working_bytes == p.nodes[2].backward_working_bytes);
  CHECK(mp::ForwardWorkingBytes(q, 2, 4) == 1000);
  CHECK(mp::BackwardWorkingBytes(q, 2, 4) == 600 + 1800 * 2 / 6);
  CHECK(mp::BackwardWorkingBytes(q, 0, 4) == -1);  // not measured: the planner estimates it
  REQUIRE(q.values.size() == p.values.size());
  CHECK(q.values[3].per_sample == 512);
  CHECK(q.values[3].fixed == 1);
  // Writing the read profile gives the same text: nothing is lost either way.
  CHECK(mp::ProfileToYaml(q) == mp::ProfileToYaml(p));
}

TEST_CASE("a profile of another graph, input spec or mode is refused") {
  const mp::Profile p = Sample();
  CHECK_NOTHROW(mp::CheckProfileMatches(p, p.fingerprint, p.inputs, true, "p.yaml"));
  CHECK_THROWS_WITH_AS(mp::CheckProfileMatches(p, "ffff", p.inputs, true, "p.yaml"),
                       "p.yaml: profile of a different graph (fingerprint 1a2b3c4d5e6f7081, this model's is ffff)",
                       mp::InputError);
  auto other = p.inputs;
  other[0].shape = {16, 64};
  CHECK_THROWS_WITH_AS(mp::CheckProfileMatches(p, p.fingerprint, other, true, "p.yaml"),
                       "p.yaml: profile was taken on inputs int64[8,64], not int64[16,64]", mp::InputError);
  // Where --batch is all that differs, the flag is named.
  CHECK_THROWS_WITH_AS(mp::CheckProfileMatches(p, p.fingerprint, other, true, "p.yaml", 16),
                       "--batch 16: p.yaml was profiled at batch 8 (inputs int64[8,64]); leave --batch out, or "
                       "profile again without --profile-in",
                       mp::InputError);
  other[0].shape = {16, 32};
  CHECK_THROWS_WITH_AS(mp::CheckProfileMatches(p, p.fingerprint, other, true, "p.yaml", 16),
                       "p.yaml: profile was taken on inputs int64[8,64], not int64[16,32]", mp::InputError);
  CHECK_THROWS_WITH_AS(mp::CheckProfileMatches(p, p.fingerprint, p.inputs, false, "p.yaml"),
                       "p.yaml: profile is for training, the plan is for inference", mp::InputError);
  // A model with dropout is another graph in each mode: the mode is named.
  CHECK_THROWS_WITH_AS(mp::CheckProfileMatches(p, "ffff", p.inputs, false, "p.yaml"),
                       "p.yaml: profile is for training, the plan is for inference", mp::InputError);
}

TEST_CASE("malformed profile files name the problem") {
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml("format: [", "p.yaml"), doctest::Contains("p.yaml: not valid YAML"),
                       mp::InputError);
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml("format: other/v9\n", "p.yaml"),
                       "p.yaml: format: expected mpplan-profile/v1, found 'other/v9'", mp::InputError);
  const std::string text = mp::ProfileToYaml(Sample());
  const std::string no_batch = text.substr(0, text.find("batch:")) + text.substr(text.find("mode:"));
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(no_batch, "p.yaml"), "p.yaml: top level: missing key 'batch'", mp::InputError);
  const std::string short_list = SampleYamlWith("forward_ms: [0.5, 1, 3]", "forward_ms: [0.5, 1]");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(short_list, "p.yaml"),
                       "p.yaml: nodes[0].forward_ms: 2 entries for 3 micro-batch sizes", mp::InputError);
  const std::string short_bytes =
      SampleYamlWith("backward_working_bytes: [300, 600, 2400]", "backward_working_bytes: [300, 600]");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(short_bytes, "p.yaml"),
                       "p.yaml: nodes[2].backward_working_bytes: 2 entries for 3 micro-batch sizes", mp::InputError);
  const std::string negative_bytes =
      SampleYamlWith("forward_working_bytes: [0, 1000, 1000]", "forward_working_bytes: [0, -1, 0]");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(negative_bytes, "p.yaml"),
                       "p.yaml: nodes[2].forward_working_bytes: expected bytes >= 0, found -1", mp::InputError);
  const std::string fast = SampleYamlWith("shared_slowdown: [1, 1.25]", "shared_slowdown: [1, 0.5]");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(fast, "p.yaml"), "p.yaml: shared_slowdown[1]: expected a factor >= 1, found 0.5",
                       mp::InputError);
  const std::string early = SampleYamlWith("handoff_ms: 0.0425", "handoff_ms: -1");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(early, "p.yaml"), "p.yaml: handoff_ms: expected a time >= 0, found -1",
                       mp::InputError);
  const std::string link = SampleYamlWith("bytes_per_s: 1.25e+09", "bytes_per_s: 1.25e+09, hops: 2");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(link, "p.yaml"),
                       "p.yaml: process_link.hops: unknown key (expected one of latency_ms, bytes_per_s)",
                       mp::InputError);
  const std::string no_bytes = SampleYamlWith("{bytes: 1048576", "{bytes: 0");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(no_bytes, "p.yaml"),
                       "p.yaml: allreduce_after_step.bytes: expected a byte count >= 1, found 0", mp::InputError);
  const std::string past_batch = SampleYamlWith("microbatch: 2,", "microbatch: 9,");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(past_batch, "p.yaml"),
                       "p.yaml: allreduce_after_step.microbatch: 9 is out of range (expected 1 to 8)", mp::InputError);
  const std::string lone_gap = SampleYamlWith(", round_ms: 12.5}", "}");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(lone_gap, "p.yaml"),
                       "p.yaml: allreduce_after_step.gap_ms: expected gap_ms and round_ms together", mp::InputError);
  const std::string no_round = SampleYamlWith("round_ms: 12.5}", "round_ms: 0}");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(no_round, "p.yaml"),
                       "p.yaml: allreduce_after_step.round_ms: expected a time > 0, found 0", mp::InputError);
  const std::string inverted = SampleYamlWith("pass_band: [0.98, 1.03]", "pass_band: [1.03, 0.98]");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(inverted, "p.yaml"),
                       "p.yaml: pass_band: expected [low, high] with 0 < low <= 1 <= high, found [1.03, 0.98]",
                       mp::InputError);
  const std::string short_row = SampleYamlWith("  - [1, 1.5]", "  - [1.5]");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(short_row, "p.yaml"),
                       "p.yaml: shared_slowdown_by_size[0]: 1 factors, shared_slowdown has 2", mp::InputError);
  const std::string short_process_row = SampleYamlWith("  - [1, 1.0625]", "  - [1.0625]");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(short_process_row, "p.yaml"),
                       "p.yaml: process_slowdown_by_size[1]: 1 factors, shared_slowdown has 2", mp::InputError);
  // The processes' rows without the threads' factors they stand beside.
  mp::Profile bare = Sample();
  bare.shared_slowdown.clear();
  bare.shared_slowdown_turns = 0;
  std::string no_factors = mp::ProfileToYaml(bare);
  no_factors += "process_slowdown_by_size:\n  - [1, 1.125]\n";
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(no_factors, "p.yaml"),
                       "p.yaml: process_slowdown_by_size: given without shared_slowdown", mp::InputError);
  const std::string process_rows_short = SampleYamlWith("  - [1, 1.0625]\n", "");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(process_rows_short, "p.yaml"),
                       doctest::Contains("p.yaml: process_slowdown_by_size: expected 2"), mp::InputError);
  const std::string no_turns = SampleYamlWith("shared_slowdown_turns: 25", "shared_slowdown_turns: 0");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(no_turns, "p.yaml"),
                       "p.yaml: shared_slowdown_turns: expected a count >= 1, found 0", mp::InputError);
  // The plan reader's classes of bad input, in its message shape: a typo'd
  // key, a repeated one, a word where a number goes.
  const std::string text_ok = mp::ProfileToYaml(Sample());
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(text_ok + "batchsize: 8\n", "p.yaml"),
                       doctest::Contains("p.yaml: batchsize: unknown key (expected one of format, fingerprint,"),
                       mp::InputError);
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(text_ok + "batch: 9\n", "p.yaml"), "p.yaml: batch: duplicate key",
                       mp::InputError);
  const std::string word = SampleYamlWith("batch: 8", "batch: eight");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(word, "p.yaml"), "p.yaml: batch: expected an integer, found 'eight'",
                       mp::InputError);
  const std::string slow_first = SampleYamlWith("worker_speed: [1, 1.375]", "worker_speed: [1.5, 1]");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(slow_first, "p.yaml"),
                       "p.yaml: worker_speed: expected worker 0 at 1 and one entry per worker", mp::InputError);
  const std::string negative = SampleYamlWith("worker_speed: [1, 1.375]", "worker_speed: [1, -2]");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(negative, "p.yaml"),
                       doctest::Contains("p.yaml: worker_speed[1]: expected a time multiplier"), mp::InputError);
  const std::string unscaled = SampleYamlWith("pass_scale: 1.0125", "pass_scale: 0");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(unscaled, "p.yaml"), "p.yaml: pass_scale: expected a factor > 0, found 0",
                       mp::InputError);
  const std::string short_scale =
      SampleYamlWith("  - [0.9375, 1]\n  - [1, 1.0625]", "  - [0.9375, 1]");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(short_scale, "p.yaml"), "p.yaml: whole_scale: expected 3 entries, found 2",
                       mp::InputError);
  const std::string no_band = SampleYamlWith("shared_slowdown_band: [0.75, 1.5]", "shared_slowdown_band: [1.5]");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(no_band, "p.yaml"), "p.yaml: shared_slowdown_band: expected 2 entries, found 1",
                       mp::InputError);
  const std::string two = SampleYamlWith("node_overhead_ms: [0.00075, 0.000125, 0.003]", "node_overhead_ms: [0.00075, 0.003]");
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(two, "p.yaml"),
                       "p.yaml: node_overhead_ms: expected 3 entries (forward per call, per leaf, backward per call), "
                       "found 2",
                       mp::InputError);
}

TEST_CASE("the all-reduce after a step scales the probe's line through the model's own sum") {
  mp::Profile p = Sample();
  p.allreduce_link = {0.5, 1e9};  // two hops of 0.5 ms + half the bytes at 1 GB/s
  CHECK(mp::ProbedAllReduceMs(p.allreduce_link, 2000000) == doctest::Approx(3.0));
  p.allreduce_after_step = {2000000, 4.5, 2};
  CHECK(mp::AllReduceAfterStepFactor(p) == doctest::Approx(1.5));
  p.allreduce_after_step.ms = 1.5;  // a sum faster than the probe's line: the probe's noise, the line stands
  CHECK(mp::AllReduceAfterStepFactor(p) == 1);
  p.allreduce_after_step = {};  // a profile from before it: the line as it is
  CHECK(mp::AllReduceAfterStepFactor(p) == 1);
  p.allreduce_after_step = {2000000, 4.5, 2};
  p.allreduce_link = {};
  CHECK(mp::AllReduceAfterStepFactor(p) == 1);
}

TEST_CASE("replicas wait for the latest of them: half the probe's gap for two, the expected latest for more") {
  mp::Profile p = Sample();
  p.allreduce_after_step = {2000000, 4.5, 2, 1.0, 10.0};  // steps 1 ms apart in rounds of 10 ms
  CHECK(mp::ReplicaWaitShare(p, 1) == 0);
  CHECK(mp::ReplicaWaitShare(p, 2) == doctest::Approx(0.05));
  // The latest of R normal times: 1.029 and 1.424 spreads past the mean
  // for 4 and 8, against 0.564 for 2 (the expected maxima of standard
  // normal samples).
  CHECK(mp::ReplicaWaitShare(p, 4) == doctest::Approx(0.05 * 1.0294 / 0.5642).epsilon(0.002));
  CHECK(mp::ReplicaWaitShare(p, 8) == doctest::Approx(0.05 * 1.4236 / 0.5642).epsilon(0.002));
  p.allreduce_after_step.gap_ms = p.allreduce_after_step.round_ms = 0;  // a profile from before the gap
  CHECK(mp::ReplicaWaitShare(p, 2) == 0);
}

TEST_CASE("a profile's noise becomes the band of its predictions") {
  // Quartiles, so one sample from a slow stretch does not set the band.
  const mp::Band b = mp::SampleBand({0.9, 1.0, 1.0, 1.0, 1.0, 1.02, 1.04, 1.1, 5.0});
  CHECK(b.low == doctest::Approx(1.0));
  CHECK(b.high == doctest::Approx(1.04));
  CHECK(mp::SampleBand({1.0, 2.0}).Empty());  // too few to say
  // The median of n samples: each side 2.383 / sqrt(n) of the quartile's distance.
  const mp::Band median = mp::MedianBand({0.96, 1.08}, 4);
  CHECK(median.low == doctest::Approx(1 - 0.04 * 2.383 / 2));
  CHECK(median.high == doctest::Approx(1 + 0.08 * 2.383 / 2));
  const mp::Band both = mp::Combine({0.97, 1.03}, {0.96, 1.04});
  CHECK(both.low == doctest::Approx(0.95));
  CHECK(both.high == doctest::Approx(1.05));
  CHECK(mp::Within(104, 100, both));
  CHECK_FALSE(mp::Within(106, 100, both));
  CHECK_FALSE(mp::Within(94, 100, both));
  // A profile without samples (a device profile's estimates) has none.
  CHECK(mp::PredictionBand(mp::Profile{}, 2).Empty());
  mp::Profile p = Sample();
  const mp::Band one = mp::PredictionBand(p, 1);
  CHECK(one.low < 1);
  CHECK(one.high > 1.03);  // wider than the passes alone: the reference adds to it
  // Stages that compute at once pay the contention factor, the median of
  // 25 turns whose quartiles lay at 0.75 and 1.5 of it: each side widens by
  // 2.383 / 5 of that, in quadrature. One stage pays no factor. The search
  // ranks by the passes' noise alone.
  const mp::Band two = mp::PredictionBand(p, 2);
  CHECK(two.high == doctest::Approx(1 + std::hypot(one.high - 1, 0.5 * 2.383 / 5)));
  CHECK(two.low == doctest::Approx(1 - std::hypot(1 - one.low, 0.25 * 2.383 / 5)));
  CHECK(mp::RankingBand(p).high == doctest::Approx(mp::MedianBand(p.pass_band, 5).high));
}

TEST_CASE("node times are scaled to the passes' median total, each pass against the sums it is made of") {
  // One-sided noise: every node's median below its mean, so the passes
  // run over the sum of the medians; pooled over sizes, the median ratio.
  mp::SizePasses small{{10.2, 10.4, 10.3}, {false, false, false}, 10, 11};
  mp::SizePasses large{{41.0, 44.0}, {false, false}, 40, 44};
  CHECK(mp::PassScale({small, large}) == doctest::Approx(1.03));  // of 1.02, 1.04, 1.03, 1.025, 1.1
  // A split pass (I and W timed on their own) is compared with the split
  // sum, not the plain one: I + W costing more than B is no bias.
  const mp::SizePasses split{{20, 22, 20, 22}, {false, true, false, true}, 20, 22};
  CHECK(mp::PassScale({split}) == 1);
  // Too few passes to tell (fewer than 3; with one kept pass a size, each
  // pass is its nodes' sum anyway).
  CHECK(mp::PassScale({mp::SizePasses{{10.5, 10.4}, {false, false}, 10, 10}}) == 1);
  CHECK(mp::PassScale({mp::SizePasses{{1, 2, 3}, {false, false, false}, 0, 0}}) == 1);
  // A load that came and went is not the medians' bias: at most 10% either way.
  CHECK(mp::PassScale({mp::SizePasses{{14, 15, 13}, {false, false, false}, 10, 10}}) == doctest::Approx(1.1));
  CHECK(mp::PassScale({mp::SizePasses{{7, 8, 6}, {false, false, false}, 10, 10}}) == doctest::Approx(1 / 1.1));
}

TEST_CASE("each size's node times are scaled to the whole graph's warm run, within bounds") {
  CHECK(mp::WholeScale(19.0, 20.0) == doctest::Approx(0.95));
  CHECK(mp::WholeScale(21.0, 20.0) == doctest::Approx(1.05));
  CHECK(mp::WholeScale(10.0, 20.0) == doctest::Approx(1 / mp::kMaxWholeScale));
  CHECK(mp::WholeScale(40.0, 20.0) == doctest::Approx(mp::kMaxWholeScale));
  CHECK(mp::WholeScale(0, 20.0) == 1);   // not measured
  CHECK(mp::WholeScale(19.0, 0) == 1);   // nodes that take no time
}

TEST_CASE("the contention factor at a micro-batch size interpolates between the sizes it was measured at") {
  mp::Profile p = Sample();  // 1.5 at micro-batch 1, 1.25 at 2
  CHECK(mp::SharedSlowdownAt(p, 1)[1] == doctest::Approx(1.5));
  CHECK(mp::SharedSlowdownAt(p, 2)[1] == doctest::Approx(1.25));
  CHECK(mp::SharedSlowdownAt(p, 8)[1] == doctest::Approx(1.25));  // the nearest row beyond
  // A plan of processes (replicas) reads the processes' rows, the same way.
  CHECK(mp::SharedSlowdownAt(p, 1, true)[1] == doctest::Approx(1.125));
  CHECK(mp::SharedSlowdownAt(p, 8, true)[1] == doctest::Approx(1.0625));
  p.process_slowdown_by_size.clear();  // not measured: the threads' rows serve
  CHECK(mp::SharedSlowdownAt(p, 1, true)[1] == doctest::Approx(1.5));
  p.shared_slowdown_sizes = {1, 5};
  // In log size: 2 is log 2 / log 5 of the way from 1 to 5.
  CHECK(mp::SharedSlowdownAt(p, 2)[1] == doctest::Approx(1.5 - 0.25 * std::log(2.0) / std::log(5.0)));
  CHECK(mp::SharedSlowdownAt(p, 5)[1] == doctest::Approx(1.25));
  // Profiles from before sizes were measured: the one row serves every size.
  p.shared_slowdown_sizes.clear();
  p.shared_slowdown_by_size.clear();
  CHECK(mp::SharedSlowdownAt(p, 1) == p.shared_slowdown);
}

TEST_CASE("times interpolate between measured sizes and never extrapolate") {
  const mp::Profile p = Sample();
  CHECK(mp::ForwardMs(p, 0, 1) == doctest::Approx(0.5));
  CHECK(mp::ForwardMs(p, 0, 8) == doctest::Approx(3.0));
  CHECK(mp::ForwardMs(p, 0, 5) == doctest::Approx(1.0 + 3.0 / 6.0 * 2.0));
  CHECK(mp::BackwardMs(p, 2, 2) == doctest::Approx(2.0));
  CHECK(mp::CanInterpolate(p, 8));
  CHECK_FALSE(mp::CanInterpolate(p, 9));
  CHECK_THROWS_AS(mp::ForwardMs(p, 0, 9), mp::PlanError);
  CHECK(mp::ValueBytesAt(p, 3, 4) == 1 + 512 * 4);
  CHECK(mp::OutputBytes(p, 2, 3) == 2 + 512 * 3);
}

TEST_CASE("I and W: measured where the profile has them, else halves for a node that reads parameters") {
  const mp::Profile p = Sample();
  // Node 1 was measured: its own figures, interpolated like the others.
  // (sizes 1, 2, 8)
  CHECK(mp::InputBackwardMs(p, 1, 2) == doctest::Approx(0.9));
  CHECK(mp::WeightBackwardMs(p, 1, 5) == doctest::Approx(2.2));
  // Node 0 reads no parameters and was not split: all of its backward is I.
  CHECK(mp::InputBackwardMs(p, 0, 8) == doctest::Approx(6.0));
  CHECK(mp::WeightBackwardMs(p, 0, 8) == doctest::Approx(0.0));
  mp::Profile old = p;
  old.nodes[1].input_backward_ms.clear();
  old.nodes[1].weight_backward_ms.clear();
  CHECK(mp::InputBackwardMs(old, 1, 8) == doctest::Approx(3.0));
  CHECK(mp::WeightBackwardMs(old, 1, 8) == doctest::Approx(3.0));
  // A file with one of the two keys names the node.
  std::string text = mp::ProfileToYaml(p);
  const size_t at = text.find(", weight_backward_ms: [");
  REQUIRE(at != std::string::npos);
  text.erase(at, text.find(']', at) + 1 - at);
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(text, "p.yaml"),
                       doctest::Contains("expected input_backward_ms and weight_backward_ms together"), mp::InputError);
}

TEST_CASE("a size measured later takes the profile's pace from a size it holds, measured again beside it") {
  const mp::Profile p = Sample();  // sizes 1, 2, 8
  CHECK(mp::AnchorSize(p, 4) == 2);  // the largest below
  CHECK(mp::AnchorSize(p, 16) == 8);
  mp::Profile without_one = p;
  without_one.microbatch_sizes = {2, 8};
  CHECK(mp::AnchorSize(without_one, 1) == 2);  // none below: the smallest above
  // Measured in a stretch 1.5x slower: the anchor (2) too.
  mp::Profile more = Sample();
  more.microbatch_sizes = {2, 4};
  more.whole_scale = {{1, 1}, {1, 1}};
  for (mp::NodeCost& n : more.nodes) {
    n.forward_ms = {1.5 * (1.0 + n.id), 1.5 * (2.0 + n.id)};
    n.backward_ms = {1.5 * 2.0, 1.5 * 4.0};
    if (!n.input_backward_ms.empty()) {
      n.input_backward_ms = {1.5 * 0.9, 1.5 * 1.8};
      n.weight_backward_ms = {1.5 * 1.2, 1.5 * 2.4};
    }
    n.spread = {0.02, 0.02};
    n.flops = {2e6, 4e6};
    n.bytes_moved = {8192, 16384};
    if (!n.backward_working_bytes.empty()) n.forward_working_bytes = {0, 0}, n.backward_working_bytes = {600, 1200};
  }
  mp::Profile elsewhere = more;  // a profile without the anchor: left alone
  CHECK(mp::PaceToAnchor(elsewhere, p, 4) == 1);
  CHECK(elsewhere.nodes[1].forward_ms == more.nodes[1].forward_ms);
  CHECK(mp::PaceToAnchor(more, p, 2) == doctest::Approx(1 / 1.5));
  mp::Profile merged = p;
  mp::MergeSizes(merged, more);
  CHECK(merged.microbatch_sizes == std::vector<int64_t>{1, 2, 4, 8});
  for (const mp::NodeCost& n : merged.nodes) {
    CAPTURE(n.id);
    CHECK(n.forward_ms[2] == doctest::Approx(2.0 + n.id));  // the profile's pace, not the stretch's
    CHECK(n.backward_ms[2] == doctest::Approx(4.0));
    CHECK(n.forward_ms[1] == p.nodes[size_t(n.id)].forward_ms[1]);  // the anchor keeps the profile's own
  }
  CHECK(merged.nodes[1].input_backward_ms[2] == doctest::Approx(1.8));
  CHECK(merged.nodes[1].weight_backward_ms[2] == doctest::Approx(2.4));
}

TEST_CASE("a profile's paced sizes must be sizes it holds, and its sizes left out sizes it does not") {
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(SampleYamlWith("{size: 8, anchor: 2", "{size: 4, anchor: 2"), "p.yaml"),
                       doctest::Contains("expected one of microbatch_sizes, found 4"), mp::InputError);
  CHECK_THROWS_WITH_AS(mp::ProfileFromYaml(SampleYamlWith("{size: 5, why:", "{size: 2, why:"), "p.yaml"),
                       doctest::Contains("expected a size not in microbatch_sizes, found 2"), mp::InputError);
}

TEST_CASE("sizes measured later join the profile in order, and replace the line between their neighbours") {
  mp::Profile p = Sample();  // sizes 1, 2, 8
  const double line = mp::ForwardMs(p, 1, 4);
  CHECK(line == doctest::Approx(2.0 + 2.0 / 6 * 2.0));
  mp::Profile more = Sample();
  more.microbatch_sizes = {2, 4};  // 2: held already, kept as it was
  more.whole_scale = {{99, 99}, {0.96875, 1.03125}};
  for (mp::NodeCost& n : more.nodes) {
    n.forward_ms = {99, 7.5 + n.id};
    n.backward_ms = {99, 9.5};
    if (!n.input_backward_ms.empty()) n.input_backward_ms = {99, 4.5}, n.weight_backward_ms = {99, 5};
    n.spread = {99, 0.04};
    n.flops = {99, 4e6};
    n.bytes_moved = {99, 16384};
    if (!n.backward_working_bytes.empty()) n.forward_working_bytes = {99, 0}, n.backward_working_bytes = {99, 1200};
  }
  mp::MergeSizes(p, more);
  CHECK(p.microbatch_sizes == std::vector<int64_t>{1, 2, 4, 8});
  CHECK(p.whole_scale == std::vector<std::vector<double>>{{0.875, 0.9375}, {0.9375, 1}, {0.96875, 1.03125}, {1, 1.0625}});
  for (const mp::NodeCost& n : p.nodes) {
    CAPTURE(n.id);
    CHECK(n.forward_ms == std::vector<double>{0.5 + n.id, 1.0 + n.id, 7.5 + n.id, 3.0 + n.id});
    CHECK(n.backward_ms == std::vector<double>{1.0, 2.0, 9.5, 6.0});
    CHECK(n.flops == std::vector<double>{1e6, 2e6, 4e6, 8e6});
    CHECK(n.spread.size() == 4);
    CHECK(n.bytes_moved.size() == 4);
  }
  CHECK(p.nodes[1].input_backward_ms == std::vector<double>{0.4, 0.9, 4.5, 2.9});
  CHECK(p.nodes[1].weight_backward_ms == std::vector<double>{0.7, 1.2, 5, 3.2});
  CHECK(p.nodes[0].input_backward_ms.empty());  // estimated before, estimated still
  CHECK(p.nodes[2].forward_working_bytes == std::vector<int64_t>{0, 1000, 0, 1000});
  CHECK(p.nodes[2].backward_working_bytes == std::vector<int64_t>{300, 600, 1200, 2400});
  CHECK(p.nodes[0].backward_working_bytes.empty());
  // The measured time, not the line, and the neighbours' lines move with it.
  CHECK(mp::ForwardMs(p, 1, 4) == 8.5);
  CHECK(mp::ForwardMs(p, 1, 3) == doctest::Approx((2.0 + 8.5) / 2));
  CHECK(p.coverage == Sample().coverage);
  // It round-trips like any profile.
  CHECK(mp::ProfileToYaml(mp::ProfileFromYaml(mp::ProfileToYaml(p), "p.yaml")) == mp::ProfileToYaml(p));

  mp::Profile other = Sample();
  other.nodes.pop_back();
  CHECK_THROWS_AS(mp::MergeSizes(p, other), mp::InternalError);
}
