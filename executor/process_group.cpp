// ProcessGroup over c10d's TCPStore and ProcessGroupGloo. Our own
// rendezvous runs first (every rank sets a key, then waits for all of them
// with a deadline) so a rank that never comes is named; Gloo's own
// rendezvous then finds everyone there. Pending operations are kept so that
// Abort() can wake them. The Gloo headers are optional at build time
// (MP_HAVE_GLOO): without them this file builds and says so at run time.
#include "executor/process_group.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "common/error.h"
#include "planner/graph/run_graph.h"

#if defined(MP_HAVE_GLOO) && defined(USE_C10D_GLOO)  // the header is empty without the latter
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace mp {
namespace {

int EnvInt(const char* name, int low, int high, std::optional<int> fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) {
    if (fallback) return *fallback;
    throw InputError(Concat(name, " is not set (WORLD_SIZE is, so this runs as one rank of several)"));
  }
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < low || value > high) {
    throw InputError(Concat(name, "=", text, ": expected a whole number from ", low, " to ", high));
  }
  return int(value);
}

// Whether something listens at addr:port before `deadline`: c10d's own
// client logs every failed try through glog before giving up.
bool WaitForListener(const std::string& addr, int port, std::chrono::steady_clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
    throw InputError(Concat("MASTER_ADDR=", addr, ": not a host name or address this machine can resolve"));
  }
  bool ok = false;
  while (!ok && std::chrono::steady_clock::now() < deadline) {
    for (addrinfo* a = found; a && !ok; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0) continue;
      ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
      close(fd);
    }
    if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  freeaddrinfo(found);
  return ok;
}

std::string JoinInts(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

}  // namespace

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(Concat("no socket for a rendezvous on 127.0.0.1: ", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  close(fd);
  if (!ok) throw Error(Concat("no free port for a rendezvous on 127.0.0.1: ", std::strerror(errno)));
  return ntohs(address.sin_port);
}

std::optional<RankEnv> RankEnvFromEnvironment() {
  const char* world = std::getenv("WORLD_SIZE");
  if (!world || !*world) return std::nullopt;
  RankEnv env;
  env.world_size = EnvInt("WORLD_SIZE", 1, 4096, std::nullopt);
  if (env.world_size == 1) return std::nullopt;
  env.rank = EnvInt("RANK", 0, env.world_size - 1, std::nullopt);
  env.master_port = EnvInt("MASTER_PORT", 1, 65535, std::nullopt);
  const char* addr = std::getenv("MASTER_ADDR");
  if (!addr || !*addr) throw InputError("MASTER_ADDR is not set (WORLD_SIZE is, so this runs as one rank of several)");
  env.master_addr = addr;
  return env;
}

#if defined(MP_HAVE_GLOO) && defined(USE_C10D_GLOO)

namespace {
std::atomic<bool> peer_failure_seen{false};
}  // namespace

bool PeerFailureSeen() { return peer_failure_seen; }

bool ProcessGroupsAvailable() { return true; }

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;  // under this run's prefix
  c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> options;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::mutex mutex;
  bool aborted = false;
  std::set<c10::intrusive_ptr<c10d::Work>> pending;

  // Runs `start` and waits for its work; `what` names the peer for errors.
  template <typename Start>
  void Wait(const std::string& what, std::chrono::milliseconds timeout, Start start) {
    c10::intrusive_ptr<c10d::Work> work;
    std::string failure;
    bool stopped_here = false;  // this rank aborted its group meanwhile
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (aborted) throw Error(Concat(what, ": stopped (this rank failed)"));
      try {
        work = start();  // Gloo throws here already when the peer is known to be gone
        pending.insert(work);
      } catch (const std::exception& e) {
        failure = ErrorLine(e.what());
      }
    }
    if (work) {
      try {
        if (!work->wait(timeout)) failure = "stopped (this rank failed)";
      } catch (const std::exception& e) {
        failure = ErrorLine(e.what());
      }
      std::lock_guard<std::mutex> lock(mutex);
      pending.erase(work);
      stopped_here = aborted;
      if (aborted && !failure.empty()) failure = "stopped (this rank failed)";
    }
    if (failure.empty()) return;
    if (!stopped_here) peer_failure_seen = true;
    // Gloo's messages start with its source location: "[.../pair.cc:598] Connection closed by peer".
    if (failure.rfind("[", 0) == 0 && failure.find("] ") != std::string::npos) {
      failure = failure.substr(failure.find("] ") + 2);
    }
    // A timeout, or what it leaves behind: Gloo closes the pair when an
    // operation times out, so the other operation on it fails with
    // "Application timeout caused pair closure".
    std::string lower = failure;
    for (char& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    if (lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos) {
      failure = Concat("nothing for ", timeout.count() / 1000.0, " s (--timeout); it may be stuck or gone");
    }
    throw Error(Concat(what, ": ", failure));
  }
};

