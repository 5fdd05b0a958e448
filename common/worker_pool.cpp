#include "common/worker_pool.h"

namespace mp {

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (auto& slot : slots_) slot->wake.notify_one();
  }
  for (auto& slot : slots_) slot->thread.join();
}

void WorkerPool::Loop(Slot& slot) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    slot.wake.wait(lock, [&] { return stopping_ || slot.job; });
    if (!slot.job) return;  // stopping, with nothing left to run
    std::function<void()> job = std::move(slot.job);
    slot.job = nullptr;
    lock.unlock();
    std::exception_ptr error;
    try {
      job();
    } catch (...) {
      error = std::current_exception();
    }
    job = nullptr;  // what it captured goes before the caller is told
    lock.lock();
    slot.error = error;
    if (--pending_ == 0) done_.notify_one();
  }
}

void WorkerPool::RunAll(std::vector<std::function<void()>> jobs) {
  std::lock_guard<std::mutex> run(run_mutex_);
  std::unique_lock<std::mutex> lock(mutex_);
  slots_.reserve(jobs.size());
  while (slots_.size() < jobs.size()) {
    // A slot joins the pool only with its thread running: if starting one
    // throws, no job is ever given to a slot without one.
    auto slot = std::make_unique<Slot>();
    Slot* raw = slot.get();
    slot->thread = std::thread([this, raw] { Loop(*raw); });
    slots_.push_back(std::move(slot));  // cannot throw: reserved
  }
  pending_ = jobs.size();
  for (size_t i = 0; i < jobs.size(); ++i) {
    slots_[i]->job = std::move(jobs[i]);
    slots_[i]->error = nullptr;
    slots_[i]->wake.notify_one();
  }
  done_.wait(lock, [&] { return pending_ == 0; });
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (slots_[i]->error) std::rethrow_exception(slots_[i]->error);
  }
}

}  // namespace mp
