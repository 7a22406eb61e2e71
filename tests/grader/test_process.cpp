// Child processes under limits: how a student's program ended, in words.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "harness/process.h"

namespace fs = std::filesystem;
using workbook::ProcessOptions;
using workbook::ProcessResult;
using workbook::run_process;

namespace {

fs::path temp_log(const std::string& name) {
  return fs::temp_directory_path() / ("workbook-process-test-" + std::to_string(getpid()) + "-" + name);
}

ProcessResult sh(const std::string& script, double timeout_s = 30, size_t memory = 0) {
  ProcessOptions o;
  o.argv = {"/bin/sh", "-c", script};
  o.timeout_s = timeout_s;
  o.memory_limit = memory;
  o.log = temp_log("log");
  ProcessResult r = run_process(o);
  fs::remove(o.log);
  return r;
}

TEST(Process, ExitCodeAndOutputTail) {
  const ProcessResult r = sh("echo first; echo last >&2; exit 3");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.describe(), "exited with code 3");
  EXPECT_EQ(r.log_tail, "first\nlast\n");
  EXPECT_TRUE(sh("true").ok());
}

TEST(Process, CrashIsNamedWithItsSignal) {
  const ProcessResult r = sh("kill -SEGV $$");
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_NE(r.describe().find("crashed with SIGSEGV (segmentation fault"), std::string::npos) << r.describe();
}

TEST(Process, HangIsStoppedAtTheTimeLimitWithWhatItStarted) {
  const fs::path marker = temp_log("grandchild");
  fs::remove(marker);
  // A grandchild that would write the marker after the limit must be killed too.
  const ProcessResult r = sh("(sleep 2; touch " + marker.string() + ") & sleep 30", 0.5);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(r.seconds, 5);
  EXPECT_NE(r.describe().find("did not finish within the time limit"), std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_FALSE(fs::exists(marker)) << "the process group outlived the timeout";
}

TEST(Process, EnvironmentIsSetAndUnset) {
  ProcessOptions o;
  o.argv = {"/bin/sh", "-c", "echo \"[$WORKBOOK_A][$HOME]\""};
  o.env = {{"WORKBOOK_A", "x y"}, {"HOME", ""}};
  o.log = temp_log("env");
  const ProcessResult r = run_process(o);
  fs::remove(o.log);
  EXPECT_EQ(r.log_tail, "[x y][]\n");
}

TEST(Process, MissingProgramSaysSo) {
  ProcessOptions o;
  o.argv = {"/nonexistent/program"};
  o.log = temp_log("missing");
  const ProcessResult r = run_process(o);
  fs::remove(o.log);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.log_tail.find("could not start the program"), std::string::npos);
}

TEST(Process, MemoryLimitStopsAHungryProgram) {
  // 64 MiB limit; the program keeps 512 MiB (python-free: a shell that grows a string).
  const ProcessResult r = sh("x=$(head -c 536870912 /dev/zero | tr '\\0' a); echo ${#x}", 60, size_t{64} << 20);
  if (!r.memory_limit_enforced) GTEST_SKIP() << "no cgroup with a memory controller can be made here (needs root or a delegated cgroup): limits are not enforced on this machine";
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.out_of_memory || r.signal == SIGKILL) << r.describe();
}

}  // namespace
