// DeviceWorker: runs one device's ordered action list for one step, the
// actions of whichever of its stages they name, exactly in list order
// (planner/schedule/action.h). A RECV waits on its link, a SEND queues and
// goes on, F runs the stage's graph on a micro-batch and B its backward.
//
// Training: a stage turns every received tensor that needs a gradient into
// a leaf of its own autograd graph (detach + requires_grad), so each
// stage's graph ends at its boundary and backward never crosses threads. A
// relayed value is sent on as that leaf. B starts from the loss (on the
// stage making output 0) and from the gradients the next stage sent back
// for what this stage sent it, roots that include relayed leaves, so their
// gradients add up; SEND_B then sends each received leaf's .grad upstream.
// Parameter gradients accumulate in .grad across micro-batches.
//
// I and W (zero-bubble schedules) split B (split_backward.h): I computes
// only the gradients of the received leaves, so SEND_B can go at once; W
// later computes the parameters' gradients from what I kept.
//
// Recomputation (PlanStage::recompute): F keeps the stage's inputs and
// detached copies of its outputs, so its autograd graph is freed at once;
// B first runs the forward again from those inputs with the same random
// draws (RngScope) and the stage's buffers restored after it (BatchNorm's
// running statistics move once a micro-batch, not twice), then backward
// from the rebuilt outputs with the gradients that came back for the
// copies sent.
#pragma once

#include <ATen/core/ivalue.h>

#include <chrono>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "executor/loaded_plan.h"
#include "executor/pipeline.h"
#include "executor/runtime/links.h"
#include "planner/graph/split_backward.h"
#include "planner/profile/memory_meter.h"

namespace mp {

// What the workers of one step share, read-only.
struct StepContext {
  const LoadedPlan& loaded;
  const std::vector<std::vector<c10::IValue>>& microbatches;  // every replica's, split from the batch
  int first = 0;                        // this replica's first micro-batch among them
  const TrainingStep* training = nullptr;
  const PipelineOptions& options;
  int64_t step = 0;
  std::chrono::steady_clock::time_point start;  // of the step: events are timed from it
  Links& links;
};

// What the workers of one step produce; each writes only its own stages'
// entries, so no lock is needed.
struct StepResults {
  StepResults(int stages, int microbatches);
  // made[s][mb]: the model outputs stage s made for micro-batch mb, by
  // output index (inference).
  std::vector<std::vector<std::map<size_t, c10::IValue>>> made;
  std::vector<std::vector<at::Tensor>> losses;  // per stage: its micro-batches' losses (training)
  std::vector<double> busy_ms;                  // per stage: time in its F and B
  std::vector<std::vector<TimedAction>> events; // per stage, in the order run
};

class DeviceWorker {
 public:
  DeviceWorker(const StepContext& context, StepResults& results, std::vector<Action> actions);

  // Runs the actions in order. Returns false when a link closed (another
  // thread failed); throws when an action fails.
  bool Run();
  // The action running, or the first one's stage with micro-batch -1 before
  // it: where a failure happened.
  const Action& Current() const { return current_; }

 private:
  // A micro-batch between its forward and its backward on one stage.
  struct InFlight {
    Bundle values;
    std::map<BoundaryValue, std::vector<at::Tensor>> leaves;  // received: FlattenTensors order
    std::map<BoundaryValue, std::vector<at::Tensor>> sent;    // sent on: the backward's roots
    std::map<BoundaryValue, std::vector<at::Tensor>> grads;   // came back for `sent`
    at::Tensor loss;                                          // where output 0 is made
    std::unique_ptr<SplitBackward> split;                     // from I, for W
    std::map<BoundaryValue, c10::IValue> pristine;            // recomputation: model inputs F writes, as given
  };

  bool RecvF(const Action& a, InFlight& mb);
  // While the meter counts (mpexec's last warm-up step), what another
  // device made becomes a copy of this device's own, as a transfer between
  // GPUs makes one: the sender's goes when it no longer holds it (between
  // threads it would be one tensor, charged to its maker until both were
  // done with it: a zb-h1 stage's inputs, saved for its W, kept the
  // previous device charged for them).
  void CopyReceived(Envelope& message) const;
  void Forward(const Action& a, InFlight& mb);
  // Runs stage a.stage's graph on micro-batch a.microbatch into mb.values.
  void RunStage(const Action& a, InFlight& mb);
  // `record`: the loss goes into the step's results (not when recomputed).
  void TakeOutputs(const Action& a, InFlight& mb, bool record);
  // Recomputation: after F, keeps the outputs without their graph; before B, rebuilds it.
  void DropGraph(const Action& a, InFlight& mb);
  // What it received and its inputs stay (the forward runs again from them); the rest goes.
  void KeepInputs(const Action& a, InFlight& mb);
  // (buffer, its value before the forward ran again), to Restore after the backward.
  using Buffers = std::vector<std::pair<at::Tensor, at::Tensor>>;
  Buffers Recompute(const Action& a, InFlight& mb);
  static void Restore(Buffers& buffers);
  bool SendF(const Action& a, InFlight& mb);
  bool RecvB(const Action& a, InFlight& mb);
  void Backward(const Action& a, InFlight& mb);
  void BackwardInput(const Action& a, InFlight& mb);
  void BackwardWeight(const Action& a, InFlight& mb);
  bool SendB(const Action& a, InFlight& mb);
  // The backward's roots (the loss, and what this stage sent on) and the
  // gradients that seed them.
  void Roots(InFlight& mb, std::vector<at::Tensor>& roots, std::vector<at::Tensor>& seeds) const;
  void Done(const Action& a) { flight_.erase({a.stage, a.microbatch}); }
  bool Training() const { return context_.training != nullptr; }
  bool Recomputes(int stage) const { return Training() && context_.loaded.plan.stages[stage].recompute; }

  const StepContext& context_;
  StepResults& results_;
  const std::vector<Action> actions_;
  std::map<std::pair<int, int>, InFlight> flight_;  // (stage, micro-batch)
  // Recomputing stages: the buffers their forward writes, found at its first F.
  std::map<int, std::vector<at::Tensor>> written_;
  Action current_;
};

}  // namespace mp
