#include "tiny/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace tiny {

ProgressBar::ProgressBar(int64_t total, std::string label, std::FILE* out)
    : total_(std::max<int64_t>(total, 0)),
      label_(std::move(label)),
      out_(out),
      enabled_(out != nullptr && isatty(fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - std::chrono::seconds(1)) {}

ProgressBar::~ProgressBar() { finish(); }

std::string ProgressBar::format(const std::string& label, int64_t done, int64_t total, double elapsed_s,
                                const std::string& postfix, int width) {
  std::string text = label;
  char buf[96];
  if (total > 0) {
    const double fraction = std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
    const int filled = static_cast<int>(std::floor(fraction * width));
    text += " [" + std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '.') + "]";
    std::snprintf(buf, sizeof buf, " %lld/%lld", static_cast<long long>(done), static_cast<long long>(total));
  } else {
    std::snprintf(buf, sizeof buf, " %lld", static_cast<long long>(done));
  }
  text += buf;
  if (elapsed_s > 0 && done > 0) {
    const double rate = static_cast<double>(done) / elapsed_s;
    std::snprintf(buf, sizeof buf, " %.1f it/s", rate);
    text += buf;
    if (total > 0 && done < total) {
      const long long eta = std::llround(static_cast<double>(total - done) / rate);
      std::snprintf(buf, sizeof buf, " ETA %lld:%02lld", eta / 60, eta % 60);
      text += buf;
    }
  }
  if (!postfix.empty()) text += " " + postfix;
  return text;
}

void ProgressBar::draw(bool final) {
  const auto now = std::chrono::steady_clock::now();
  if (!final && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  // \r and clear-to-end-of-line: the bar overwrites itself.
  std::fprintf(out_, "\r%s\033[K", format(label_, done_, total_, elapsed, postfix_).c_str());
  std::fflush(out_);
  drawn_ = true;
}

void ProgressBar::update(int64_t done, const std::string& postfix) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = done;
  postfix_ = postfix;
  draw(false);
}

void ProgressBar::step(const std::string& postfix) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  ++done_;
  postfix_ = postfix;
  draw(false);
}

void ProgressBar::finish() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  if (!drawn_) return;
  draw(true);
  // The next output starts on a clean line: the bar is erased, the caller prints the epoch's summary.
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
}

}  // namespace tiny
