#include "interrupts.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "process.h"

namespace workbook {

namespace fs = std::filesystem;

namespace {

// The calls of run_process under way, and the folders to remove, for the
// interrupt watcher. Never destroyed: it is used until _exit.
struct Interrupts {
  std::mutex mutex;
  std::condition_variable drained;
  int live = 0;
  std::vector<fs::path> folders;
};
Interrupts& interrupts() {
  static Interrupts* state = new Interrupts;
  return *state;
}
std::atomic<int> g_interrupted{0};  // the signal, once one came
int g_interrupt_pipe[2] = {-1, -1};

[[noreturn]] void wait_for_the_end() {
  for (;;) pause();  // the watcher ends the program
}

void on_interrupt_signal(int sig) {
  const int saved = errno;
  const char c = static_cast<char>(sig);
  (void)!write(g_interrupt_pipe[1], &c, 1);
  errno = saved;
}

// Waits for the signal, lets every run_process stop its child and clean up,
// removes the folders, and ends the program as the signal would have.
// What exit_cleanly_on_interrupt's caller says as it leaves (nullptr: nothing).
const char* g_farewell = nullptr;

void interrupt_watcher() {
  char c = 0;
  while (read(g_interrupt_pipe[0], &c, 1) != 1) {
    if (errno != EINTR) return;
  }
  Interrupts& s = interrupts();
  std::unique_lock<std::mutex> lock(s.mutex);
  g_interrupted = c;
  s.drained.wait_for(lock, std::chrono::seconds(20), [&]() { return s.live == 0; });
  std::error_code ec;
  for (const fs::path& folder : s.folders) fs::remove_all(folder, ec);
  if (g_farewell != nullptr) {
    const std::string line = std::string("\n") + (c == SIGINT ? "interrupted (Ctrl-C)" : "stopped (SIGTERM)") + ": " +
                             g_farewell + "\n";
    if (write(STDERR_FILENO, line.data(), line.size()) < 0) {
      // nothing more to do: we are leaving
    }
  }
  _exit(128 + c);
}

}  // namespace

bool interrupted() { return g_interrupted != 0; }

LiveRun::LiveRun() {
  Interrupts& s = interrupts();
  std::unique_lock<std::mutex> lock(s.mutex);
  if (g_interrupted != 0) {
    lock.unlock();
    wait_for_the_end();
  }
  ++s.live;
}

void LiveRun::finish() {
  if (finished_) return;
  finished_ = true;
  Interrupts& s = interrupts();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    --s.live;
  }
  s.drained.notify_all();
  if (g_interrupted != 0) wait_for_the_end();
}

void exit_cleanly_on_interrupt(const char* farewell) {
  static std::once_flag once;
  std::call_once(once, [farewell]() {
    g_farewell = farewell;
    if (pipe2(g_interrupt_pipe, O_CLOEXEC) != 0) return;
    std::thread(interrupt_watcher).detach();
    struct sigaction action {};
    action.sa_handler = on_interrupt_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
  });
}

void remove_on_interrupt(const fs::path& folder) {
  Interrupts& s = interrupts();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.folders.push_back(folder);
}

}  // namespace workbook
