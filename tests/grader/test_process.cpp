// Child processes under limits: how a student's program ended, in words.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
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

// A program that never ran is not to be blamed for it: start_failed tells
// that apart from a program that exits with 127 itself.
TEST(Process, AProgramThatCannotStartIsToldApartFromOneThatExitsWith127) {
  ProcessOptions o;
  o.argv = {"/nonexistent/program"};
  o.log = temp_log("cannot-start");
  const ProcessResult missing = run_process(o);
  EXPECT_TRUE(missing.start_failed);
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(missing.start_error, "execve failed: No such file or directory: /nonexistent/program");
  EXPECT_EQ(missing.describe(), "could not be started (execve failed: No such file or directory: /nonexistent/program)");
  o.sandbox = true;  // the sandbox starts the program by descriptor when it can
  EXPECT_TRUE(run_process(o).start_failed);
  const ProcessResult exits = sh("exit 127");
  EXPECT_FALSE(exits.start_failed);
  EXPECT_EQ(exits.describe(), "exited with code 127");
  fs::remove(o.log);
}

TEST(Process, MemoryLimitStopsAHungryProgram) {
  // 64 MiB limit; the program keeps 512 MiB (python-free: a shell that grows a string).
  const ProcessResult r = sh("x=$(head -c 536870912 /dev/zero | tr '\\0' a); echo ${#x}", 60, size_t{64} << 20);
  if (!r.memory_limit_enforced) GTEST_SKIP() << "no cgroup with a memory controller can be made here (needs root or a delegated cgroup): limits are not enforced on this machine";
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.out_of_memory || r.signal == SIGKILL) << r.describe();
}

// ---------------------------------------------------------------- limits for a hostile program

TEST(Process, OutputLimitStopsAFloodOnStdout) {
  ProcessOptions o;
  o.argv = {"/bin/sh", "-c", "while :; do echo 'all passed all passed all passed all passed'; done"};
  o.timeout_s = 30;
  o.output_limit = size_t{1} << 20;
  o.log = temp_log("flood");
  const ProcessResult r = run_process(o);
  const auto size = fs::file_size(o.log);
  fs::remove(o.log);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.output_limit_hit) << r.describe();
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(r.seconds, 20);
  EXPECT_EQ(r.describe(), "wrote more than 1 MiB of output (the limit of this check) and was stopped");
  EXPECT_EQ(size, size_t{1} << 20) << "the log is written by us, through a pipe, never past the limit";
  EXPECT_LE(r.log_tail.size(), 4000u);
}

TEST(Process, OutputLimitCountsTheFilesOfItsFolder) {
  const fs::path dir = temp_log("folder");
  fs::create_directories(dir);
  ProcessOptions o;
  // A 4 MiB file, then waiting: only the limit stops it.
  o.argv = {"/bin/sh", "-c", "head -c 4194304 /dev/zero > big; sleep 20"};
  o.cwd = dir;
  o.output_limit = size_t{1} << 20;
  o.log = dir / "log.txt";
  const ProcessResult r = run_process(o);
  const bool left = fs::exists(dir / "big");
  const bool log_kept = fs::exists(dir / "log.txt");
  fs::remove_all(dir);
  EXPECT_TRUE(r.output_limit_hit) << r.describe();
  EXPECT_LT(r.seconds, 15);
  EXPECT_FALSE(left) << "what a stopped run wrote is removed at once, not when the checks end";
  EXPECT_TRUE(log_kept);
  // Under the limit, nothing is said.
  EXPECT_TRUE(sh("head -c 1000 /dev/zero").ok());
}

// A file made and unlinked at once is in no folder: only the descriptors of the
// run's processes show it. Its space is allocated in one call (fallocate).
TEST(Process, OutputLimitSeesAnUnlinkedFileItHoldsOpen) {
  const fs::path dir = temp_log("unlinked");
  fs::create_directories(dir);
  ProcessOptions o;
  o.argv = {"/bin/sh", "-c", "exec 3<>big; rm big; fallocate -l 64M /proc/self/fd/3 || exit 9; sleep 20"};
  o.cwd = dir;
  o.timeout_s = 30;
  o.output_limit = size_t{1} << 20;
  o.log = dir / "log.txt";
  const ProcessResult r = run_process(o);
  fs::remove_all(dir);
  if (r.exit_code == 9) GTEST_SKIP() << "fallocate cannot allocate here: " << r.log_tail;
  EXPECT_TRUE(r.output_limit_hit) << r.describe() << "\n" << r.log_tail;
  EXPECT_LT(r.seconds, 15);
}

