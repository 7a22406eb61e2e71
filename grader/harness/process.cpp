#include "process.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
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

std::string mib(size_t bytes) {
  std::ostringstream s;
  if (bytes >= (size_t{1} << 30) && bytes % (size_t{1} << 30) == 0) {
    s << (bytes >> 30) << " GiB";
  } else {
    s << (bytes + (size_t{1} << 20) - 1) / (size_t{1} << 20) << " MiB";
  }
  return s.str();
}

// ---------------------------------------------------------------- cgroups

// The cgroups a child is put in: one per v1 hierarchy (memory, pids), or one v2 folder.
struct Cgroups {
  std::vector<fs::path> dirs;  // every folder made (to join, empty and remove)
  fs::path memory, pids;       // the folder holding each limit, if any
};

// Where this process sits: v1 hierarchies by controller, and the v2 folder.
struct OwnCgroups {
  std::map<std::string, fs::path> v1;
  fs::path unified;
};

OwnCgroups own_cgroups() {
  OwnCgroups own;
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.rfind("0::", 0) == 0) {
      const fs::path dir = "/sys/fs/cgroup" + path;
      if (fs::exists(dir / "cgroup.controllers")) own.unified = dir;
      continue;
    }
    std::istringstream names(controllers);
    std::string name;
    while (std::getline(names, name, ',')) {
      const fs::path dir = "/sys/fs/cgroup/" + name + path;
      if (fs::exists(dir)) own.v1[name] = dir;
    }
  }
  return own;
}

fs::path fresh_cgroup(const fs::path& parent) {
  static std::atomic<int> counter{0};
  const fs::path dir = parent / ("workbook-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::error_code ec;
  return fs::create_directory(dir, ec) ? dir : fs::path();
}

// Fresh cgroups holding the limits asked for, as far as this process may make them.
Cgroups make_cgroups(size_t memory_limit, int process_limit) {
  Cgroups g;
  if (memory_limit == 0 && process_limit <= 0) return g;
  const OwnCgroups own = own_cgroups();
  std::error_code ec;
  fs::path v2;  // made on first use
  auto unified = [&]() {
    if (v2.empty() && !own.unified.empty()) {
      v2 = fresh_cgroup(own.unified);
      if (!v2.empty()) g.dirs.push_back(v2);
    }
    return v2;
  };
  if (memory_limit > 0) {
    const std::string limit = std::to_string(memory_limit);
    if (own.v1.count("memory") != 0) {
      const fs::path dir = fresh_cgroup(own.v1.at("memory"));
      if (!dir.empty() && write_file(dir / "memory.limit_in_bytes", limit)) {
        if (fs::exists(dir / "memory.memsw.limit_in_bytes")) write_file(dir / "memory.memsw.limit_in_bytes", limit);
        g.dirs.push_back(dir);
        g.memory = dir;
      } else if (!dir.empty()) {
        fs::remove(dir, ec);
      }
    } else if (const fs::path dir = unified(); !dir.empty() && fs::exists(dir / "memory.max") &&
                                               write_file(dir / "memory.max", limit)) {
      write_file(dir / "memory.swap.max", "0");
      g.memory = dir;
    }
  }
  if (process_limit > 0) {
    const std::string limit = std::to_string(process_limit);
    if (own.v1.count("pids") != 0) {
      const fs::path dir = fresh_cgroup(own.v1.at("pids"));
      if (!dir.empty() && write_file(dir / "pids.max", limit)) {
        g.dirs.push_back(dir);
        g.pids = dir;
      } else if (!dir.empty()) {
        fs::remove(dir, ec);
      }
    } else if (const fs::path dir = unified(); !dir.empty() && fs::exists(dir / "pids.max") &&
                                               write_file(dir / "pids.max", limit)) {
      g.pids = dir;
    }
  }
  // A v2 folder that ended up holding no limit is of no use.
  if (!v2.empty() && g.memory != v2 && g.pids != v2) {
    g.dirs.erase(std::remove(g.dirs.begin(), g.dirs.end(), v2), g.dirs.end());
    fs::remove(v2, ec);
  }
  return g;
}

long long cgroup_event(const fs::path& file, const std::string& wanted) {
  std::ifstream in(file);
  std::string key;
  long long value = 0;
  while (in >> key >> value) {
    if (key == wanted) return value;
  }
  return 0;
}

bool cgroup_saw_oom(const fs::path& dir) {
  if (cgroup_event(dir / "memory.events", "oom_kill") > 0) return true;
  if (cgroup_event(dir / "memory.oom_control", "oom_kill") > 0) return true;
  std::ifstream failcnt(dir / "memory.failcnt");
  long long value = 0;
  return failcnt >> value && value > 0;
}

bool cgroup_saw_pids_max(const fs::path& dir) { return cgroup_event(dir / "pids.events", "max") > 0; }

// Kills whatever is still in the cgroup (a process that left the process group), then removes it.
void remove_cgroup(const fs::path& dir) {
  for (int i = 0; i < 100; ++i) {
    if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    if (fs::exists(dir / "cgroup.kill")) {
      write_file(dir / "cgroup.kill", "1");
    } else {
      std::ifstream procs(dir / "cgroup.procs");
      pid_t pid = 0;
      while (procs >> pid) kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// ---------------------------------------------------------------- the sandbox's uid

constexpr int kUidSlots = 256;
constexpr unsigned kDefaultUidBase = 2000000000u;

unsigned uid_base() {
  const char* env = std::getenv("WORKBOOK_SANDBOX_UID");
  if (env != nullptr && *env != '\0') {
    try {
      const unsigned long v = std::stoul(env);
      if (v >= 1000 && v + kUidSlots < 4294967295ul) return static_cast<unsigned>(v);
    } catch (const std::exception&) {
    }
  }
  return kDefaultUidBase;
}

// What /proc/PID/status says of each process that matters here.
struct ProcessStatus {
  unsigned long uid = 0;  // real uid
  bool zombie = false;
  long threads = 0;
};

// Calls `fn` with the status of every process on the machine.
template <typename Fn>
void for_each_process(Fn fn) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(entry.path() / "status");
    ProcessStatus p;
    bool seen_uid = false;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("State:", 0) == 0) p.zombie = line.find('Z') != std::string::npos;
      if (line.rfind("Uid:", 0) == 0) {
        p.uid = std::strtoul(line.c_str() + 4, nullptr, 10);
        seen_uid = true;
      }
      if (line.rfind("Threads:", 0) == 0) p.threads = std::atol(line.c_str() + 8);
    }
    if (seen_uid) fn(p);
  }
}

