// Terminal report: every stage in the table, the chosen K/M/schedule and the
// runner-up in the summary, warnings on their own lines, and with --explain
// every alternative and comparison, infeasible ones with their reason.
#include <doctest/doctest.h>

#include <algorithm>

#include "common/byte_size.h"
#include "planner/report/report_format.h"
#include "planner/report/report_tables.h"
#include "planner/report/report_text.h"
#include "tests/report/report_lines.h"
#include "tests/report/sample_plan.h"

using namespace mp::testing;

namespace {

// The stage table: the lines between the headline and the summary.
std::vector<std::string> StageLines(const std::string& report) { return SectionLines(report, "plan for "); }

}  // namespace

TEST_CASE("every stage has a row with its device, layers, times, busy share and memory against the limit") {
  const mp::Plan plan = SamplePlan(4, 8);
  const std::string report = mp::FormatPlanReport(plan, false);
  Dump("report_4x8.txt", report);
  const auto lines = StageLines(report);
  REQUIRE(lines.size() == 2 + plan.stages.size());  // header, rule, one per stage
  CHECK(Contains(lines[0], "stage"));
  CHECK(Contains(lines[0], "bwd ms"));
  CHECK(lines[1].find_first_not_of("- ") == std::string::npos);
  for (const mp::PlanStage& s : plan.stages) {
    const std::string& row = lines[2 + s.id];
    CAPTURE(row);
    CHECK(StartsWith(row, "    " + std::to_string(s.id) + "  A100-80GB #" + std::to_string(s.id) + "  "));
    CHECK(Contains(row, s.layers.front() + ".." + s.layers.back()));
    CHECK(Contains(row, mp::FormatMs(s.forward_ms)));
    CHECK(Contains(row, mp::FormatMs(s.backward_ms)));
    CHECK(Contains(row, mp::FormatPercent(s.busy_fraction)));
    CHECK(Contains(row, mp::FormatBytes(s.peak_memory_bytes) + " / 80 GiB"));
    CHECK(Contains(row, mp::FormatCount(s.param_count) + " (" + mp::FormatBytes(s.param_bytes) + ")"));
  }
  // Activations sent per micro-batch: stage 0 sends its output and the skip.
  CHECK(Contains(lines[2], "  " + mp::FormatBytes(2 * 4 * 64 * 56 * 56 * 4) + "  "));
  CHECK(Contains(lines[4], "  " + mp::FormatBytes(4 * 64 * 56 * 56 * 4) + "  "));
  CHECK(Contains(lines.back(), " - "));  // the last stage sends nothing
}

TEST_CASE("columns are aligned and a 4-stage report fits in 120 columns") {
  const std::string report = mp::FormatPlanReport(SamplePlan(4, 8), false);
  for (const std::string& line : Lines(report)) {
    CAPTURE(line);
    CHECK(mp::DisplayWidth(line) <= 120);
    CHECK((line.empty() || line.back() != ' '));
  }
  // The last column is right-aligned, so the header, the rule and every row
  // end in the same column, and so does each column boundary.
  const auto lines = StageLines(report);
  REQUIRE(lines.size() == 6);
  for (const std::string& line : lines) CHECK(line.size() == lines[0].size());
  const size_t device = lines[0].find("device");
  for (size_t i = 2; i < lines.size(); ++i) CHECK(lines[i].find("A100") == device);
}

