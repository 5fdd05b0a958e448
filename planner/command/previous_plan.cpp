// ReadPreviousPlan, PreviousShape: the earlier plan whose shape the search keeps.
#include "planner/command/previous_plan.h"

#include <filesystem>

#include "common/error.h"
#include "planner/plan/plan_reader.h"

namespace mp {
namespace {

// The first way `was` was planned for something other than `now`, or "".
std::string Difference(const Plan& was, const Plan& now) {
  if (was.model.graph_fingerprint != now.model.graph_fingerprint) return "planned for another graph (fingerprint)";
  if (was.training != now.training) return Concat("planned for --mode ", was.training ? "train" : "infer");
  if (was.batch != now.batch) return Concat("planned for batch ", was.batch, ", this plan's is ", now.batch);
  if (was.devices.size() != now.devices.size()) {
    return Concat("planned for ", was.devices.size(), " devices, this plan for ", now.devices.size());
  }
  for (size_t d = 0; d < now.devices.size(); ++d) {
    const PlanDevice &a = was.devices[d], &b = now.devices[d];
    if (a.type != b.type || a.name != b.name || a.memory_bytes != b.memory_bytes || a.speed != b.speed) {
      return Concat("device ", d, " was planned as ", a.type, " ", a.name, " with ", a.memory_bytes,
                    " bytes, now ", b.type, " ", b.name, " with ", b.memory_bytes);
    }
    if (a.memory_headroom != b.memory_headroom) {
      return Concat("device ", d, " was planned with ", a.memory_headroom * 100, "% memory headroom, now ",
                    b.memory_headroom * 100, "%");
    }
  }
  const PlanProfile &p = was.profile, &q = now.profile;
  if (p.source != q.source || p.device != q.device || p.threads != q.threads) {
    return Concat("planned from a ", p.source, " profile of ", p.device, " (", p.threads,
                  " threads), this plan from a ", q.source, " profile of ", q.device, " (", q.threads, " threads)");
  }
  return "";
}

}  // namespace

std::optional<PreviousPlan> ReadPreviousPlan(const std::string& flag, const std::string& output) {
  if (flag == "none") return std::nullopt;
  PreviousPlan previous;
  previous.named = !flag.empty();
  previous.path = previous.named ? flag : output;
  if (!previous.named) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(previous.path, ec)) return std::nullopt;
    try {
      previous.plan = ReadPlan(previous.path);
    } catch (const Error&) {
      return std::nullopt;  // not a plan this mpplan reads: it is replaced, as any file at -o is
    }
    return previous;
  }
  try {
    previous.plan = ReadPlan(previous.path);
  } catch (const Error& e) {
    throw InputError(Concat("--previous: ", e.what()));
  }
  return previous;
}

std::optional<PlanCandidate> PreviousShape(const PreviousPlan& previous, const Plan& now) {
  if (const std::string why = Difference(previous.plan, now); !why.empty()) {
    if (previous.named) throw InputError(Concat("--previous ", previous.path, ": ", why));
    return std::nullopt;
  }
  const Plan& p = previous.plan;
  PlanCandidate shape;
  shape.replicas = p.replicas;
  shape.stages = int(p.stages.size());
  shape.chunks = StagesPerDevice(p);
  shape.microbatches = p.microbatches;
  shape.microbatch_size = p.microbatch_size;
  shape.schedule = p.schedule;
  return shape;
}

}  // namespace mp
