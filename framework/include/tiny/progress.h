/// @file progress.h
/// @brief A progress bar for long loops (like `tqdm`): shown only on a terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace tiny {

/// @brief One line that redraws itself: `epoch 1 [#####.....] 470/938 52.3 it/s ETA 0:09 loss 0.41`.
///
/// PyTorch users reach for `tqdm(loader)`; this is the same idea. It draws
/// only when `out` is a terminal (so logs and CI output stay clean), at most
/// ten times a second, and is safe to update from several threads.
class ProgressBar {
 public:
  /// @brief A bar for `total` steps (0 when unknown: no bar, no ETA), named `label`.
  ProgressBar(int64_t total, std::string label, std::FILE* out = stdout);
  /// @brief Ends the line if one was drawn.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// @brief Sets the steps done so far and the text after the bar (e.g. the running loss).
  void update(int64_t done, const std::string& postfix = "");
  /// @brief One more step.
  void step(const std::string& postfix = "");
  /// @brief Draws the final state and ends the line (the destructor does it too).
  void finish();
  /// @brief True when the bar draws (its stream is a terminal).
  bool enabled() const { return enabled_; }

  /// @brief The text of the bar for these numbers, `width` characters of bar (what update() draws).
  static std::string format(const std::string& label, int64_t done, int64_t total, double elapsed_s,
                            const std::string& postfix, int width = 24);

 private:
  void draw(bool final);

  int64_t total_;
  std::string label_;
  std::FILE* out_;
  bool enabled_;
  bool drawn_ = false;
  bool finished_ = false;
  int64_t done_ = 0;
  std::string postfix_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::mutex mutex_;
};

}  // namespace tiny
