// FormatExecReport: mpexec's text report, built from the JSON object
// RunExecCommand returns, so the two never disagree.
#include "executor/exec_report.h"

#include <sstream>

namespace mp {
namespace {

double MiB(const nlohmann::json& bytes) { return double(bytes.get<int64_t>()) / 1048576.0; }

// Per device: its peak, predicted against measured (MemoryMeter), and each
// category's share, as predicted/measured.
void FormatDeviceMemory(const nlohmann::json& devices, std::ostringstream& out) {
  for (const auto& d : devices) {
    out << "            device " << d["device"].get<int>() << ": predicted " << MiB(d["predicted_peak_bytes"])
        << " MiB, ";
    if (d["measured_peak_bytes"].get<int64_t>() < 0) {
      out << "not measured in this process\n";
      continue;
    }
    out << "measured " << MiB(d["measured_peak_bytes"]) << " MiB (predicted/measured:";
    const char* sep = " ";
    for (const char* name : {"parameters", "gradients", "optimizer_state", "activations"}) {
      const auto& c = d["categories"][name];
      out << sep << name << " " << MiB(c["predicted"]) << "/" << MiB(c["measured"]);
      sep = ", ";
    }
    out << ")\n";
  }
}

// The step against the plan's prediction, the drift, and each stage's busy
// time against its predicted.
void FormatTiming(const nlohmann::json& r, std::ostringstream& out) {
  out << "step        " << r["step_ms"].get<double>() << " ms measured, " << r["predicted_step_ms"].get<double>()
      << " ms predicted";
  if (r.contains("predicted_band_ms")) {
    out << " [" << r["predicted_band_ms"][0].get<double>() << ", " << r["predicted_band_ms"][1].get<double>() << "]";
  }
  out << " (" << std::showpos << r["step_error_pct"].get<double>() << std::noshowpos << "%";
  if (r.contains("in_band")) out << (r["in_band"].get<bool>() ? ", inside the band" : ", outside the band");
  out << ")\n";
  // The profile's node times are for its thread count: with another, the
  // predictions are not this run's (the MLP's forward at 32 samples took
  // 3.6 ms on 1 thread and 2.5 on 2).
  const int profiled = r.value("profile_threads", 0), threads = r["threads_per_stage"].get<int>();
  if (profiled > 0 && profiled != threads) {
    out << "threads     " << threads << " per stage, where the profile timed " << profiled
        << ": the predictions are for " << profiled << " (--threads-per-stage " << profiled << ", or leave it out)\n";
  }
  if (r.contains("drift")) {
    const auto& d = r["drift"];
    out.precision(3);
    out << "machine     drift reference " << d["reference_ms"].get<double>() << " ms now, "
        << d["profiled_reference_ms"].get<double>() << " ms when profiled: " << d["factor"].get<double>() << "x";
    out.precision(1);
    if (d["rescaled"].get<bool>()) {
      out << ", predictions scaled by it (planned step " << r["planned_step_ms"].get<double>() << " ms)\n";
    } else {
      out << " (--rescale scales the predictions by it)\n";
    }
    if (d.contains("worker_factors")) {
      // Each worker's cores: on a machine whose cores differ (or whose
      // faster core moves), a stage on the slower one is late.
      out.precision(2);
      out << "cores       drift reference per core, now / profiled:";
      const auto& factors = d["worker_factors"];
      for (size_t w = 0; w < factors.size(); ++w) {
        out << (w ? "," : "") << " cpu " << d["worker_cpus"][w].get<std::string>() << " " << factors[w].get<double>()
            << "x";
      }
      out << (r.value("workers_pinned", false) ? " (worker w pinned to the w-th)"
                                               : " (workers not pinned: MP_PIN_CPUS=1 pins them)");
      out.precision(1);
      out << "\n";
    }
  }
  out << "throughput  " << r["samples_per_s"].get<double>() << " samples/s measured, "
      << r["predicted_samples_per_s"].get<double>() << " predicted\n";
  for (const auto& s : r["stages"]) {
    out << "stage " << s["id"] << "     busy " << s["busy_ms"].get<double>() << " ms (predicted "
        << s["predicted_busy_ms"].get<double>() << ", " << std::showpos << s["busy_error_pct"].get<double>()
        << std::noshowpos << "%), idle " << s["idle_ms"].get<double>() << " ms";
    if (s.contains("allreduce_ms")) {
      out << ", gradient all-reduce " << s["allreduce_ms"].get<double>() << " ms a step on average (predicted "
          << s["predicted_allreduce_ms"].get<double>() << ")";
    }
    out << "\n";
  }
}

// A plan for other devices, run on CPU workers as a check: its times are
// not this machine's, so nothing is compared with them.
void FormatUncompared(const nlohmann::json& r, std::ostringstream& out) {
  out << "step        " << r["step_ms"].get<double>() << " ms measured on CPU workers; the plan predicts "
      << r["predicted_step_ms"].get<double>() << " ms for " << r["predicted_for"].get<std::string>() << ", "
      << r["predicted_from"].get<std::string>() << ": not comparable\n";
  out << "throughput  " << r["samples_per_s"].get<double>() << " samples/s measured\n";
  for (const auto& s : r["stages"]) {
    out << "stage " << s["id"] << "     busy " << s["busy_ms"].get<double>() << " ms, idle "
        << s["idle_ms"].get<double>() << " ms\n";
  }
}

}  // namespace

std::string FormatExecReport(const nlohmann::json& r) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << "ran " << r["plan"].get<std::string>() << " (" << r["mode"].get<std::string>() << "): " << r["stages"].size()
      << " stages x " << r["microbatches"] << " micro-batches of " << r["microbatch_size"] << ", "
      << r["schedule"].get<std::string>() << ", " << r["threads_per_stage"] << " thread(s) per stage; median of "
      << r["steps"] << " step(s) after " << r["warmup"] << " warm-up";
  if (r["warmup"].get<int>() > 0 && r.contains("first_step_ms")) {
    out << " (the first, cold, took " << r["first_step_ms"].get<double>() << " ms; --warmup 0 times it)";
  }
  out << "\n";
  if (r.value("model_given", false)) {
    out << "model       " << r["model"].get<std::string>() << " (--model: the plan's canonical graph, its own weights)\n";
  }
  if (r.value("ranks", 1) > 1) {
    // stage_ranks are replica 0's; replica k's are k * ranks / replicas further on.
    const int replicas = r.value("replicas", 1), per_replica = r["ranks"].get<int>() / replicas;
    out << "ranks       " << r["ranks"] << " processes over " << r["transport"].get<std::string>();
    if (replicas > 1) out << ", " << replicas << " replicas";
    out << ":";
    for (size_t s = 0; s < r["stage_ranks"].size(); ++s) {
      out << (s ? (replicas > 1 ? ";" : ",") : "") << " stage " << s << " on rank" << (replicas > 1 ? "s" : "");
      for (int k = 0; k < replicas; ++k) out << (k ? ", " : " ") << r["stage_ranks"][s].get<int>() + k * per_replica;
    }
    if (r.contains("process_cpus")) out << "; rank 0 on cpus " << r["process_cpus"].get<std::string>();
    out << "\n";
  }
  if (r.contains("predicted_for")) {
    FormatUncompared(r, out);
  } else {
    FormatTiming(r, out);
  }
  const auto& memory = r["memory"];
  if (memory["peak_bytes"].get<int64_t>() >= 0) {
    const int64_t resident = memory.value("peak_resident_bytes", int64_t(-1));
    out << "memory      cpu heap peak " << memory["peak_bytes"].get<int64_t>() / 1048576.0 << " MiB in use ("
        << memory["before_steps_bytes"].get<int64_t>() / 1048576.0 << " MiB before the steps; "
        << memory.value("allocator", "libc") << "'s malloc";
    if (resident >= 0) out << "; " << resident / 1048576.0 << " MiB resident at most";
    out << "); the plan predicts " << memory["predicted_peak_bytes"].get<int64_t>() / 1048576.0
        << " MiB over its stages\n";
  }
  if (memory.contains("devices")) FormatDeviceMemory(memory["devices"], out);
  if (memory.contains("optimizer_note")) out << "            " << memory["optimizer_note"].get<std::string>() << "\n";
  if (r.contains("loss")) {
    out.precision(6);
    out << "loss        " << r["loss"].get<double>() << " (" << r["loss_function"].get<std::string>();
    if (r.value("loss_reduction", std::string()) == "mean") out << ", a mean over the samples";
    if (r.value("loss_reduction", std::string()) == "sum") out << ", a sum over the samples";
    out << "; " << r["optimizer"]["described"].get<std::string>() << ")\n";
    out.precision(2);
    // The end of every step: each device steps its own parameters at once.
    const double predicted = r.value("predicted_optimizer_ms", 0.0);
    const std::string planned = r.value("planned_optimizer", std::string());
    out << "optimizer   " << r["optimizer_ms"].get<double>() << " ms measured";
    if (predicted > 0) {
      out << ", " << predicted << " predicted";
      if (planned != r["optimizer"]["name"].get<std::string>()) out << " for the plan's " << planned;
    } else {
      out << ", the plan predicts none (a plan or profile from before the optimizer's step was timed)";
    }
    out << ": the end of the step, each device its own parameters at once (the median; "
        << (r["ranks"].get<int>() > 1 ? "rank 0's" : "the slowest device") << ")\n";
    out.precision(6);
    if (r.contains("grad_norms")) {
      std::ostringstream norm;  // as the optimizer line writes its settings
      norm << "grad norm   " << r["grad_norms"].back().get<double>() << " before clipping to "
           << r["optimizer"]["clip_grad_norm"].get<double>() << " (the last step's)\n";
      out << norm.str();
    }
    if (r.contains("loss_note")) out << "            " << r["loss_note"].get<std::string>() << "\n";
  }
  if (r.contains("verify")) {
    const auto& d = r["verify_detail"];
    out.unsetf(std::ios::fixed);
    out.precision(3);
    if (r["mode"] == "infer") {
      const double full_batch = d["full_batch_max_abs_diff"].get<double>();
      out << "verify      " << (r["verify"].get<bool>() ? "outputs equal, bit for bit," : "OUTPUTS DIFFER from")
          << " the model run whole on the same micro-batches; the full batch in one go ";
      if (full_batch == 0) {
        out << "gives the same outputs\n";
      } else {
        out << "differs by at most " << full_batch << "\n";
      }
    } else {
      const auto worst = [&](const char* key) {
        return d[key] == "" ? std::string() : " (worst " + d[key].get<std::string>() + ")";
      };
      out << "verify      " << (r["verify"].get<bool>() ? "ok" : "FAILED") << ": losses within "
          << d["max_loss_relative_diff"].get<double>() << ", the first step's gradients within "
          << d["max_gradient_relative_diff"].get<double>() << worst("worst_gradient") << " and state within "
          << d["max_state_relative_diff"].get<double>() << worst("worst_tensor")
          << " of the same micro-batches trained on one device (limit 1e-05"
          << (d["judged_on"] == "gradients" ? ", on the losses and gradients" : ", on the losses and state")
          << "); the full batch in one go: loss "
          << d["full_batch_max_loss_relative_diff"].get<double>() << ", state "
          << d["full_batch_max_state_relative_diff"].get<double>() << "\n";
      if (d.contains("note")) out << "            " << d["note"].get<std::string>() << "\n";
      if (d.contains("random_note")) out << "            " << d["random_note"].get<std::string>() << "\n";
      if (d.contains("buffers_note")) out << "            " << d["buffers_note"].get<std::string>() << "\n";
      if (d.contains("state_note")) out << "            " << d["state_note"].get<std::string>() << "\n";
    }
  }
  return out.str();
}

}  // namespace mp
