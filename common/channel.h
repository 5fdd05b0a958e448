// A bounded, closable channel between two pipeline stages: the sender blocks
// while it is full, the receiver while it is empty, and Close() wakes both,
// so a failure anywhere ends every wait instead of hanging the run.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

namespace mp {

template <typename T>
class Channel {
 public:
  explicit Channel(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // False when the channel was closed before the item could be queued.
  bool Send(T item) {
    std::unique_lock<std::mutex> lock(mutex_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  // Empty when the channel was closed (queued items are dropped: a closed
  // channel means the run has failed).
  std::optional<T> Receive() {
    std::unique_lock<std::mutex> lock(mutex_);
    not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (closed_) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return item;
  }

  void Close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

 private:
  const size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace mp
