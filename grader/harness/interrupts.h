/// @file interrupts.h
/// @brief Ctrl-C and SIGTERM (exit_cleanly_on_interrupt, process.h): a
/// watcher thread waits for the signal, lets every run_process under way stop
/// its child and clean up (LiveRun), removes the folders of
/// remove_on_interrupt() and ends the program as the signal would have.
#pragma once

namespace workbook {

/// @brief True once SIGINT or SIGTERM came (after exit_cleanly_on_interrupt).
bool interrupted();

/// @brief One call of run_process among the live ones; once the program is
/// being interrupted no new child starts (the constructor waits for the exit),
/// and a call that ends waits for the exit.
class LiveRun {
 public:
  /// @brief Counts this run among the live ones (or waits for the exit, when interrupted).
  LiveRun();
  /// @brief finish().
  ~LiveRun() { finish(); }
  LiveRun(const LiveRun&) = delete;
  LiveRun& operator=(const LiveRun&) = delete;
  /// @brief This run is over: the watcher may go on (and, when interrupted, this thread waits for the exit).
  void finish();

 private:
  bool finished_ = false;
};

}  // namespace workbook
