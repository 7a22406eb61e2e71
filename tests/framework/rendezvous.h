// Helpers for tests of threads. Rendezvous: a meeting point for threads that tests use to prove that work ran
// concurrently without measuring time: `parties` threads must be inside
// arrive_and_wait at the same moment for any of them to get `true`. A thread
// that waits longer than the timeout gets `false` (and stops waiting), so a
// test whose threads never meet fails instead of hanging.
#pragma once

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>

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

// The calling thread's name (pthread_setname_np), e.g. "tiny-gpu0-1".
inline std::string thread_name() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

// The names of every thread of this process now (/proc/self/task/*/comm).
// A thread that exits during the listing can hide others from it (procfs
// walks the thread list from the last entry it returned), so a test that
// counts threads keeps every thread it made alive until it has looked.
inline std::multiset<std::string> thread_names() {
  std::multiset<std::string> names;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (std::getline(comm, name)) names.insert(name);
  }
  return names;
}

// The threads that ran the chunks of a parallel_for, each once.
struct SeenThreads {
  std::mutex mutex;
  std::set<std::thread::id> ids;
  std::set<std::string> names;
  void add() {
    std::lock_guard<std::mutex> lock(mutex);
    ids.insert(std::this_thread::get_id());
    names.insert(thread_name());
  }
};

}  // namespace tiny_test
