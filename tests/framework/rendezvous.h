// A meeting point for threads that tests use to prove that work ran
// concurrently without measuring time: `parties` threads must be inside
// arrive_and_wait at the same moment for any of them to get `true`. A thread
// that waits longer than the timeout gets `false` (and stops waiting), so a
// test whose threads never meet fails instead of hanging.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace tiny_test {

class Rendezvous {
 public:
  explicit Rendezvous(int parties) : parties_(parties) {}

  // True once `parties` threads have arrived (this one included) within `timeout`.
  bool arrive_and_wait(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (++arrived_ >= parties_) {
      cv_.notify_all();
      return true;
    }
    return cv_.wait_for(lock, timeout, [&] { return arrived_ >= parties_; });
  }

 private:
  const int parties_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
};

}  // namespace tiny_test
