#include "planner/profile/process_copies.h"

#include <ATen/Parallel.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>

#include "common/cpu_affinity.h"
#include "common/error.h"
#include "common/forked_child.h"
#include "planner/graph/run_graph.h"

namespace mp {
namespace {

// What the parent tells a child: run copy `index` of `copies` (0: stop).
struct Command {
  int index = 0;
  int copies = 0;
  double stagger_ms = 0;
};

// A child's answer to a run: kDone (its sample is in the shared memory),
// or kFailed and its failure's line up to a newline.
constexpr char kDone = 'k';
constexpr char kFailed = 'e';
constexpr auto kStopWait = std::chrono::seconds(10);
// The longest a run may take before its copy counts as lost: a child that
// hangs (one forked while a thread here held a lock it then needs) ends
// the probe with an error, not mpplan with a hang.
constexpr int kAnswerSeconds = 300;

// False where the other end is gone, or (this process's ends) gave no
// answer in kAnswerSeconds.
bool ReadFull(int fd, void* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = read(fd, static_cast<char*>(data) + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// A failed run's line, after its kFailed, up to the newline.
std::string ReadLine(int fd) {
  std::string line;
  char c = 0;
  while (ReadFull(fd, &c, 1) && c != '\n') line += c;
  return line;
}

// Over a socket, without SIGPIPE where the other end is gone (a child that
// died, or a parent).
bool WriteFull(int fd, const void* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = send(fd, static_cast<const char*>(data) + done, size - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// The memory the parent and the children share: the run's CopySync, then
// one sample per copy.
class SharedBlock {
 public:
  explicit SharedBlock(int copies) : bytes_(kSamplesAt + sizeof(RunTimes) * size_t(copies)) {
    memory_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory_ == MAP_FAILED) {
      throw Error(Concat("cannot map memory for the probe's processes: ", std::strerror(errno)));
    }
    new (memory_) CopySync();
    for (int c = 0; c < copies; ++c) new (Samples() + c) RunTimes();
  }
  ~SharedBlock() { munmap(memory_, bytes_); }
  SharedBlock(const SharedBlock&) = delete;
  SharedBlock& operator=(const SharedBlock&) = delete;
  CopySync& Sync() { return *static_cast<CopySync*>(memory_); }
  RunTimes* Samples() { return reinterpret_cast<RunTimes*>(static_cast<char*>(memory_) + kSamplesAt); }

 private:
  static constexpr size_t kSamplesAt =
      (sizeof(CopySync) + alignof(RunTimes) - 1) / alignof(RunTimes) * alignof(RunTimes);
  size_t bytes_;
  void* memory_ = nullptr;
};

// A socket pair: [0] this process's end, [1] the child's. Both ways: runs
// to the child, answers back.
std::array<int, 2> MakeLine() {
  std::array<int, 2> fds{-1, -1};
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds.data()) != 0) {
    throw Error(Concat("cannot connect the probe's processes: ", std::strerror(errno)));
  }
  return fds;
}

void Close(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

class ProcessCopies : public Copies {
 public:
  ProcessCopies(const CanonicalGraph& canonical, const std::vector<std::vector<c10::IValue>>& inputs,
                const PassOptions& options, int threads)
      : shared_(int(inputs.size())) {
    const int count = int(inputs.size());
    try {
      for (int w = 0; w < count; ++w) {
        const std::array<int, 2> line = MakeLine();
        const timeval answer_within{kAnswerSeconds, 0};
        setsockopt(line[0], SOL_SOCKET, SO_RCVTIMEO, &answer_within, sizeof answer_within);
        // This process's ends of the earlier children's lines, which the
        // new child closes (it has copies of them).
        std::vector<int> theirs;
        for (const Child& c : children_) theirs.push_back(c.line);
        Child child;
        child.line = line[0];
        child.process = std::make_unique<ForkedChild>([&, w] {
          for (int fd : theirs) close(fd);
          close(line[0]);
          Serve(canonical, inputs[size_t(w)], options, w, count, threads, line[1]);
          return std::string();
        });
        close(line[1]);
        children_.push_back(std::move(child));
      }
    } catch (...) {
      Stop();
      throw;
    }
  }

  ~ProcessCopies() override { Stop(); }

  int Count() const override { return int(children_.size()); }

  std::vector<RunTimes> Run(int first, int copies, double stagger_ms) override {
    shared_.Sync().Reset();  // no copy runs now
    for (int w = first; w < first + copies; ++w) {
      const Command command{w - first, copies, stagger_ms};
      if (!WriteFull(children_[size_t(w)].line, &command, sizeof command)) Lost(w, copies, first, w, false);
    }
    std::optional<std::string> failure;
    for (int w = first; w < first + copies; ++w) {
      char answer = 0;
      errno = 0;
      if (!ReadFull(children_[size_t(w)].line, &answer, 1)) {
        Lost(w, copies, w + 1, first + copies, errno == EAGAIN || errno == EWOULDBLOCK);  // SO_RCVTIMEO ran out
      }
      if (answer == kDone) continue;
      const std::string line = ReadLine(children_[size_t(w)].line);
      if (!failure) failure = line;
    }
    if (failure) throw Error(*failure);
    return std::vector<RunTimes>(shared_.Samples() + first, shared_.Samples() + first + copies);
  }

 private:
  struct Child {
    int line = -1;  // this process's end
    std::unique_ptr<ForkedChild> process;
  };

  // In child w: builds its graph, then runs it as told until told to stop
  // or this process is gone.
  void Serve(const CanonicalGraph& canonical, const std::vector<c10::IValue>& inputs, const PassOptions& options,
             int w, int count, int threads, int line) {
    PinThisThread(WorkerCpus(w, count, threads));
    at::set_num_threads(threads);
    std::unique_ptr<WholeGraph> graph;
    std::string build_error;
    try {
      graph = std::make_unique<WholeGraph>(canonical, inputs, options);
    } catch (const std::exception& e) {
      build_error = Concat("the contention probe's copy ", w, " could not run: ", ErrorLine(e.what()));
    }
    Command command;
    while (ReadFull(line, &command, sizeof command) && command.copies > 0) {
      std::string answer(1, kDone);
      if (!graph) {
        shared_.Sync().Skip(1);
        answer = kFailed + build_error + "\n";
      } else {
        try {
          shared_.Samples()[w] = RunCopy(*graph, shared_.Sync(), command.index, command.copies, command.stagger_ms);
        } catch (const std::exception& e) {
          answer = kFailed + ErrorLine(e.what()) + "\n";
        }
      }
      if (!WriteFull(line, answer.data(), answer.size())) return;
    }
  }

  // Child w's line closed mid-run (it died) or gave no answer (it hung),
  // in a run of `copies`. The others are let go (their wait for its sample
  // ended), the answers of those in [owing, owed) read (the ones told to
  // run and not yet heard), and what became of w said.
  [[noreturn]] void Lost(int w, int copies, int owing, int owed, bool hung) {
    shared_.Sync().Skip(copies);
    for (int v = owing; v < owed; ++v) {
      char answer = 0;
      if (ReadFull(children_[size_t(v)].line, &answer, 1) && answer == kFailed) ReadLine(children_[size_t(v)].line);
    }
    std::string how = Concat("gave no answer in ", kAnswerSeconds, " s");
    try {
      children_[size_t(w)].process->Wait(kStopWait);  // a hung one is stopped here
      if (!hung) how = "ended without a word";
    } catch (const std::exception& e) {
      if (!hung) how = e.what();  // how it died
    }
    children_[size_t(w)].process.reset();  // waited for
    throw Error(Concat("the contention probe's copy ", w, " in a process of its own failed: ", how));
  }

  void Stop() {
    for (Child& c : children_) {
      const Command stop;  // copies 0
      if (c.line >= 0) WriteFull(c.line, &stop, sizeof stop);
    }
    for (Child& c : children_) {
      try {
        if (c.process) c.process->Wait(kStopWait);
      } catch (const std::exception&) {
        // Ended badly after its last run: nothing of it is used.
      }
      c.process.reset();
      Close(c.line);
    }
    children_.clear();
  }

  SharedBlock shared_;
  std::vector<Child> children_;
};

}  // namespace

std::unique_ptr<Copies> CopiesInProcesses(const CanonicalGraph& canonical,
                                          const std::vector<std::vector<c10::IValue>>& inputs,
                                          const PassOptions& options, int threads) {
  return std::make_unique<ProcessCopies>(canonical, inputs, options, threads);
}

}  // namespace mp