TEST(Process, AddressSpaceLimitIsSet) {
  ProcessOptions o;
  o.argv = {"/bin/sh", "-c", "ulimit -v"};
  o.address_space_limit = size_t{3} << 30;
  o.log = temp_log("as");
  const ProcessResult r = run_process(o);
  fs::remove(o.log);
  EXPECT_EQ(r.log_tail, "3145728\n");  // KiB
}

TEST(Process, CpuLimitStopsASpinningProgram) {
  ProcessOptions o;
  o.argv = {"/bin/sh", "-c", "while :; do :; done"};
  o.timeout_s = 30;
  o.cpu_limit_s = 1;
  o.log = temp_log("cpu");
  const ProcessResult r = run_process(o);
  fs::remove(o.log);
  EXPECT_TRUE(r.cpu_limit_hit) << r.describe() << ", " << r.cpu_seconds << " s of CPU, signal " << r.signal;
  EXPECT_FALSE(r.timed_out);
  EXPECT_GE(r.cpu_seconds, 0.5) << r.describe();  // rusage and RLIMIT_CPU count a little differently
  EXPECT_EQ(r.describe(), "used more than 1 s of CPU time (the limit of this check) and was stopped");
}

TEST(Process, ProcessLimitStopsAForkBomb) {
  ProcessOptions o;
  // 200 sleepers at most (bounded even without a limit), far past the limit of 20.
  o.argv = {"/bin/sh", "-c", "i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done; wait"};
  o.timeout_s = 20;
  o.process_limit = 20;
  o.sandbox = geteuid() == 0;  // as root, RLIMIT_NPROC applies only to the sandbox's own uid
  o.log = temp_log("bomb");
  const ProcessResult r = run_process(o);
  fs::remove(o.log);
  if (!r.process_limit_enforced) GTEST_SKIP() << "no pids cgroup can be made here and RLIMIT_NPROC does not bind root: processes are not limited on this machine";
  EXPECT_FALSE(r.ok()) << r.describe();
  EXPECT_FALSE(r.timed_out) << "the limit should have stopped it long before the time limit";
  if (r.process_limit_hit) {
    EXPECT_EQ(r.describe(), "tried to run more than 20 processes and threads at once (the limit of this check; a fork bomb?) and was stopped");
  } else {  // RLIMIT_NPROC only: the shell's fork fails
    EXPECT_NE(r.log_tail.find("fork"), std::string::npos) << r.log_tail;
  }
}

TEST(Process, ALegitimateProgramRunsInTheSandbox) {
  const fs::path dir = temp_log("legit");
  fs::create_directories(dir / "in");
  std::ofstream(dir / "in" / "values.txt") << "input\n";
  ProcessOptions o;
  // It reads its inputs, cannot change them, and what it writes is there afterwards (copied
  // from its tmpfs, where it has one), folders included.
  o.argv = {"/bin/sh", "-c",
            "echo hello > mine.txt && cat mine.txt && cat in/values.txt && mkdir -p out/deep && echo deep > out/deep/x && "
            "(echo changed > in/values.txt) 2>/dev/null; echo threads: $(ls /proc/self/task | wc -l)"};
  o.cwd = dir;
  o.sandbox = true;
  o.output_limit = size_t{1} << 20;
  o.process_limit = 64;
  o.cpu_limit_s = 10;
  o.log = dir / "log.txt";
  const ProcessResult r = run_process(o);
  std::ifstream in(dir / "mine.txt");
  std::string line, deep, input;
  std::getline(in, line);
  std::ifstream(dir / "out" / "deep" / "x") >> deep;
  std::ifstream(dir / "in" / "values.txt") >> input;
  fs::remove_all(dir);
  EXPECT_TRUE(r.ok()) << r.describe() << "\n" << r.log_tail;
  EXPECT_EQ(line, "hello");
  EXPECT_EQ(deep, "deep");
  EXPECT_EQ(r.log_tail.rfind("hello\ninput\n", 0), 0u) << r.log_tail;
  if (r.isolation.read_only) {
    EXPECT_EQ(input, "input") << "its inputs are read-only to it";
  }
}

// ---------------------------------------------------------------- the sandbox

// Its own uid needs root; the namespaces need root or unprivileged user
// namespaces. Each test checks what the run says was in place, and skips,
// with the reason, what this machine cannot do.
#define NEED_ROOT() \
  if (geteuid() != 0) GTEST_SKIP() << "not root: a sandbox of its own uid needs root (grader/README.md, Limits)"