// The uids of [first, first + count) that have a process now: any (zombies
// count against RLIMIT_NPROC until their parent reaps them), or live ones only.
std::vector<bool> uids_in_use(unsigned first, int count, bool live_only = false) {
  std::vector<bool> used(static_cast<size_t>(count), false);
  for_each_process([&](const ProcessStatus& p) {
    if (p.uid >= first && p.uid < first + static_cast<unsigned long>(count) && !(live_only && p.zombie)) {
      used[p.uid - first] = true;
    }
  });
  return used;
}

// One uid of the pool, held (an open-file-description lock on byte `slot` of a
// root-only lock file) for as long as this object lives, so that no other
// run on this machine uses it at the same time. A uid that still has
// processes (a run's orphans not yet reaped) is passed over, and the search
// starts at a different slot each time.
class UidSlot {
 public:
  UidSlot() {
    const fs::path dir = fs::is_directory("/run") && access("/run", W_OK) == 0 ? fs::path("/run") : fs::temp_directory_path();
    fd_ = open((dir / "workbook-sandbox-uids.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ < 0) return;
    struct stat st {};
    if (fstat(fd_, &st) != 0 || st.st_uid != 0) {  // someone else's file: not to be trusted
      close(fd_);
      fd_ = -1;
      return;
    }
    static std::atomic<unsigned> turn{static_cast<unsigned>(getpid()) * 7919u};
    const unsigned base = uid_base();
    for (int waited = 0; waited < 6000 && uid_ == 0; ++waited) {
      const std::vector<bool> busy = uids_in_use(base, kUidSlots);
      const unsigned start = turn++;
      for (int i = 0; i < kUidSlots; ++i) {
        const int slot = static_cast<int>((start + static_cast<unsigned>(i)) % kUidSlots);
        if (busy[static_cast<size_t>(slot)]) continue;
        struct flock lock {};
        lock.l_type = F_WRLCK;
        lock.l_whence = SEEK_SET;
        lock.l_start = slot;
        lock.l_len = 1;
        if (fcntl(fd_, F_OFD_SETLK, &lock) == 0) {
          uid_ = base + static_cast<unsigned>(slot);
          break;
        }
      }
      if (uid_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~UidSlot() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  UidSlot(const UidSlot&) = delete;
  UidSlot& operator=(const UidSlot&) = delete;
  unsigned uid() const { return uid_; }

 private:
  int fd_ = -1;
  unsigned uid_ = 0;
};

// Kills every process of `uid` (kill(-1) from a helper running as that uid
// reaches exactly them), until none is alive: a process that left the process
// group and the cgroup still dies with the run.
void kill_all_of_uid(unsigned uid) {
  for (int i = 0; i < 20; ++i) {
    const pid_t helper = fork();
    if (helper < 0) return;
    if (helper == 0) {
      if (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setgid, uid) != 0 || syscall(SYS_setuid, uid) != 0) _exit(2);
      kill(-1, SIGKILL);  // says 0 whenever any process exists: no use as an answer
      _exit(0);
    }
    int status = 0;
    waitpid(helper, &status, 0);
    if (!uids_in_use(uid, 1, true)[0]) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Gives a folder and everything in it (made by us, trusted) to `uid`.
void give_to(const fs::path& dir, unsigned uid) {
  std::error_code ec;
  if (lchown(dir.c_str(), uid, uid) != 0) return;
  chmod(dir.c_str(), 0700);
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    (void)!lchown(it->path().c_str(), uid, uid);
  }
}

// The tasks (processes and threads) `uid` has now, from /proc: RLIMIT_NPROC counts them all.
long tasks_of_uid(uid_t uid) {
  long tasks = 0;
  for_each_process([&](const ProcessStatus& p) {
    if (p.uid == uid) tasks += p.threads;
  });
  return tasks;
}

// ---------------------------------------------------------------- messages

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

// The last lines of what is in `fd` (read from its last 64 KiB), each cut to
// 200 characters, 4000 characters at most.
std::string tail_of_fd(int fd, size_t max_lines) {
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) return "";
  const off_t window = 64 * 1024;
  const off_t from = st.st_size > window ? st.st_size - window : 0;
  std::string text(static_cast<size_t>(st.st_size - from), '\0');
  const ssize_t n = pread(fd, text.data(), text.size(), from);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (from > 0) {  // the first line is only a piece
    const size_t nl = text.find('\n');
    text = nl == std::string::npos ? text : text.substr(nl + 1);
  }
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line.size() > 200 ? line.substr(0, 200) + " [...]" : line);
  std::string out;
  size_t first = lines.size() > max_lines ? lines.size() - max_lines : 0;
  size_t chars = 0;
  for (size_t i = lines.size(); i > first; --i) {
    chars += lines[i - 1].size() + 1;
    if (chars > 4000) {
      first = i;
      break;
    }
  }
  for (size_t i = first; i < lines.size(); ++i) out += lines[i] + "\n";
  return out;
}

// What the child reports to us through a pipe just before it starts the program.
enum ChildFlags : unsigned {
  kOwnUser = 1,
  kNoNetwork = 2,
  kHidden = 4,
  kReported = 8,
  kReadOnly = 16,
};

// What the child reports through the `started` pipe when it cannot start the
// program (a successful exec closes the pipe instead).
enum class StartStage : int { chdir, setuid, exec };
struct StartFailure {
  StartStage stage;
  int error;  // errno
};

std::string start_failure_text(const StartFailure& f, const std::string& program) {
  const std::string why = std::strerror(f.error);
  switch (f.stage) {
    case StartStage::chdir: return "its working folder cannot be entered: " + why;
    case StartStage::setuid: return "its sandbox's uid could not be taken: " + why;
    case StartStage::exec: break;
  }
  return "execve failed: " + why + ": " + program;
}

// Brings up the loopback of a fresh network namespace (async-signal-safe): the
// program may talk to itself (tinyrun's rendezvous on 127.0.0.1), to nothing else.
bool loopback_up() {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  struct ifreq request {};
  std::memcpy(request.ifr_name, "lo", 3);
  bool ok = ioctl(fd, SIOCGIFFLAGS, &request) == 0;
  request.ifr_flags = static_cast<short>(request.ifr_flags | IFF_UP);
  ok = ok && ioctl(fd, SIOCSIFFLAGS, &request) == 0;
  close(fd);
  return ok;
}

// mount_setattr(2) (Linux 5.12), called directly: glibc 2.36 has no wrapper.
struct MountAttr {
  uint64_t attr_set = 0, attr_clr = 0, propagation = 0, userns_fd = 0;
};
constexpr uint64_t kMountAttrReadOnly = 0x1;
#ifdef SYS_mount_setattr
constexpr long kSysMountSetattr = SYS_mount_setattr;
#else
constexpr long kSysMountSetattr = 442;
#endif

// Bytes a program wrote: its log (through our descriptor: even unlinked, it
// counts) and its folder, each file as the larger of its size and its blocks.
// Past 100000 files it counts as full (a flood of empty files).
size_t bytes_written(const std::string& dir, int log_fd, size_t full) {
  size_t total = 0;
  struct stat log {};
  if (log_fd >= 0 && fstat(log_fd, &log) == 0 && S_ISREG(log.st_mode)) total += static_cast<size_t>(log.st_size);
  if (dir.empty()) return total;
  std::error_code ec;
  size_t entries = 0;
  struct stat st {};
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++entries > 100000) return full + 1;
    if (lstat(it->path().c_str(), &st) != 0 || (st.st_ino == log.st_ino && st.st_dev == log.st_dev)) continue;
    const size_t blocks = static_cast<size_t>(st.st_blocks) * 512;
    total += S_ISREG(st.st_mode) ? std::max(blocks, static_cast<size_t>(st.st_size)) : blocks;
  }
  return total;
}

}  // namespace