TEST_CASE("the summary names the step, speedup, bubble, K, M, schedule, partitioner, why and the runner-up") {
  const mp::Plan plan = SamplePlan(4, 8);
  const std::string report = mp::FormatPlanReport(plan, false);
  auto line = [&](const std::string& label) {
    for (const std::string& l : Lines(report)) {
      if (StartsWith(l, label + "  ")) return l;
    }
    FAIL("no summary line " << label << " in\n" << report);
    return std::string();
  };
  CHECK(Contains(line("predicted step"), mp::FormatMs(plan.predicted.step_ms) + " ms"));
  CHECK(Contains(line("predicted step"), "samples/s"));
  CHECK(Contains(line("one device"), mp::FormatMs(plan.predicted.one_device_step_ms) + " ms"));
  CHECK(Contains(line("one device"), mp::FormatRatio(plan.predicted.speedup_vs_one_device)));
  CHECK(Contains(line("bubble"), mp::FormatPercent(plan.predicted.bubble_fraction)));
  CHECK(Contains(line("stages (K)"), " 4"));
  CHECK(Contains(line("micro-batches (M)"), "8 x 4 samples"));
  CHECK(Contains(line("schedule"), "1f1b"));
  CHECK(Contains(line("partitioner"), "dp"));
  CHECK(Contains(line("why"), "fastest of 5 alternatives (3 simulated, 1 ruled out by a lower bound, 1 infeasible)"));
  CHECK(Contains(line("runner-up"),
                 "2 stages x 16 micro-batches, 1f1b at " + mp::FormatMs(plan.alternatives[1].step_ms) + " ms (+3.1%)"));
  CHECK(Contains(line("profile"),
                 "measured on cuda:0, 8 threads, at micro-batch sizes 1, 2, 4, 8, coverage 97.2% (backward 95.1%)"));
  // The optimizer whose state the memory holds, which mpexec runs.
  mp::Plan adamw = plan;
  adamw.optimizer = "adamw";
  CHECK(Contains(mp::FormatPlanReport(adamw, false), "; for adamw (--optimizer), 2 state tensor(s) a trained parameter\n"));
  // A plan at a size the profile did not time says so.
  mp::Plan between = plan;
  between.profile.microbatch_sizes = {1, 8};
  CHECK(Contains(mp::FormatPlanReport(between, false), "at micro-batch sizes 1, 8 (the plan's 4 interpolated), coverage"));
}

TEST_CASE("a fine-tuned model's report says how much of it trains, and only then") {
  mp::Plan plan = SamplePlan(2, 4);
  for (const std::string& l : Lines(mp::FormatPlanReport(plan, false))) CHECK_FALSE(StartsWith(l, "trained  "));
  // Stage 0 frozen, stage 1 a tenth trained: weights, then gradients and
  // Adam's two moments for the trained part only.
  const int64_t p0 = plan.stages[0].param_bytes, p1 = plan.stages[1].param_bytes;
  plan.stages[0].gradient_bytes = 0;
  plan.stages[0].static_bytes = p0;
  plan.stages[1].gradient_bytes = p1 / 10;
  plan.stages[1].static_bytes = p1 + 3 * (p1 / 10);
  const std::string report = mp::FormatPlanReport(plan, false);
  CHECK(Contains(report, "trained            " + mp::FormatBytes(p1 / 10) + " of the parameters' " +
                             mp::FormatBytes(p0 + p1) + " (" + mp::FormatPercent(double(p1 / 10) / double(p0 + p1)) +
                             "); the rest, frozen (requires_grad false) or buffers, holds no gradient or optimizer "
                             "state and is not all-reduced"));
}

TEST_CASE("the schedule line: each other schedule's best, its lower bound where every plan of it was pruned, or why not") {
  mp::Plan plan = SamplePlan(4, 8);
  const double step = plan.alternatives[0].step_ms;
  using mp::ScheduleKind;
  auto add = [&](ScheduleKind kind, double ms, bool feasible, bool simulated, const std::string& why) {
    mp::PlanCandidate a = plan.alternatives[0];
    a.schedule = kind;
    a.step_ms = ms;
    a.feasible = feasible;
    a.simulated = simulated;
    a.why_not = why;
    plan.alternatives.push_back(a);
  };
  add(ScheduleKind::kZeroBubbleV, step * 1.2, true, false, "");
  add(ScheduleKind::kZeroBubbleV, 0, false, false, "zbv: stage 0 needs 90 GiB");
  add(ScheduleKind::kInterleaved1F1B, 0, false, false, "interleaved-1f1b needs M divisible by K");
  const std::string report = mp::FormatPlanReport(plan, false);
  std::string line;
  for (const std::string& l : Lines(report))
    if (StartsWith(l, "schedule  ")) line = l;
  INFO(line);
  CHECK(Contains(line, "gpipe " + mp::FormatMs(step * 1.08) + " ms (+8.0%)"));
  CHECK(Contains(line, "zbv >= " + mp::FormatMs(step * 1.2) + " ms (its lower bound, +20.0%)"));
  CHECK(Contains(line, "interleaved-1f1b: interleaved-1f1b needs M divisible by K"));
  CHECK_FALSE(Contains(line, "90 GiB"));
}