class Sandbox : public ::testing::Test {
 protected:
  void SetUp() override {
    // A work folder like the checker's: root's, mode 0700, with the run's folder and a secret beside it.
    work_ = temp_log("sandbox");
    fs::create_directories(work_ / "run");
    fs::create_directories(work_ / "secret");
    fs::permissions(work_, fs::perms::owner_all);
    std::ofstream(work_ / "secret" / "expected.txt") << "42\n";
    // A world-readable folder elsewhere, to be hidden (like the repository's solutions/).
    hidden_ = temp_log("solutions");
    fs::create_directories(hidden_);
    fs::permissions(hidden_, fs::perms::all & ~fs::perms::others_write & ~fs::perms::group_write);
    std::ofstream(hidden_ / "exercise.cpp") << "the reference\n";
    fs::permissions(hidden_ / "exercise.cpp", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  }
  void TearDown() override {
    std::error_code ec;
    if (!work_.empty()) fs::remove_all(work_, ec);
    if (!hidden_.empty()) fs::remove_all(hidden_, ec);
  }
  ProcessResult run(const std::string& script, double timeout_s = 20) {
    ProcessOptions o;
    o.argv = {"/bin/sh", "-c", script};
    o.cwd = work_ / "run";
    o.sandbox = true;
    o.hidden = {hidden_};
    o.timeout_s = timeout_s;
    o.process_limit = 64;
    o.log = work_ / "run" / "log.txt";
    return run_process(o);
  }
  fs::path work_, hidden_;
};

TEST_F(Sandbox, RunsAsItsOwnUnprivilegedUser) {
  NEED_ROOT();
  const ProcessResult r = run("id -u; id -G; stat -c %u .");
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.log_tail;
  EXPECT_TRUE(r.isolation.own_user);
  EXPECT_GE(r.isolation.uid, 1000u);
  // Its uid, its groups (none but its own), and its folder was given to it while it ran.
  const std::string uid = std::to_string(r.isolation.uid);
  EXPECT_EQ(r.log_tail, uid + "\n" + uid + "\n" + uid + "\n");
  // Afterwards its folder is root's again (the next run given this uid must not read it).
  struct stat st {};
  ASSERT_EQ(stat((work_ / "run").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(Sandbox, CannotReachTheWorkFolderAboveIt) {
  NEED_ROOT();
  const ProcessResult r = run("cat ../secret/expected.txt || echo blocked; ls .. || echo blocked; touch ../mine || echo blocked");
  EXPECT_EQ(r.log_tail.find("42"), std::string::npos) << r.log_tail;
  EXPECT_EQ(std::count(r.log_tail.begin(), r.log_tail.end(), 'b') >= 3 ? 3 : 0, 3) << r.log_tail;
  EXPECT_FALSE(fs::exists(work_ / "mine"));
}

TEST_F(Sandbox, HiddenPathsCannotBeRead) {
  const ProcessResult r = run("cat " + (hidden_ / "exercise.cpp").string() + " || echo blocked; ls " + hidden_.string() + " || echo blocked");
  if (!r.isolation.paths_hidden) GTEST_SKIP() << "no mount namespace can be made here (" << r.isolation.describe() << ")";
  EXPECT_EQ(r.log_tail.find("the reference"), std::string::npos) << r.log_tail;
  // Outside the sandbox the file is there and readable by anyone.
  std::ifstream in(hidden_ / "exercise.cpp");
  std::string line;
  EXPECT_TRUE(std::getline(in, line) && line == "the reference");
}

TEST_F(Sandbox, WritesNowhereButItsFolder) {
  const fs::path outside = temp_log("written-from-the-sandbox");
  fs::remove(outside);
  const ProcessResult r = run("touch " + outside.string() + " || echo blocked; echo mine > mine.txt && echo wrote");
  if (!r.isolation.read_only) GTEST_SKIP() << "no mount namespace can be made here (" << r.isolation.describe() << ")";
  EXPECT_FALSE(fs::exists(outside));
  EXPECT_NE(r.log_tail.find("blocked"), std::string::npos) << r.log_tail;
  EXPECT_NE(r.log_tail.find("wrote"), std::string::npos) << r.log_tail;
  EXPECT_TRUE(fs::exists(work_ / "run" / "mine.txt"));
}

TEST_F(Sandbox, HasNoNetwork) {
  // /proc/net/dev: two header lines, then one line per interface; only the loopback in a namespace of its own.
  const ProcessResult r = run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
  if (!r.isolation.no_network) GTEST_SKIP() << "no network namespace can be made here (" << r.isolation.describe() << ")";
  EXPECT_EQ(r.log_tail, "lo\n");
}

TEST_F(Sandbox, NothingItStartedOutlivesIt) {
  // A daemon of its own session leaves the process group; it must die with the run all the same.
  NEED_ROOT();
  const ProcessResult r = run("setsid sleep 60 & sleep 0.2; echo started");
  ASSERT_TRUE(r.isolation.own_user);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int left = 0;  // alive: a zombie is dead already, waiting for init to reap it
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream status(entry.path() / "status");
    std::string line;
    bool zombie = false;
    while (std::getline(status, line)) {
      if (line.rfind("State:", 0) == 0) zombie = line.find('Z') != std::string::npos;
      if (line.rfind("Uid:", 0) == 0) {
        left += !zombie && std::stoul(line.substr(4)) == r.isolation.uid;
        break;
      }
    }
  }
  EXPECT_EQ(left, 0) << "processes of uid " << r.isolation.uid << " outlived the run";
}

// The results channel (runner.h): a pipe handed to it as descriptor 3, with
// no name anywhere; nothing else of ours is inherited, and our copy is closed,
// so the reader sees the end of it once the run is over.
TEST_F(Sandbox, InheritsOnlyTheDescriptorsPassedToIt) {
  int ends[2];
  ASSERT_EQ(pipe2(ends, O_CLOEXEC), 0);
  const int spare = open("/dev/null", O_RDONLY);  // not CLOEXEC: still not inherited
  ProcessOptions o;
  o.argv = {"/bin/sh", "-c", "ls /proc/self/fd; echo sent >&3"};
  o.cwd = work_ / "run";
  o.sandbox = true;
  o.timeout_s = 20;
  o.log = work_ / "run" / "log.txt";
  o.pass_fds = {ends[1]};
  const ProcessResult r = run_process(o);
  close(spare);
  EXPECT_EQ(fcntl(ends[1], F_GETFD), -1) << "run_process closes the descriptors it passed";
  std::string sent(64, '\0');
  const ssize_t n = read(ends[0], sent.data(), sent.size());
  sent.resize(n > 0 ? static_cast<size_t>(n) : 0);
  char more = 0;
  EXPECT_EQ(read(ends[0], &more, 1), 0) << "no writer is left once the run is over";
  close(ends[0]);
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.log_tail;
  EXPECT_EQ(sent, "sent\n");
  // 0, 1, 2, the pipe as 3, and the one ls opened to list them.
  EXPECT_EQ(r.log_tail, "0\n1\n2\n3\n4\n") << r.log_tail;
}

// In a PID namespace of its own, a daemon of its own session dies with the
// run, as a plain user too (no uid of its own to kill by), and the run sees
// only its own processes.
TEST_F(Sandbox, ADaemonDiesWithItInItsPidNamespace) {
  const std::string mark = "600." + std::to_string(getpid());  // sleep's argument, to find it by
  const ProcessResult r = run("setsid sleep " + mark + " & sleep 0.2; echo pids $(ls -d /proc/[0-9]* | wc -l)");
  if (!r.isolation.own_pids) GTEST_SKIP() << "no PID namespace can be made here (" << r.isolation.describe() << ")";
  EXPECT_NE(r.isolation.describe().find("own PID namespace"), std::string::npos) << r.isolation.describe();
  // Its init, its shell, the daemon, the command substitution's shell, ls and wc: not the machine's others.
  ASSERT_EQ(r.log_tail.rfind("pids ", 0), 0u) << r.log_tail;
  EXPECT_LE(std::stoi(r.log_tail.substr(5)), 8) << r.log_tail;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int left = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream cmdline(entry.path() / "cmdline");
    std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    std::ifstream status(entry.path() / "status");
    std::string line;
    bool zombie = false;
    while (std::getline(status, line)) {
      if (line.rfind("State:", 0) == 0) zombie = line.find('Z') != std::string::npos;
    }
    left += !zombie && text.find(mark) != std::string::npos;
  }
  EXPECT_EQ(left, 0) << "the daemon (sleep " << mark << ") outlived the run";
}

// Its folder is a tmpfs of the output limit's size: a 10 GiB fallocate on a
// file it unlinked is refused by the kernel (no walk of a folder would see
// it), a flood stops at the limit, and nothing of a stopped run is left.
TEST_F(Sandbox, ItsFolderIsATmpfsOfTheOutputLimit) {
  ProcessOptions o;
  o.argv = {"/bin/sh", "-c",
            "exec 3<>big; rm big; fallocate -l 10G /proc/self/fd/3 && echo allocated || echo refused; "
            "head -c 4194304 /dev/zero > flood; echo flooded; sleep 20"};
  o.cwd = work_ / "run";
  o.sandbox = true;
  o.output_limit = size_t{1} << 20;
  o.timeout_s = 30;
  o.log = work_ / "run" / "log.txt";
  const ProcessResult r = run_process(o);
  if (!r.isolation.folder_limited) {
    // Where a mount namespace was made (it hid the paths), its folder must be a tmpfs too.
    ASSERT_FALSE(r.isolation.paths_hidden) << "a mount namespace without the tmpfs: " << r.isolation.describe();
    GTEST_SKIP() << "no mount namespace can be made here (" << r.isolation.describe() << ")";
  }
  EXPECT_NE(r.isolation.describe().find("its folder a 1 MiB tmpfs"), std::string::npos) << r.isolation.describe();
  EXPECT_NE(r.log_tail.find("refused"), std::string::npos) << r.log_tail;
  EXPECT_EQ(r.log_tail.find("allocated"), std::string::npos) << r.log_tail;
  EXPECT_TRUE(r.output_limit_hit) << r.describe();
  EXPECT_LT(r.seconds, 15);
  EXPECT_FALSE(fs::exists(work_ / "run" / "flood"));
  EXPECT_FALSE(fs::exists(work_ / "run" / "big"));
}

// A grading server's secrets (tokens in its environment) are none of a submission's business.
TEST_F(Sandbox, InheritsOnlyTheEnvironmentProgramsNeed) {
  setenv("GRADER_API_TOKEN", "canary-5e1f", 1);
  setenv("TINY_TEST_SETTING", "kept", 1);
  const ProcessResult r = run("env");
  unsetenv("GRADER_API_TOKEN");
  unsetenv("TINY_TEST_SETTING");
  EXPECT_EQ(r.log_tail.find("canary-5e1f"), std::string::npos) << r.log_tail;
  EXPECT_NE(r.log_tail.find("TINY_TEST_SETTING=kept"), std::string::npos) << r.log_tail;
  EXPECT_NE(r.log_tail.find("PATH="), std::string::npos) << r.log_tail;
}

TEST_F(Sandbox, HasASessionOfItsOwn) {
  // No terminal to read from (a compiler told to #include /dev/tty would wait for ever) or signal.
  const ProcessResult r = run("set -- $(cat /proc/$$/stat); [ \"$1\" = \"$6\" ] && echo leader; echo tty $7");
  EXPECT_EQ(r.log_tail, "leader\ntty 0\n");
}

TEST_F(Sandbox, PathsHiddenForEverySandbox) {
  const char* before = std::getenv("WORKBOOK_SANDBOX_HIDE");
  const std::string saved = before != nullptr ? before : "";
  const fs::path other = temp_log("batch");
  fs::create_directories(other);
  std::ofstream(other / "exercise.cpp") << "another student's work\n";
  workbook::hide_in_every_sandbox(other);
  ProcessOptions o;
  o.argv = {"/bin/sh", "-c", "cat " + (other / "exercise.cpp").string() + " || echo blocked"};
  o.sandbox = true;  // no `hidden` of its own
  o.log = temp_log("batch-log");
  const ProcessResult r = run_process(o);
  if (saved.empty()) {
    unsetenv("WORKBOOK_SANDBOX_HIDE");
  } else {
    setenv("WORKBOOK_SANDBOX_HIDE", saved.c_str(), 1);
  }
  fs::remove_all(other);
  fs::remove(o.log);
  if (!r.isolation.paths_hidden) GTEST_SKIP() << "no mount namespace can be made here (" << r.isolation.describe() << ")";
  EXPECT_EQ(r.log_tail.find("another student"), std::string::npos) << r.log_tail;
}

TEST_F(Sandbox, TheProbeSaysWhatIsInPlace) {
  const workbook::Isolation isolation = workbook::probe_sandbox();
  EXPECT_EQ(isolation.own_user, geteuid() == 0);
  EXPECT_EQ(isolation.complete(), isolation.missing().empty()) << isolation.missing();
  if (geteuid() != 0) {
    EXPECT_NE(isolation.missing().find("its own uid"), std::string::npos) << isolation.missing();
  }
  if (geteuid() == 0 && isolation.no_network) {
    EXPECT_TRUE(isolation.complete()) << "as root with namespaces every protection is in place: lacks " << isolation.missing();
  }
}

TEST_F(Sandbox, RunsAtTheSameTimeGetDifferentUsers) {
  NEED_ROOT();
  auto one = std::async(std::launch::async, [&]() {
    ProcessOptions o;
    o.argv = {"/bin/sh", "-c", "sleep 0.5"};
    o.sandbox = true;
    return run_process(o);
  });
  const ProcessResult two = run("sleep 0.5");
  const ProcessResult first = one.get();
  ASSERT_TRUE(first.isolation.own_user && two.isolation.own_user);
  EXPECT_NE(first.isolation.uid, two.isolation.uid);
}

}  // namespace

// ---------------------------------------------------------------- temporary folders

// A grader killed outright leaves its folders: the next one removes exactly
// those (named by make_temp_folder, ours, their process gone), and nothing else.
TEST(TempFolders, OnlyTheFoldersOfProcessesThatAreGoneAreSwept) {
  const fs::path tmp = temp_log("sweep");
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const char* before = std::getenv("TMPDIR");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  const fs::path mine = workbook::make_temp_folder("grade");  // this process's: alive
  // A process that is gone: one we started and reaped; its start time as make_temp_folder writes it.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  const std::string dead = "workbook-grade-" + std::to_string(child) + ".12345-abcdef";
  fs::create_directories(tmp / dead / "0" / "run");
  std::ofstream(tmp / dead / "0" / "run" / "log.txt") << "left\n";
  const fs::path outside = tmp / "outside.txt";
  std::ofstream(outside) << "keep me\n";
  fs::create_symlink(outside, tmp / dead / "0" / "link");  // removed, never followed
  fs::permissions(tmp / dead / "0", fs::perms::owner_read | fs::perms::owner_exec);  // read-only: emptied all the same
  // Our pid with another start time: a process that was gone and whose pid was given again.
  const std::string reused = "workbook-lesson-" + std::to_string(getpid()) + ".1-ghijkl";
  fs::create_directories(tmp / reused);
  // Not to be touched: another name, a link named like ours, another user's folder.
  fs::create_directories(tmp / "workbook-kept-abcdef");
  fs::create_directories(tmp / "elsewhere");
  fs::create_directory_symlink(tmp / "elsewhere", tmp / ("workbook-grade-" + std::to_string(child) + ".1-mnopqr"));
  const std::string others = "workbook-grade-" + std::to_string(child) + ".2-stuvwx";
  fs::create_directories(tmp / others);
  const bool root = geteuid() == 0;
  if (root) {
    ASSERT_EQ(chown((tmp / others).c_str(), 65534, 65534), 0);
  }

  const int swept = workbook::sweep_stale_temp_folders();
  if (before != nullptr) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
  EXPECT_TRUE(fs::is_directory(mine));
  EXPECT_FALSE(fs::exists(tmp / dead));
  EXPECT_FALSE(fs::exists(tmp / reused));
  EXPECT_TRUE(fs::exists(outside));
  EXPECT_TRUE(fs::is_directory(tmp / "workbook-kept-abcdef"));
  EXPECT_TRUE(fs::is_directory(tmp / "elsewhere"));
  EXPECT_TRUE(fs::is_symlink(tmp / ("workbook-grade-" + std::to_string(child) + ".1-mnopqr")));
  EXPECT_EQ(fs::exists(tmp / others), root) << "another user's folder is never swept (as a plain user it is ours)";
  EXPECT_EQ(swept, root ? 2 : 3);
  fs::remove_all(tmp);
}

namespace {

// A network namespace whose loopback stayed down (a container without CAP_NET_ADMIN) is still no
// network, and says why lesson 6's ranks cannot meet.
TEST(Isolation, ALoopbackThatStayedDownIsSaid) {
  workbook::Isolation i;
  i.no_network = true;
  EXPECT_NE(i.describe().find(", no network,"), std::string::npos) << i.describe();
  i.loopback_down = true;
  EXPECT_NE(i.describe().find("no network (not even 127.0.0.1"), std::string::npos) << i.describe();
  EXPECT_NE(i.describe().find("CAP_NET_ADMIN"), std::string::npos) << i.describe();
  i.no_network = false;
  EXPECT_NE(i.describe().find("network reachable"), std::string::npos) << i.describe();
}

}  // namespace