std::string Isolation::describe() const {
  std::string s = own_user ? "own uid " + std::to_string(uid) : "our uid";
  s += no_network ? ", no network" : ", network reachable";
  s += paths_hidden ? ", sources hidden" : ", sources readable";
  s += read_only ? ", read-only but its folder" : ", may write outside its folder";
  return s;
}

std::string ProcessResult::describe() const {
  std::ostringstream s;
  if (start_failed) {
    s << "could not be started (" << start_error << ")";
  } else if (timed_out) {
    s << "did not finish within the time limit and was stopped (an endless loop, or waiting on something that never comes)";
  } else if (process_limit_hit) {
    s << "tried to run more than " << process_limit
      << " processes and threads at once (the limit of this check; a fork bomb?) and was stopped";
  } else if (output_limit_hit) {
    s << "wrote more than " << mib(output_limit) << " of output (the limit of this check) and was stopped";
  } else if (cpu_limit_hit) {
    s << "used more than " << cpu_limit_s << " s of CPU time (the limit of this check) and was stopped";
  } else if (out_of_memory) {
    s << "ran out of memory (over the limit of this check";
    if (memory_limit > 0) s << ", " << mib(memory_limit);
    s << ") and was stopped";
  } else if (signal != 0) {
    s << "crashed with SIG" << sigabbrev_np(signal) << " (" << signal_meaning(signal) << ")";
  } else {
    s << "exited with code " << exit_code;
  }
  return s.str();
}

