// Peers on the same machine: PyTorch's own pipeline runtime shipped with
// Debian's python3-torch (torch.distributed.pipeline.sync.Pipe, torchgpipe's
// port, partitioned by torchgpipe's balance_by_time) and plain eager
// PyTorch, against mpexec, on the MLP and GPT, training, same batch and
// micro-batches, same library underneath (Debian's LibTorch 1.13). Each
// runtime gets the machine's cores: mpexec one thread per stage, Pipe and
// eager as many intra-op threads (Pipe runs every CPU partition on one
// worker thread, so intra-op threads are its only parallelism).
#include <thread>

#include "bench/suite/process.h"
#include "bench/suite/svg_chart.h"

namespace mp::bench {
namespace {

struct PeerCase {
  const char *model, *file;
  int64_t batch;
  int microbatches;
};

Measure PeerRun(const Suite& suite, const PeerCase& c, const std::string& runtime, int threads, int warmup, int steps,
                nlohmann::json& last) {
  return [&suite, c, runtime, threads, warmup, steps, &last](int turn) {
    last = RunJson(suite,
                   Format("%s %s --model %s --batch %ld --runtime %s --chunks %d --partitions 2 --threads %d "
                          "--warmup %d --steps %d",
                          suite.python.c_str(), suite.peer.c_str(), c.model, long(c.batch), runtime.c_str(),
                          c.microbatches, threads, warmup, steps),
                   Format("peer.%s.%s.%d", c.model, runtime.c_str(), turn));
    return last.at("steps_ms").get<std::vector<double>>();
  };
}

}  // namespace

Section Peers(const Suite& suite) {
  Section section("peers");
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  const std::vector<PeerCase> cases =
      suite.smoke ? std::vector<PeerCase>{{"mlp", "mlp.script.pt", 32, 2}}
                  : std::vector<PeerCase>{{"mlp", "mlp.script.pt", 256, 8}, {"gpt", "gpt.script.pt", 16, 4}};
  const int warmup = Pick(suite, 0, 1), steps = Pick(suite, 1, 5), turns = Pick(suite, 1, 3);
  BarChart chart{"Training throughput on this machine's CPU cores",
                 "samples/s",
                 {},
                 {"mpexec", "Pipe (torchgpipe)", "eager PyTorch"},
                 {}};
  for (const auto& c : cases) {
    const std::string name = std::string("peers.") + c.model;
    PlanCase ours{"mpexec", name,
                  MakePlan(suite, c.file,
                           Format("--gpus 2 --stages 2 --schedule gpipe --batch %ld --microbatches %d", long(c.batch),
                                  c.microbatches),
                           name)};
    nlohmann::json pipe, eager;
    const auto medians =
        InTurns({PlanRun(suite, name, warmup, steps), PeerRun(suite, c, "pipe", cores, warmup, steps, pipe),
                 PeerRun(suite, c, "eager", cores, warmup, steps, eager)},
                turns);
    const std::vector<std::string> runtimes = {
        Format("mpexec, 2 stages x 1 thread, %d micro-batches, GPipe", c.microbatches),
        Format("Pipe, 2 partitions %s, %d chunks, %d threads", pipe.at("balance").dump().c_str(), c.microbatches,
               cores),
        Format("eager PyTorch, whole batch, %d threads", cores)};
    chart.groups.push_back(Format("%s, batch %ld", c.model, long(c.batch)));
    chart.values.push_back({});
    for (size_t r = 0; r < runtimes.size(); ++r) {
      const double per_s = 1000.0 * c.batch / medians[r];
      section.rows.push_back({{"model", c.model},
                              {"batch", c.batch},
                              {"microbatches", c.microbatches},
                              {"runtime", runtimes[r]},
                              {"step_ms", medians[r]},
                              {"samples_per_s", per_s},
                              {"mpexec_speedup", medians[r] / medians[0]}});
      chart.values.back().push_back(per_s);
      section.summary.push_back({(r == 0 ? std::string(c.model) + " training: " : "  ") + runtimes[r],
                                 Format("%.0f ms", medians[r]),
                                 r == 0 ? Format("%.0f ms", ours.plan.at("predicted_step_ms").get<double>()) : "",
                                 r == 0 ? "" : Format("mpexec %.2fx faster", medians[r] / medians[0])});
    }
  }
  WriteResult(suite, section.name + ".svg", RenderSvg(chart));
  return section;
}

}  // namespace mp::bench
