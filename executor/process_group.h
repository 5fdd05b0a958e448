// Stages as processes: a rank's place in a c10d world, read from the
// environment torchrun sets, and the process group its stages talk over
// (c10d's ProcessGroupGloo after a TCPStore rendezvous). Every wait is
// bounded by the timeout, and every failure names the peer rank, so a peer
// that dies or never arrives ends the run with one line instead of a hang.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mp {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT as torchrun sets them;
// nullopt when WORLD_SIZE is unset or 1 (one process runs every stage).
// Throws InputError naming the variable that is missing or not a number.
std::optional<RankEnv> RankEnvFromEnvironment();

// A TCP port on 127.0.0.1 that nothing listens on now (for a rendezvous
// of ranks on this machine: mpexec --launch-local, the link probe).
int FreePort();

// Whether a transfer or sum of this process with other ranks has failed on
// their side: the connection lost, or nothing arriving within the timeout
// (not where this rank stopped its own group). A rank's error is then
// likely the consequence of another's, which the launcher names first.
bool PeerFailureSeen();

// Whether this build can run stages as processes: false where LibTorch came
// without Gloo's headers (a pip LibTorch), and mpexec refuses WORLD_SIZE.
bool ProcessGroupsAvailable();

class ProcessGroup {
 public:
  // Rendezvous at MASTER_ADDR:MASTER_PORT (rank 0 serves the TCPStore),
  // waiting at most `timeout` for every rank; throws Error naming the ranks
  // that never joined.
  ProcessGroup(const RankEnv& env, std::chrono::milliseconds timeout);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return env_.rank; }
  int size() const { return env_.world_size; }

  // A group of some of this group's ranks (`members`, ascending, this rank
  // among them), made by every member alike with the same `name`; its ranks
  // count from 0 in `members` order. Throws Error when a member never comes.
  std::unique_ptr<ProcessGroup> Subgroup(const std::string& name, const std::vector<int>& members);

  // Point to point on channel `tag` (messages on one tag arrive in order).
  // A dense CPU tensor; Receive needs one of the sent size and dtype. Both
  // block until done and throw Error naming the peer when it is gone, times
  // out, or Abort() was called.
  void Send(int dst, int tag, const at::Tensor& tensor);
  void Receive(int src, int tag, at::Tensor& tensor);
  // Sums `tensor` over every rank in place.
  void AllReduceSum(at::Tensor& tensor);

  // Wakes every pending Send and Receive with an error, and fails the ones
  // that come after: a failure elsewhere in this process.
  void Abort();

 private:
  struct Impl;
  ProcessGroup(const RankEnv& env, std::chrono::milliseconds timeout, std::unique_ptr<Impl> impl);
  RankEnv env_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mp