TEST_CASE("warnings are lines of their own starting 'warning: '") {
  const mp::Plan plan = SamplePlan();
  const std::string report = mp::FormatPlanReport(plan, false);
  for (const std::string& warning : plan.warnings) {
    const auto lines = Lines(report);
    CHECK(std::count(lines.begin(), lines.end(), "warning: " + warning) == 1);
  }
}

TEST_CASE("without explain there are no alternatives or comparisons") {
  const std::string report = mp::FormatPlanReport(SamplePlan(), false);
  CHECK_FALSE(Contains(report, "alternatives searched"));
  CHECK_FALSE(Contains(report, "comparisons"));
  CHECK_FALSE(Contains(report, "infeasible:"));
}

TEST_CASE("explain lists every alternative, marks the chosen one and the bound-only one, and says why not") {
  const mp::Plan plan = SamplePlan(4, 8);
  const std::string report = mp::FormatPlanReport(plan, true);
  Dump("report_4x8_explain.txt", report);
  const auto lines = SectionLines(report, "alternatives searched");
  REQUIRE(lines.size() == 2 + plan.alternatives.size());
  int chosen = 0, bound = 0, infeasible = 0;
  for (size_t i = 2; i < lines.size(); ++i) {
    const std::string& row = lines[i];
    CAPTURE(row);
    if (StartsWith(row, "  *")) {
      ++chosen;
      CHECK(Contains(row, "  4   8     4  1f1b"));
      CHECK(Contains(row, mp::FormatMs(plan.predicted.step_ms)));
      CHECK(Contains(row, "1.00x"));
    }
    bound += Contains(row, "(bound)");
    if (Contains(row, "infeasible: dp: stage 0 needs 90 GiB; device 0 has 80 GiB")) ++infeasible;
  }
  CHECK(chosen == 1);
  CHECK(bound == 1);
  CHECK(infeasible == 1);
  // Every alternative appears once, as "K M size schedule".
  for (const mp::PlanCandidate& a : plan.alternatives) {
    const std::vector<std::string> key = {std::to_string(a.stages), std::to_string(a.microbatches),
                                          std::to_string(a.microbatch_size), mp::ScheduleName(a.schedule)};
    CAPTURE(a.stages);
    CAPTURE(a.microbatches);
    CHECK(std::count_if(lines.begin() + 2, lines.end(), [&](const std::string& l) {
            std::vector<std::string> words = Words(l);
            if (!words.empty() && words[0] == "*") words.erase(words.begin());
            return std::equal(key.begin(), key.end(), words.begin());
          }) == 1);
  }
}

TEST_CASE("explain lists every comparison with its ratio to the chosen step, or why it is infeasible") {
  const mp::Plan plan = SamplePlan(4, 8);
  const auto lines = SectionLines(mp::FormatPlanReport(plan, true), "comparisons");
  REQUIRE(lines.size() == 2 + plan.comparisons.size());
  CHECK(Contains(lines[0], "split"));  // the layers comparison has one
  for (size_t i = 0; i < plan.comparisons.size(); ++i) {
    const mp::PlanCandidate& c = plan.comparisons[i];
    const std::string& row = lines[2 + i];
    CAPTURE(row);
    CHECK(Contains(row, "  " + c.method + "  "));
    if (c.feasible) {
      CHECK(Contains(row, mp::FormatMs(c.step_ms)));
      CHECK(Contains(row, mp::FormatRatio(c.step_ms / plan.predicted.step_ms)));
    } else {
      CHECK(Contains(row, "infeasible: " + c.why_not));
    }
  }
  CHECK(Contains(lines[2 + 1], "1.23x"));
  CHECK(Contains(lines[2 + 4], "layer1 | layer2,layer3"));
  CHECK(StartsWith(lines[2], "  *"));  // dp is the chosen plan
}