ProcessGroup::ProcessGroup(const RankEnv& env, std::chrono::milliseconds timeout)
    : env_(env), timeout_(timeout), impl_(std::make_unique<Impl>()) {
  // A peer that dies closes its sockets: writing to one must be an error
  // here, not a SIGPIPE that ends this process without a word.
  std::signal(SIGPIPE, SIG_IGN);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (env.rank != 0 && !WaitForListener(env.master_addr, env.master_port, deadline)) {
    throw Error(Concat("rank 0 never opened the rendezvous at ", env.master_addr, ":", env.master_port,
                       " (MASTER_ADDR:MASTER_PORT) within ", timeout.count() / 1000.0, " s (--timeout)"));
  }
  c10d::TCPStoreOptions options;
  options.port = uint16_t(env.master_port);
  // torchrun's agent may already serve a store at MASTER_PORT and say so;
  // then every rank is its client, and keys go under this attempt's prefix.
  const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  const bool agent = agent_store && std::string(agent_store) == "True";
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const std::string prefix =
      agent ? Concat("/worker/attempt_", restart && *restart ? restart : "0", "/mpexec") : std::string("mpexec");
  options.isServer = env.rank == 0 && !agent;
  options.numWorkers = size_t(env.world_size);
  options.waitWorkers = false;  // our own wait below names who is missing
  options.timeout = timeout;
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& e) {
    throw Error(Concat("cannot ", env.rank == 0 ? "serve" : "reach", " the rendezvous at ",
                       env.master_addr, ":", env.master_port, " (rank 0, MASTER_ADDR:MASTER_PORT) within ",
                       timeout.count() / 1000.0, " s: ", ErrorLine(e.what())));
  }
  auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, impl_->store);
  impl_->store = store;
  // Every store call: a store gone (its server failed) is one line too.
  const auto guarded = [&](const auto& call) {
    try {
      return call();
    } catch (const std::exception& e) {
      throw Error(Concat("the rendezvous at ", env.master_addr, ":", env.master_port,
                         " is gone (rank 0 serves it and may have failed): ", ErrorLine(e.what())));
    }
  };
  guarded([&] { store->set("joined/" + std::to_string(env.rank), std::vector<uint8_t>{1}); });
  std::vector<int> missing;
  while (true) {
    missing.clear();
    for (int r = 0; r < env.world_size; ++r) {
      if (!guarded([&] { return store->check({"joined/" + std::to_string(r)}); })) missing.push_back(r);
    }
    if (missing.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error(Concat("rank", missing.size() > 1 ? "s " : " ", JoinInts(missing),
                         " of ", env.world_size, " never joined within ", timeout.count() / 1000.0,
                         " s (--timeout)"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
  const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
  if (interface && *interface) {
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  } else if (env.master_addr == "localhost" || env.master_addr.rfind("127.", 0) == 0) {
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  impl_->options = gloo_options;
  try {
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>("gloo", store), env.rank, env.world_size, gloo_options);
  } catch (const std::exception& e) {
    throw Error(Concat("cannot connect to the other ranks: ", ErrorLine(e.what())));
  }
}

ProcessGroup::ProcessGroup(const RankEnv& env, std::chrono::milliseconds timeout, std::unique_ptr<Impl> impl)
    : env_(env), timeout_(timeout), impl_(std::move(impl)) {}

std::unique_ptr<ProcessGroup> ProcessGroup::Subgroup(const std::string& name, const std::vector<int>& members) {
  const auto me = std::find(members.begin(), members.end(), env_.rank);
  if (me == members.end()) throw InternalError(Concat("rank ", env_.rank, " made group ", name, " without being in it"));
  RankEnv env = env_;
  env.rank = int(me - members.begin());
  env.world_size = int(members.size());
  auto impl = std::make_unique<Impl>();
  impl->store = c10::make_intrusive<c10d::PrefixStore>(name, impl_->store);
  impl->options = impl_->options;
  try {
    impl->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, env.rank, env.world_size, impl->options);
  } catch (const std::exception& e) {
    throw Error(Concat("cannot connect ranks ", JoinInts(members), " for ", name, ": ", ErrorLine(e.what())));
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(env, timeout_, std::move(impl)));
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::Send(int dst, int tag, const at::Tensor& tensor) {
  std::vector<at::Tensor> tensors = {tensor};
  impl_->Wait(Concat("sending to rank ", dst), timeout_, [&] { return impl_->group->send(tensors, dst, tag); });
}

void ProcessGroup::Receive(int src, int tag, at::Tensor& tensor) {
  std::vector<at::Tensor> tensors = {tensor};
  impl_->Wait(Concat("receiving from rank ", src), timeout_, [&] { return impl_->group->recv(tensors, src, tag); });
}

void ProcessGroup::AllReduceSum(at::Tensor& tensor) {
  std::vector<at::Tensor> tensors = {tensor};
  impl_->Wait("summing over every rank", timeout_, [&] { return impl_->group->allreduce(tensors); });
}

void ProcessGroup::Abort() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->aborted = true;
  for (const auto& work : impl_->pending) work->abort();
}

#else  // no Gloo headers: stages run in one process only

bool PeerFailureSeen() { return false; }

bool ProcessGroupsAvailable() { return false; }

struct ProcessGroup::Impl {};

ProcessGroup::ProcessGroup(const RankEnv& env, std::chrono::milliseconds timeout) : env_(env), timeout_(timeout) {
  throw InputError("WORLD_SIZE: this build has no c10d Gloo support (LibTorch came without Gloo's headers), so it "
                   "runs every stage in one process; unset WORLD_SIZE");
}
ProcessGroup::ProcessGroup(const RankEnv& env, std::chrono::milliseconds timeout, std::unique_ptr<Impl> impl)
    : env_(env), timeout_(timeout), impl_(std::move(impl)) {}
std::unique_ptr<ProcessGroup> ProcessGroup::Subgroup(const std::string&, const std::vector<int>&) { return nullptr; }
ProcessGroup::~ProcessGroup() = default;
void ProcessGroup::Send(int, int, const at::Tensor&) {}
void ProcessGroup::Receive(int, int, at::Tensor&) {}
void ProcessGroup::AllReduceSum(at::Tensor&) {}
void ProcessGroup::Abort() {}

#endif

}  // namespace mp
