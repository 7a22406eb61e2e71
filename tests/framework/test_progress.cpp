// The progress bar of long loops: its text, and silence when not on a terminal.
#include <gtest/gtest.h>

#include <cstdio>

#include "tiny/progress.h"

namespace {

TEST(ProgressBar, TextShowsTheBarCountRateAndEta) {
  EXPECT_EQ(tiny::ProgressBar::format("epoch 1", 25, 100, 5.0, "loss 0.41", 8),
            "epoch 1 [##......] 25/100 5.0 it/s ETA 0:15 loss 0.41");
  EXPECT_EQ(tiny::ProgressBar::format("epoch 1", 100, 100, 10.0, "", 4), "epoch 1 [####] 100/100 10.0 it/s");
  EXPECT_EQ(tiny::ProgressBar::format("steps", 7, 0, 0.0, "", 4), "steps 7") << "unknown total: no bar, no ETA";
  EXPECT_EQ(tiny::ProgressBar::format("x", 250, 100, 1.0, "", 4), "x [####] 250/100 250.0 it/s") << "clamped";
}

TEST(ProgressBar, DrawsNothingWhenNotOnATerminal) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    tiny::ProgressBar bar(10, "epoch", file);
    EXPECT_FALSE(bar.enabled());
    for (int i = 0; i < 10; ++i) bar.step("loss 1.0");
  }
  EXPECT_EQ(std::ftell(file), 0L) << "a log file must not fill with carriage returns";
  std::fclose(file);
}

}  // namespace