TEST_CASE("without a split the comparisons table has no split column") {
  mp::Plan plan = SamplePlan();
  plan.comparisons.pop_back();
  CHECK_FALSE(Contains(SectionLines(mp::FormatPlanReport(plan, true), "comparisons")[0], "split"));
}

TEST_CASE("inference: no backward column - one alternative simulated is the fastest, or the only feasible one") {
  mp::Plan plan = SamplePlan(3, 4, mp::ScheduleKind::kForwardOnly);
  plan.alternatives.erase(plan.alternatives.begin() + 1);  // the runner-up
  const std::string report = mp::FormatPlanReport(plan, true);
  CHECK_FALSE(Contains(report, "bwd ms"));
  CHECK(Contains(report, "fwd ms"));
  CHECK(Contains(report, "inference, batch 16"));
  CHECK(Contains(report, "schedule           forward"));
  // the other feasible one was ruled out by its lower bound: slower
  CHECK(Contains(report, "fastest of 3 alternatives (1 simulated, 1 ruled out by a lower bound, 1 infeasible)"));
  CHECK_FALSE(Contains(report, "runner-up"));
  CHECK_FALSE(Contains(report, "gradient back"));
  plan.alternatives.erase(plan.alternatives.begin() + 1);  // the bounded one
  CHECK(Contains(mp::FormatPlanReport(plan, true), "the only feasible one of 2 alternatives"));
}

TEST_CASE("a plan the search did not record, or no search at all, says so") {
  mp::Plan plan = SamplePlan();
  plan.alternatives.erase(plan.alternatives.begin());
  CHECK(Contains(mp::FormatPlanReport(plan, false), "this plan is not one of them"));
  plan.alternatives.clear();
  plan.comparisons.clear();
  const std::string report = mp::FormatPlanReport(plan, true);
  CHECK(Contains(report, "no alternatives recorded"));
  CHECK(Contains(report, "none (the plan was made without comparisons)"));
}

TEST_CASE("a tie with the runner-up names the tie-break") {
  mp::Plan plan = SamplePlan();
  plan.alternatives[1].stages = 4;  // more stages: loses the tie
  plan.alternatives[1].step_ms = plan.alternatives[0].step_ms;
  CHECK(Contains(mp::FormatPlanReport(plan, false),
                 "(+0.0%); ties go to fewer devices, then fewer stages a replica, then fewer recomputing, then "
                 "equal micro-batches, then fewer"));
}

TEST_CASE("a tie won by replicas names the faster pipeline and the rule that chose") {
  // On as many devices a tie goes to fewer stages a replica: 2 replicas of
  // one stage on 2 devices against a 2-stage pipeline predicted 1.3% faster.
  mp::Plan plan = SamplePlan(1, 8);
  plan.replicas = 2;
  plan.alternatives[0].replicas = 2;
  plan.alternatives[0].tie = true;
  plan.alternatives[1].step_ms = 0.987 * plan.alternatives[0].step_ms;  // 2 stages x 16 micro-batches
  plan.alternatives[1].tie = true;
  const std::string report = mp::FormatPlanReport(plan, false);
  CHECK(Contains(report, "faster             2 stages x 16 micro-batches, 1f1b, no replicas at "));
  CHECK(Contains(report, "(-1.3%), a tie: within the tie window, so ties go to fewer devices, then fewer stages a "
                         "replica, then fewer recomputing"));
  // The other way round: a pipeline's runner-up with replicas names them.
  plan.replicas = 1;
  plan.alternatives[0].replicas = 1;
  plan.alternatives[1].replicas = 2;
  CHECK(Contains(mp::FormatPlanReport(plan, false), "2 stages x 16 micro-batches, 1f1b x 2 replicas at "));
}

