#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tiny/error.h"

extern char** environ;

namespace workbook {

namespace fs = std::filesystem;

namespace {

bool write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return out.good();
}

// The cgroup (v2 unified or v1 memory hierarchy) this process is in, if the
// folder exists; "" otherwise.
fs::path own_cgroup(bool& v2) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  fs::path unified;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers == "memory" && fs::exists("/sys/fs/cgroup/memory" + path)) {
      v2 = false;
      return "/sys/fs/cgroup/memory" + path;
    }
    if (line.rfind("0::", 0) == 0) unified = "/sys/fs/cgroup" + path;
  }
  v2 = true;
  if (!unified.empty() && fs::exists(unified / "cgroup.controllers")) return unified;
  return {};
}

// A fresh cgroup with the memory limit, or "" where none can be made.
fs::path make_limited_cgroup(size_t limit) {
  static std::atomic<int> counter{0};
  bool v2 = false;
  const fs::path parent = own_cgroup(v2);
  if (parent.empty()) return {};
  const fs::path dir = parent / ("workbook-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::error_code ec;
  if (!fs::create_directory(dir, ec)) return {};
  const fs::path knob = dir / (v2 ? "memory.max" : "memory.limit_in_bytes");
  bool ok = fs::exists(knob) && write_file(knob, std::to_string(limit));
  if (ok && v2) write_file(dir / "memory.swap.max", "0");
  if (ok && !v2 && fs::exists(dir / "memory.memsw.limit_in_bytes")) write_file(dir / "memory.memsw.limit_in_bytes", std::to_string(limit));
  if (!ok) {
    fs::remove(dir, ec);
    return {};
  }
  return dir;
}

bool cgroup_saw_oom(const fs::path& dir) {
  std::ifstream events(dir / "memory.events");
  std::string key;
  long long value = 0;
  while (events >> key >> value) {
    if (key == "oom_kill" && value > 0) return true;
  }
  std::ifstream control(dir / "memory.oom_control");
  while (control >> key >> value) {
    if (key == "oom_kill" && value > 0) return true;
  }
  std::ifstream failcnt(dir / "memory.failcnt");
  return failcnt >> value && value > 0;
}

void remove_cgroup(const fs::path& dir) {
  // A cgroup can only be removed once empty; its processes were killed already.
  for (int i = 0; i < 50; ++i) {
    if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

const char* signal_meaning(int sig) {
  switch (sig) {
    case SIGSEGV: return "segmentation fault: memory was read or written where it must not be, often an index out of range or a dangling pointer";
    case SIGABRT: return "abort: often an exception nobody caught, an assert, or a double free";
    case SIGFPE: return "arithmetic error, such as an integer divided by zero";
    case SIGBUS: return "bus error: a bad memory access";
    case SIGILL: return "illegal instruction";
    case SIGKILL: return "killed from outside, often for using too much memory";
    default: return "";
  }
}

}  // namespace

std::string ProcessResult::describe() const {
  std::ostringstream s;
  if (timed_out) {
    s << "did not finish within the time limit and was stopped (an endless loop, or waiting on something that never comes)";
  } else if (out_of_memory) {
    s << "ran out of memory (over the limit of this check) and was stopped";
  } else if (signal != 0) {
    s << "crashed with SIG" << sigabbrev_np(signal) << " (" << signal_meaning(signal) << ")";
  } else {
    s << "exited with code " << exit_code;
  }
  return s.str();
}

std::string tail_of_file(const fs::path& path, size_t max_lines) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() > 4 * max_lines) lines.erase(lines.begin(), lines.begin() + static_cast<long>(2 * max_lines));
  }
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

ProcessResult run_process(const ProcessOptions& options) {
  TINY_CHECK(!options.argv.empty(), ValueError, "run_process: no program given");
  ProcessResult result;
  const fs::path cgroup = options.memory_limit > 0 ? make_limited_cgroup(options.memory_limit) : fs::path();
  result.memory_limit_enforced = !cgroup.empty();

  // Everything the child needs is prepared before fork (only async-signal-safe calls after it).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    if (options.env.count(key) == 0) env_strings.push_back(entry);
  }
  for (const auto& [key, value] : options.env) {
    if (!value.empty()) env_strings.push_back(key + "=" + value);
  }
  std::vector<char*> envp, argv;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const bool redirect = !(options.log.empty() && options.passthrough);
  const std::string log = options.log.empty() ? std::string("/dev/null") : options.log.string();
  const std::string procs = cgroup.empty() ? std::string() : (cgroup / "cgroup.procs").string();

  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  TINY_CHECK(pid >= 0, Error, "could not start ", options.argv[0], ": fork failed (", std::strerror(errno), ")");
  if (pid == 0) {
    // Its own process group, so that a timeout kills everything it started;
    // a passthrough child stays in ours, so that Ctrl-C reaches it.
    if (redirect) setpgid(0, 0);
    if (!procs.empty()) {
      const int fd = open(procs.c_str(), O_WRONLY);
      if (fd >= 0) {
        (void)!write(fd, "0", 1);
        close(fd);
      }
    }
    const int out = redirect ? open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
      close(out);
    }
    const int null_in = open("/dev/null", O_RDONLY);
    if (null_in >= 0) dup2(null_in, 0);
    execve(argv[0], argv.data(), envp.data());
    const char msg[] = "could not start the program (execve failed)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(127);
  }
  if (redirect) setpgid(pid, pid);
  const pid_t target = redirect ? -pid : pid;

  int status = 0;
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > options.timeout_s) {
      result.timed_out = true;
      kill(target, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  if (redirect) kill(-pid, SIGKILL);  // whatever the program started and left behind
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status) && !result.timed_out) result.signal = WTERMSIG(status);
  if (!cgroup.empty()) {
    result.out_of_memory = !result.timed_out && result.signal == SIGKILL && cgroup_saw_oom(cgroup);
    remove_cgroup(cgroup);
  }
  if (!options.log.empty()) result.log_tail = tail_of_file(options.log);
  return result;
}

}  // namespace workbook