std::string tail_of_file(const fs::path& path, size_t max_lines) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out = tail_of_fd(fd, max_lines);
  close(fd);
  return out;
}

bool sandbox_has_own_user() { return geteuid() == 0; }

ProcessResult run_process(const ProcessOptions& options) {
  TINY_CHECK(!options.argv.empty(), ValueError, "run_process: no program given");
  ProcessResult result;
  result.memory_limit = options.memory_limit;
  result.output_limit = options.output_limit;
  result.cpu_limit_s = options.cpu_limit_s;
  result.process_limit = options.process_limit;
  const bool root = geteuid() == 0;
  const bool own_user = options.sandbox && root;

  Cgroups cgroups = make_cgroups(options.memory_limit, options.process_limit);
  result.memory_limit_enforced = !cgroups.memory.empty();
  result.process_limit_enforced = !cgroups.pids.empty();

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
  std::vector<std::string> procs;
  for (const fs::path& dir : cgroups.dirs) procs.push_back((dir / "cgroup.procs").string());

  // Limits set in the child: {resource, soft, hard}.
  struct Limit {
    int resource;
    rlim_t soft, hard;
  };
  std::vector<Limit> limits;
  // No RLIMIT_FSIZE: the emulated GPU's memory is a memfd as large as twice
  // the device; output is measured as it runs instead (see below).
  if (options.cpu_limit_s > 0) {
    const rlim_t cpu = static_cast<rlim_t>(std::ceil(options.cpu_limit_s));
    limits.push_back({RLIMIT_CPU, cpu, cpu + 5});  // SIGXCPU at the soft limit, SIGKILL at the hard one
  }
  if (options.sandbox || options.output_limit > 0) limits.push_back({RLIMIT_CORE, 0, 0});  // no core files

  // The sandbox's own uid, its folder and the program by descriptor (its path may be out of the uid's reach).
  std::unique_ptr<UidSlot> slot;
  unsigned uid = 0;
  if (own_user) {
    slot = std::make_unique<UidSlot>();
    uid = slot->uid();
    TINY_CHECK(uid != 0, Error, "could not start ", options.argv[0],
               " in its sandbox: no free uid (every one of ", kUidSlots, " from ", uid_base(), " is in use)");
    if (!options.cwd.empty()) give_to(options.cwd, uid);
  }
  if (options.process_limit > 0) {
    if (own_user) {
      // Its uid is its own: the count is exact, and applies to root's child too. With a
      // pids cgroup as well, that one is to stop it first (it says so in pids.events).
      const rlim_t n = static_cast<rlim_t>(options.process_limit + (cgroups.pids.empty() ? 0 : 64));
      limits.push_back({RLIMIT_NPROC, n, n});
      result.process_limit_enforced = true;
    } else if (!root && cgroups.pids.empty()) {
      // Shared with every process of this user: what it has now, plus the limit.
      const rlim_t n = static_cast<rlim_t>(tasks_of_uid(getuid()) + options.process_limit);
      struct rlimit current {};
      getrlimit(RLIMIT_NPROC, &current);
      limits.push_back({RLIMIT_NPROC, std::min(n, current.rlim_max), current.rlim_max});
      result.process_limit_enforced = true;
    }
  }
  const int exe_fd = options.sandbox ? open(options.argv[0].c_str(), O_PATH | O_CLOEXEC) : -1;
  struct Hidden {
    std::string path;
    bool is_dir;
  };
  std::vector<Hidden> hidden;
  for (const fs::path& p : options.sandbox ? options.hidden : std::vector<fs::path>{}) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (ec || !fs::exists(st)) continue;
    hidden.push_back({fs::canonical(p, ec).string(), fs::is_directory(st)});
  }
  const std::string uid_map = std::to_string(getuid()) + " " + std::to_string(getuid()) + " 1\n";
  const std::string gid_map = std::to_string(getgid()) + " " + std::to_string(getgid()) + " 1\n";
  const std::string cwd = options.cwd.string();

  // The log is opened here, so that what we read back is what it wrote, even if it renamed the file.
  int log_fd = -1;
  if (redirect && !options.log.empty()) {
    log_fd = open(options.log.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  }
  if (redirect && log_fd < 0) log_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  int report[2] = {-1, -1};
  if (options.sandbox && pipe2(report, O_CLOEXEC) != 0) report[0] = report[1] = -1;
  // Closed by a successful exec; before that, the child writes why it could
  // not start: the program never ran, which is never the program's fault.
  int started[2] = {-1, -1};
  if (pipe2(started, O_CLOEXEC) != 0) started[0] = started[1] = -1;

  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {exe_fd, log_fd, report[0], report[1], started[0], started[1]}) {
      if (fd >= 0) close(fd);
    }
    for (const fs::path& dir : cgroups.dirs) remove_cgroup(dir);
    TINY_CHECK(false, Error, "could not start ", options.argv[0], ": fork failed (", std::strerror(err), ")");
  }
  if (pid == 0) {
    // Its own process group, so that a timeout kills everything it started;
    // a passthrough child stays in ours, so that Ctrl-C reaches it.
    if (redirect) setpgid(0, 0);
    for (const std::string& p : procs) {
      const int fd = open(p.c_str(), O_WRONLY);
      if (fd >= 0) {
        (void)!write(fd, "0", 1);
        close(fd);
      }
    }
    for (const Limit& l : limits) {
      const struct rlimit r = {l.soft, l.hard};
      setrlimit(l.resource, &r);
    }
    if (log_fd >= 0) {
      dup2(log_fd, 1);
      dup2(log_fd, 2);
    }
    const int null_in = open("/dev/null", O_RDONLY);
    if (null_in >= 0) dup2(null_in, 0);
    unsigned flags = kReported;
    if (options.sandbox) {
      bool mount_ns = false;
      if (root) {
        if (unshare(CLONE_NEWNET) == 0 && loopback_up()) flags |= kNoNetwork;
        mount_ns = unshare(CLONE_NEWNS) == 0;
      } else if (unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) == 0) {
        // Our own uid and gid, mapped to themselves: the same files as before, in namespaces of our own.
        auto put = [](const char* file, const std::string& text) {
          const int fd = open(file, O_WRONLY);
          const bool ok = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
          if (fd >= 0) close(fd);
          return ok;
        };
        if (put("/proc/self/uid_map", uid_map) && put("/proc/self/setgroups", "deny") &&
            put("/proc/self/gid_map", gid_map)) {
          if (loopback_up()) flags |= kNoNetwork;
          mount_ns = true;
        }
      }
      if (mount_ns && mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0) {
        // Its folder becomes a mount of its own, to stay writable when everything else is made read-only.
        const bool own_folder = !cwd.empty() && mount(cwd.c_str(), cwd.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0;
        bool all = true;
        for (const Hidden& h : hidden) {
          const int rc = h.is_dir ? mount("workbook-hidden", h.path.c_str(), "tmpfs",
                                          MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=1,mode=000")
                                  : mount("/dev/null", h.path.c_str(), nullptr, MS_BIND, nullptr);
          all = all && rc == 0;
        }
        if (all) flags |= kHidden;
        MountAttr read_only{};
        read_only.attr_set = kMountAttrReadOnly;
        MountAttr writable{};
        writable.attr_clr = kMountAttrReadOnly;
        if (own_folder &&
            syscall(kSysMountSetattr, AT_FDCWD, "/", AT_RECURSIVE, &read_only, sizeof read_only) == 0 &&
            syscall(kSysMountSetattr, AT_FDCWD, cwd.c_str(), AT_RECURSIVE, &writable, sizeof writable) == 0) {
          flags |= kReadOnly;
        }
      }
    }
    auto cannot_start = [&](StartStage stage, int code, const char* msg, size_t size) {
      const StartFailure failure{stage, errno};
      if (started[1] >= 0) (void)!write(started[1], &failure, sizeof failure);
      (void)!write(2, msg, size);
      _exit(code);
    };
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) {
      const char msg[] = "could not start the program (its working folder cannot be entered)\n";
      cannot_start(StartStage::chdir, 126, msg, sizeof msg - 1);
    }
    if (own_user) {
      // Raw system calls: this child has one thread, and glibc's wrappers would try to reach the parent's others.
      if (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setgid, uid) != 0 || syscall(SYS_setuid, uid) != 0 ||
          getuid() != uid || geteuid() != uid) {
        const char msg[] = "could not start the program in its sandbox (setuid failed)\n";
        cannot_start(StartStage::setuid, 126, msg, sizeof msg - 1);
      }
      flags |= kOwnUser;
    }
    if (options.sandbox) {
      prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
      // Nothing of ours beyond stdin, stdout and stderr survives the exec.
      if (syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */) != 0) {
        for (int fd = 3; fd < 4096; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
      }
    }
    if (report[1] >= 0) (void)!write(report[1], &flags, sizeof flags);
    if (exe_fd >= 0) {
      fexecve(exe_fd, argv.data(), envp.data());
    } else {
      execve(argv[0], argv.data(), envp.data());
    }
    const char msg[] = "could not start the program (execve failed)\n";
    cannot_start(StartStage::exec, 127, msg, sizeof msg - 1);
  }
  if (redirect) setpgid(pid, pid);
  const pid_t target = redirect ? -pid : pid;
  if (exe_fd >= 0) close(exe_fd);
  if (report[1] >= 0) close(report[1]);
  if (started[1] >= 0) close(started[1]);
  if (report[0] >= 0) {
    unsigned flags = 0;
    ssize_t n;
    do {
      n = read(report[0], &flags, sizeof flags);
    } while (n < 0 && errno == EINTR);
    close(report[0]);
    if (n == static_cast<ssize_t>(sizeof flags)) {
      result.isolation.own_user = (flags & kOwnUser) != 0;
      result.isolation.uid = result.isolation.own_user ? uid : static_cast<unsigned>(getuid());
      result.isolation.no_network = (flags & kNoNetwork) != 0;
      result.isolation.paths_hidden = (flags & kHidden) != 0;
      result.isolation.read_only = (flags & kReadOnly) != 0;
    }
  }

  if (started[0] >= 0) {
    StartFailure failure{};
    ssize_t n;
    do {
      n = read(started[0], &failure, sizeof failure);
    } while (n < 0 && errno == EINTR);
    close(started[0]);
    if (n == static_cast<ssize_t>(sizeof failure)) {
      result.start_failed = true;
      result.start_error = start_failure_text(failure, options.argv[0]);
    }
  }

  // What it writes is measured as it runs: its log, and its folder when it has one.
  auto over_output = [&]() {
    return options.output_limit > 0 && bytes_written(cwd, log_fd, options.output_limit) > options.output_limit;
  };
  int status = 0;
  struct rusage usage {};
  auto pause = std::chrono::microseconds(200);
  double measured_at = 0;
  for (;;) {
    const pid_t done = wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool too_many = !cgroups.pids.empty() && cgroup_saw_pids_max(cgroups.pids);
    bool too_much = false;
    if (options.output_limit > 0 && elapsed - measured_at > 0.02) {
      measured_at = elapsed;
      too_much = over_output();
    }
    if (elapsed > options.timeout_s || too_many || too_much) {
      result.timed_out = !too_many && !too_much;
      result.process_limit_hit = too_many;
      result.output_limit_hit = too_much;
      kill(target, SIGKILL);
      wait4(pid, &status, 0, &usage);
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  if (redirect) kill(-pid, SIGKILL);  // whatever the program started and left behind
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status) && !result.timed_out && !result.process_limit_hit && !result.output_limit_hit) {
    result.signal = WTERMSIG(status);
  }
  if (own_user) {
    kill_all_of_uid(uid);
    // Its folder back to root: the next run given this uid must not read it.
    if (!options.cwd.empty()) give_to(options.cwd, 0);
  }
  if (!cgroups.pids.empty() && cgroup_saw_pids_max(cgroups.pids) && !result.timed_out) result.process_limit_hit = true;
  if (!cgroups.memory.empty()) {
    result.out_of_memory = !result.timed_out && result.signal == SIGKILL && cgroup_saw_oom(cgroups.memory);
  }
  for (const fs::path& dir : cgroups.dirs) remove_cgroup(dir);
  if (!result.output_limit_hit && !result.timed_out && over_output()) result.output_limit_hit = true;
  if (options.cpu_limit_s > 0) {
    result.cpu_limit_hit = result.signal == SIGXCPU ||
                           (result.signal == SIGKILL && result.cpu_seconds >= options.cpu_limit_s && !result.out_of_memory);
  }
  if (!options.log.empty()) result.log_tail = tail_of_fd(log_fd, result.output_limit_hit ? 3 : 30);
  if (log_fd >= 0) close(log_fd);
  return result;
}

}  // namespace workbook