TEST_CASE("a tie within the tie window says the simplest was chosen, names the faster one and shows the band") {
  mp::Plan plan = SamplePlan(2, 8);  // 2 stages x 8 micro-batches, 1f1b
  plan.predicted.step_low_ms = 0.97 * plan.predicted.step_ms;
  plan.predicted.step_high_ms = 1.05 * plan.predicted.step_ms;
  plan.alternatives[0].tie = true;
  plan.alternatives[1].step_ms = 0.97 * plan.alternatives[0].step_ms;  // more micro-batches, a little faster
  plan.alternatives[1].tie = true;
  const std::string report = mp::FormatPlanReport(plan, true);
  Dump("report_tie_explain.txt", report);
  CHECK(Contains(report, mp::FormatMs(plan.predicted.step_ms) + " ms [" + mp::FormatMs(plan.predicted.step_low_ms) +
                             ", " + mp::FormatMs(plan.predicted.step_high_ms) + "]"));
  CHECK(Contains(report, "why                simplest of 2 ties (predicted within the tie window of the fastest, and "
                         "within the tie tolerance of the best of their micro-batch size) among 5"));
  CHECK(Contains(report, "faster             2 stages x 16 micro-batches, 1f1b at "));
  CHECK(Contains(report, "(-3.0%), a tie: within the tie window, so ties go to fewer devices, then fewer stages a "
                         "replica, then fewer recomputing, then equal micro-batches, then fewer, then the faster "
                         "schedule (where equal: 1f1b, gpipe, interleaved-1f1b, zb-h1"));
  CHECK_FALSE(Contains(report, "not the fastest"));
  const auto rows = SectionLines(report, "alternatives searched");
  CHECK(std::count_if(rows.begin(), rows.end(), [](const std::string& r) { return Contains(r, "chosen: the simplest tie"); }) == 1);
  CHECK(std::count_if(rows.begin(), rows.end(), [](const std::string& r) { return Contains(r, "tie: within the tie window of the fastest"); }) == 1);
}

TEST_CASE("a plan slower than a recorded alternative does not claim to be the fastest") {
  mp::Plan plan = SamplePlan();
  plan.alternatives[1].step_ms = 0.8 * plan.alternatives[0].step_ms;
  const std::string report = mp::FormatPlanReport(plan, false);
  CHECK(Contains(report, "why                not the fastest of 5 alternatives"));
  CHECK(Contains(report, "faster             2 stages x 8 micro-batches, 1f1b at "));
  CHECK(Contains(report, "(-20.0%)"));
  CHECK_FALSE(Contains(report, "runner-up"));
}

TEST_CASE("a device that runs several stages gets a row with its stages and its peak memory") {
  mp::Plan plan = SamplePlan(4, 8);
  CHECK(mp::DeviceTable(plan).rows.empty());  // one stage per device: the stage table says it
  // Stages 0 and 2 on device 0, 1 and 3 on device 1, as interleaved-1f1b places them.
  plan.programs.resize(2);
  for (mp::PlanStage& s : plan.stages) s.program = s.id % 2, s.device = s.id % 2;
  plan.predicted.device_peak_memory_bytes = {int64_t(3) << 30, int64_t(5) << 29};
  const mp::ReportTable t = mp::DeviceTable(plan);
  REQUIRE(t.rows.size() == 2);
  CHECK(t.rows[0] == std::vector<std::string>{"0 A100-80GB", "0,2", "3 GiB / 80 GiB"});
  CHECK(t.rows[1] == std::vector<std::string>{"1 A100-80GB", "1,3", "2.5 GiB / 80 GiB"});
  const std::string report = mp::FormatPlanReport(plan, false);
  Dump("report_devices.txt", report);
  CHECK(Contains(report, "\n\ndevice       stages       peak memory\n"));
}
