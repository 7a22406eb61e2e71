#include "process.h"

#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
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
  kFolderLimited = 32,
  kOwnPids = 64,
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

// Bytes in the files under `dir` but `log` (counted as we write it), each as
// the larger of its size and its blocks (a sparse file counts for what it
// claims). Past 100000 entries it counts as `full` + 1 (a flood of empty files).
size_t tree_bytes(const std::string& dir, size_t full, int log_fd) {
  size_t total = 0, entries = 0;
  std::error_code ec;
  struct stat st {}, log {};
  if (log_fd < 0 || fstat(log_fd, &log) != 0) log.st_ino = 0;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++entries > 100000) return full + 1;
    if (lstat(it->path().c_str(), &st) != 0 || (st.st_ino == log.st_ino && st.st_dev == log.st_dev)) continue;
    const size_t blocks = static_cast<size_t>(st.st_blocks) * 512;
    total += S_ISREG(st.st_mode) ? std::max(blocks, static_cast<size_t>(st.st_size)) : blocks;
  }
  return total;
}

// The same for a folder we hold by descriptor (a run's tmpfs), without
// following links, but the names of `skip` (where its inputs were bound).
size_t tree_bytes_at(int dir_fd, size_t full, size_t& entries, const std::vector<std::string>& skip, int depth = 0) {
  if (depth > 64) return full + 1;
  const int copy = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // a reading position of its own
  DIR* dir = copy >= 0 ? fdopendir(copy) : nullptr;
  if (dir == nullptr) {
    if (copy >= 0) close(copy);
    return 0;
  }
  size_t total = 0;
  while (const dirent* e = readdir(dir)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    if (std::find(skip.begin(), skip.end(), e->d_name) != skip.end()) continue;
    if (++entries > 100000 || total > full) {
      total = full + 1;
      break;
    }
    struct stat st {};
    if (fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const size_t blocks = static_cast<size_t>(st.st_blocks) * 512;
    total += S_ISREG(st.st_mode) ? std::max(blocks, static_cast<size_t>(st.st_size)) : blocks;
    if (S_ISDIR(st.st_mode)) {
      const int sub = openat(dir_fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) {
        total += tree_bytes_at(sub, full, entries, {}, depth + 1);
        close(sub);
      }
    }
  }
  closedir(dir);
  return total;
}

// Bytes in the files the processes `pids` hold open once unlinked (a file
// made and deleted, O_TMPFILE): no walk of a folder sees them. The memfds
// (the emulated GPU's memory) are memory, bounded by the memory cgroup.
size_t unlinked_bytes(const std::vector<pid_t>& pids) {
  std::set<std::pair<dev_t, ino_t>> seen;
  size_t total = 0;
  for (pid_t pid : pids) {
    const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(fds, ec)) {
      struct stat st {};
      if (stat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 0) continue;
      if (!seen.insert({st.st_dev, st.st_ino}).second) continue;
      char target[64] = {};
      const ssize_t n = readlink(entry.path().c_str(), target, sizeof target - 1);
      if (n > 0 && std::strncmp(target, "/memfd:", 7) == 0) continue;
      total += std::max(static_cast<size_t>(st.st_blocks) * 512, static_cast<size_t>(st.st_size));
    }
  }
  return total;
}

// The processes of a run: those of its cgroup (a daemon that left the process
// group too), else those of its own uid, else those of its process group.
std::vector<pid_t> processes_of_run(const Cgroups& cgroups, unsigned own_uid, pid_t group) {
  std::vector<pid_t> pids;
  if (!cgroups.dirs.empty()) {
    std::ifstream procs(cgroups.dirs.front() / "cgroup.procs");
    for (pid_t pid = 0; procs >> pid;) pids.push_back(pid);
    return pids;
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(name.c_str()));
    if (own_uid != 0) {
      struct stat st {};
      if (stat(entry.path().c_str(), &st) == 0 && st.st_uid == own_uid) pids.push_back(pid);
      continue;
    }
    std::ifstream stat_file(entry.path() / "stat");
    std::string text;
    std::getline(stat_file, text);
    const size_t close_paren = text.rfind(')');
    if (close_paren == std::string::npos) continue;
    std::istringstream rest(text.substr(close_paren + 2));
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (rest >> state >> ppid >> pgrp && pgrp == group) pids.push_back(pid);
  }
  return pids;
}

// Copies what a run left in its tmpfs (`from`) into its folder (`to`), as
// root, once every process of it is gone: files, folders, and symbolic links
// as links (the checker refuses them), nothing else, never following a link.
// `skip`: the names of the files that were there before it ran (bound
// read-only into it); `budget`: the bytes it may still copy (a process that
// outlived the run could still grow a sparse file).
void copy_back(int from, int to, const std::vector<std::string>& skip, size_t& budget, int depth = 0) {
  if (depth > 64) return;
  const int copy = openat(from, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // a reading position of its own
  DIR* dir = copy >= 0 ? fdopendir(copy) : nullptr;
  if (dir == nullptr) {
    if (copy >= 0) close(copy);
    return;
  }
  while (const dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    struct stat st {};
    if (fstatat(from, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (mkdirat(to, name.c_str(), 0755) != 0 && errno != EEXIST) continue;
      const int sub_from = openat(from, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      const int sub_to = openat(to, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub_from >= 0 && sub_to >= 0) copy_back(sub_from, sub_to, {}, budget, depth + 1);
      if (sub_from >= 0) close(sub_from);
      if (sub_to >= 0) close(sub_to);
    } else if (S_ISREG(st.st_mode)) {
      const int in = openat(from, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      const int out = in < 0 ? -1
                             : openat(to, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                      (st.st_mode & 0111) != 0 ? 0755 : 0644);
      char buffer[65536];
      for (ssize_t n; out >= 0 && budget > 0 && (n = read(in, buffer, std::min(sizeof buffer, budget))) > 0;) {
        if (write(out, buffer, static_cast<size_t>(n)) != n) break;
        budget -= static_cast<size_t>(n);
      }
      if (in >= 0) close(in);
      if (out >= 0) close(out);
    } else if (S_ISLNK(st.st_mode)) {
      char target[4096];
      const ssize_t n = readlinkat(from, name.c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      (void)!symlinkat(target, to, name.c_str());
    }
  }
  closedir(dir);
}

// Removes what a stopped run wrote into its folder (the names not in `before`): at once, not when the checks end.
void remove_new_entries(const fs::path& dir, const std::vector<std::string>& before) {
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (std::find(before.begin(), before.end(), entry.path().filename().string()) == before.end()) {
      doomed.push_back(entry.path());
    }
  }
  for (const fs::path& p : doomed) fs::remove_all(p, ec);
}

// One byte carrying one descriptor (SCM_RIGHTS) over a local socket; plain
// stores only, so the child may build it before exec (async-signal-safe).
struct FdMessage {
  char byte = 0;
  struct iovec io {&byte, 1};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr msg {};
  FdMessage() {
    msg.msg_iov = &io;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

// Sends a descriptor over a local socket.
bool send_fd(int socket, int fd) {
  FdMessage m;
  struct cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  return sendmsg(socket, &m.msg, MSG_NOSIGNAL) == 1;
}

int receive_fd(int socket) {
  FdMessage m;
  if (recvmsg(socket, &m.msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1) return -1;
  struct cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  if (c == nullptr || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

// Bytes used in a tmpfs we hold by descriptor.
size_t tmpfs_used(int fd) {
  struct statfs st {};
  if (fstatfs(fd, &st) != 0) return 0;
  return static_cast<size_t>(st.f_blocks - st.f_bfree) * static_cast<size_t>(st.f_bsize);
}

// ---------------------------------------------------------------- the environment of a sandbox

// What a sandboxed program may inherit from ours: what programs need (the
// path, the locale, the workbook's and its libraries' settings), none of the
// rest (a grading server's tokens and keys are no business of a submission's).
bool inherited_in_sandbox(const std::string& key) {
  static const char* const names[] = {"PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TERM", "NO_COLOR", "LD_LIBRARY_PATH"};
  static const char* const prefixes[] = {"LC_",   "TINY_",  "WORKBOOK_", "OPENBLAS_", "OMP_",  "GOTO",
                                         "GLOO_", "NCCL_",  "CUDA_",     "ASAN_",     "UBSAN_", "LSAN_",
                                         "TSAN_", "MSAN_"};
  for (const char* n : names) {
    if (key == n) return true;
  }
  for (const char* p : prefixes) {
    if (key.rfind(p, 0) == 0) return true;
  }
  return false;
}

// The paths of WORKBOOK_SANDBOX_HIDE (separated by ':').
std::vector<fs::path> hidden_by_environment() {
  std::vector<fs::path> out;
  if (const char* env = std::getenv("WORKBOOK_SANDBOX_HIDE"); env != nullptr) {
    std::istringstream in(env);
    for (std::string item; std::getline(in, item, ':');) {
      if (!item.empty()) out.push_back(item);
    }
  }
  return out;
}

// ---------------------------------------------------------------- interrupts

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

// One call of run_process among the live ones; once the program is being
// interrupted no new child starts, and a call that ends waits for the exit.
class LiveRun {
 public:
  LiveRun() {
    Interrupts& s = interrupts();
    std::unique_lock<std::mutex> lock(s.mutex);
    if (g_interrupted != 0) {
      lock.unlock();
      wait_for_the_end();
    }
    ++s.live;
  }
  ~LiveRun() { finish(); }
  LiveRun(const LiveRun&) = delete;
  LiveRun& operator=(const LiveRun&) = delete;
  void finish() {
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

 private:
  bool finished_ = false;
};

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

// ---------------------------------------------------------------- temporary folders

// When process `pid` started (clock ticks since boot, /proc/PID/stat's 22nd
// field), or 0 when there is no such process (or only its zombie: it is dead).
unsigned long long start_time_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(in, text);
  const size_t close_paren = text.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream rest(text.substr(close_paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 3 && (field == "Z" || field == "X")) return 0;
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return 0;
}

// Removes `name` in the folder `parent` and, if it is a folder, everything in
// it, through descriptors: a link is removed, never followed.
void remove_tree_at(int parent, const char* name, int depth = 0) {
  const int fd = depth > 256 ? -1 : openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    unlinkat(parent, name, 0);
    return;
  }
  fchmod(fd, 0700);  // a folder left read-only (a run's inputs) can be emptied
  const int reading = dup(fd);
  DIR* dir = reading >= 0 ? fdopendir(reading) : nullptr;
  std::vector<std::string> names;
  while (dir != nullptr) {
    const dirent* e = readdir(dir);
    if (e == nullptr) break;
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
  }
  if (dir != nullptr) closedir(dir);
  else if (reading >= 0) close(reading);
  for (const std::string& n : names) remove_tree_at(fd, n.c_str(), depth + 1);
  close(fd);
  unlinkat(parent, name, AT_REMOVEDIR);
}

}  // namespace

fs::path make_temp_folder(const std::string& what) {
  const fs::path tmp = fs::temp_directory_path();
  std::string path = (tmp / ("workbook-" + what + "-" + std::to_string(getpid()) + "." +
                             std::to_string(start_time_of(getpid())) + "-XXXXXX")).string();
  TINY_CHECK(mkdtemp(path.data()) != nullptr, IOError, "cannot make a work folder in ", tmp.string(), ": ",
             std::strerror(errno));
  remove_on_interrupt(path);
  return path;
}

int sweep_stale_temp_folders() {
  std::error_code ec;
  const fs::path tmp = fs::temp_directory_path(ec);
  if (ec) return 0;
  const int tmp_fd = open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (tmp_fd < 0) return 0;
  std::vector<std::string> stale;
  for (const auto& entry : fs::directory_iterator(tmp, ec)) {
    const std::string name = entry.path().filename().string();
    // workbook-WHAT-PID.START-XXXXXX
    if (name.rfind("workbook-", 0) != 0 || name.size() < 9 + 1 + 1 + 1 + 1 + 1 + 7) continue;
    const size_t suffix = name.size() - 7;
    if (name[suffix] != '-') continue;
    const size_t dash = name.rfind('-', suffix - 1), dot = name.rfind('.', suffix - 1);
    if (dash == std::string::npos || dot == std::string::npos || dash < 9 || dot < dash) continue;
    const std::string pid_text = name.substr(dash + 1, dot - dash - 1), start_text = name.substr(dot + 1, suffix - dot - 1);
    const std::string what = name.substr(9, dash - 9);
    auto digits = [](const std::string& t) {
      return !t.empty() && t.size() < 20 && t.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(pid_text) || !digits(start_text) || what.empty() ||
        what.find_first_not_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos) {
      continue;
    }
    struct stat st {};
    if (fstatat(tmp_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
      continue;
    }
    const unsigned long long pid = std::strtoull(pid_text.c_str(), nullptr, 10);
    const unsigned long long start = std::strtoull(start_text.c_str(), nullptr, 10);
    if (pid > 0 && pid < 1u << 30 && start_time_of(static_cast<pid_t>(pid)) == start) continue;  // its process lives
    stale.push_back(name);
  }
  for (const std::string& name : stale) remove_tree_at(tmp_fd, name.c_str());
  close(tmp_fd);
  // The cgroups of a process killed outright (workbook-PID-N beside ours): an
  // empty one is removed, when no process of that PID lives (rmdir refuses a
  // cgroup that still holds a process).
  const OwnCgroups own = own_cgroups();
  std::vector<fs::path> parents;
  for (const auto& [name, dir] : own.v1) parents.push_back(dir);
  if (!own.unified.empty()) parents.push_back(own.unified);
  for (const fs::path& parent : parents) {
    for (const auto& entry : fs::directory_iterator(parent, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("workbook-", 0) != 0) continue;
      const size_t dash = name.find('-', 9);
      const std::string pid_text = name.substr(9, dash == std::string::npos ? std::string::npos : dash - 9);
      if (dash == std::string::npos || pid_text.empty() || pid_text.size() > 9 ||
          pid_text.find_first_not_of("0123456789") != std::string::npos) {
        continue;
      }
      if (start_time_of(static_cast<pid_t>(std::stol(pid_text))) == 0) rmdir(entry.path().c_str());
    }
  }
  return static_cast<int>(stale.size());
}

std::string Isolation::describe() const {
  std::string s = own_user ? "own uid " + std::to_string(uid) : "our uid";
  s += no_network ? ", no network" : ", network reachable";
  s += paths_hidden ? ", sources hidden" : ", sources readable";
  s += read_only ? ", read-only but its folder" : ", may write outside its folder";
  if (folder_limit > 0) s += folder_limited ? ", its folder a " + mib(folder_limit) + " tmpfs" : ", its folder only measured";
  s += own_pids ? ", own PID namespace" : ", processes may outlive it";
  return s;
}

std::string Isolation::missing() const {
  std::vector<std::string> parts;
  if (!own_user) parts.push_back("its own uid (the grader must run as root)");
  if (!no_network) parts.push_back("no network (a network namespace)");
  if (!paths_hidden) parts.push_back("the sources hidden (a mount namespace)");
  if (!read_only) parts.push_back("read-only file systems (a mount namespace)");
  if (!folder_limited) parts.push_back("a size-limited folder (a tmpfs in its mount namespace)");
  if (!own_pids) parts.push_back("everything it starts dying with it (a PID namespace)");
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
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
  // The descriptors given to the child are ours to close, however this ends.
  auto close_passed = [&]() {
    for (int fd : options.pass_fds) {
      if (fd >= 0) close(fd);
    }
  };
  LiveRun live;  // after an interrupt no child starts; the watcher waits for this one to be stopped
  ProcessResult result;
  result.memory_limit = options.memory_limit;
  result.output_limit = options.output_limit;
  result.cpu_limit_s = options.cpu_limit_s;
  result.process_limit = options.process_limit;
  result.isolation.folder_limit = options.sandbox ? options.output_limit : 0;
  const bool root = geteuid() == 0;
  const bool own_user = options.sandbox && root;
  const pid_t parent = getpid();

  Cgroups cgroups = make_cgroups(options.memory_limit, options.process_limit);
  result.memory_limit_enforced = !cgroups.memory.empty();
  result.process_limit_enforced = !cgroups.pids.empty();

  // Everything the child needs is prepared before fork (only async-signal-safe calls after it).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    if (options.env.count(key) == 0 && (!options.sandbox || inherited_in_sandbox(key))) env_strings.push_back(entry);
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
  // the device; output is bounded otherwise (see below).
  if (options.cpu_limit_s > 0) {
    const rlim_t cpu = static_cast<rlim_t>(std::ceil(options.cpu_limit_s));
    limits.push_back({RLIMIT_CPU, cpu, cpu + 5});  // SIGXCPU at the soft limit, SIGKILL at the hard one
  }
  if (options.sandbox || options.output_limit > 0) limits.push_back({RLIMIT_CORE, 0, 0});  // no core files
  if (options.address_space_limit > 0) {
    limits.push_back({RLIMIT_AS, options.address_space_limit, options.address_space_limit});
  }

  // The sandbox's own uid, its folder and the program by descriptor (its path may be out of the uid's reach).
  std::unique_ptr<UidSlot> slot;
  unsigned uid = 0;
  if (own_user) {
    slot = std::make_unique<UidSlot>();
    uid = slot->uid();
    if (uid == 0) {
      close_passed();
      for (const fs::path& dir : cgroups.dirs) remove_cgroup(dir);
      TINY_CHECK(false, Error, "could not start ", options.argv[0], " in its sandbox: no free uid (every one of ",
                 kUidSlots, " from ", uid_base(), " is in use)");
    }
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
  std::vector<fs::path> to_hide = options.hidden;
  for (const fs::path& p : hidden_by_environment()) to_hide.push_back(p);
  std::vector<Hidden> wanted;
  for (const fs::path& p : options.sandbox ? to_hide : std::vector<fs::path>{}) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (ec || !fs::exists(st)) continue;
    const std::string path = fs::canonical(p, ec).string();
    if (!ec) wanted.push_back({path, fs::is_directory(st)});
  }
  // A path inside one hidden already is covered (and could not be mounted on): the outer ones first.
  std::sort(wanted.begin(), wanted.end(), [](const Hidden& a, const Hidden& b) { return a.path.size() < b.path.size(); });
  for (const Hidden& w : wanted) {
    const bool covered = std::any_of(hidden.begin(), hidden.end(), [&](const Hidden& h) {
      return w.path == h.path || (h.is_dir && w.path.rfind(h.path + "/", 0) == 0);
    });
    if (!covered) hidden.push_back(w);
  }
  // For tests only: a plain user on a system without unprivileged user namespaces.
  const bool no_user_namespaces = !root && std::getenv("WORKBOOK_SANDBOX_NO_USER_NAMESPACES") != nullptr;
  const std::string uid_map = std::to_string(getuid()) + " " + std::to_string(getuid()) + " 1\n";
  const std::string gid_map = std::to_string(getgid()) + " " + std::to_string(getgid()) + " 1\n";
  const std::string cwd = options.cwd.string();

  // Its stdout and stderr come through a pipe: we write its log, never more
  // than the output limit, and no descriptor of it could grow the file.
  int log_fd = -1;
  int output[2] = {-1, -1};
  if (redirect && !options.log.empty()) {
    log_fd = open(options.log.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (log_fd >= 0 && pipe2(output, O_CLOEXEC) != 0) output[0] = output[1] = -1;
  }

  // A sandbox with an output limit writes into a tmpfs of that size of its
  // own, mounted on its folder in its mount namespace; what was in the folder
  // (its inputs, its log) is bound into it read-only. `before`: those names.
  struct Entry {
    std::string name, source;  // source: the original, through a descriptor of the folder
    bool is_dir;
  };
  std::vector<Entry> entries;
  std::vector<std::string> before;
  const bool private_folder = options.sandbox && options.output_limit > 0 && !cwd.empty();
  // A descriptor number the child puts its folder at (opened in its own mount
  // namespace: a bind mount's source must be there), to bind the entries from.
  int folder_slot = -1;
  std::string tmpfs_options;
  if (!cwd.empty() && options.output_limit > 0) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(cwd, ec)) before.push_back(entry.path().filename().string());
  }
  if (private_folder) {
    folder_slot = open("/dev/null", O_RDONLY | O_CLOEXEC);
    for (const std::string& name : before) {
      std::error_code ec;
      entries.push_back({name, "/proc/self/fd/" + std::to_string(folder_slot) + "/" + name,
                         fs::is_directory(fs::symlink_status(fs::path(cwd) / name, ec))});
    }
    // A page more than the limit, so that a run that fills it is seen to be over it.
    tmpfs_options = "size=" + std::to_string(options.output_limit + 4096) + ",nr_inodes=100000,mode=0700";
    if (own_user) tmpfs_options += ",uid=" + std::to_string(uid) + ",gid=" + std::to_string(uid);
  }

  int null_out = -1;
  if (redirect && output[1] < 0) null_out = open("/dev/null", O_RDWR | O_CLOEXEC);
  const int child_out = output[1] >= 0 ? output[1] : null_out;
  int report[2] = {-1, -1};
  if (options.sandbox && pipe2(report, O_CLOEXEC) != 0) report[0] = report[1] = -1;
  int folder_socket[2] = {-1, -1};
  if (private_folder && socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, folder_socket) != 0) {
    folder_socket[0] = folder_socket[1] = -1;
  }
  // Closed by a successful exec; before that, the child writes why it could
  // not start: the program never ran, which is never the program's fault.
  int started[2] = {-1, -1};
  if (pipe2(started, O_CLOEXEC) != 0) started[0] = started[1] = -1;
  auto close_all = [](std::initializer_list<int> fds) {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  };

  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close_passed();
    close_all({exe_fd, log_fd, null_out, output[0], output[1], report[0], report[1], started[0], started[1],
               folder_slot, folder_socket[0], folder_socket[1]});
    for (const fs::path& dir : cgroups.dirs) remove_cgroup(dir);
    TINY_CHECK(false, Error, "could not start ", options.argv[0], ": fork failed (", std::strerror(err), ")");
  }
  if (pid == 0) {
    // Our interrupt handler is not the child's.
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    // Its own process group, so that a timeout kills everything it started (a
    // sandbox: its own session, with no terminal to read or signal); a
    // passthrough child stays in ours, so that Ctrl-C reaches it.
    if (options.sandbox && redirect) {
      setsid();
    } else if (redirect) {
      setpgid(0, 0);
    }
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
    if (child_out >= 0) {
      dup2(child_out, 1);
      dup2(child_out, 2);
    }
    const int null_in = open("/dev/null", O_RDONLY);
    if (null_in >= 0) dup2(null_in, 0);
    unsigned flags = kReported;
    bool in_folder = false;  // already in `cwd`
    bool pid_ns_allowed = false;  // as root, or in a user namespace of our own
    if (options.sandbox) {
      bool mount_ns = false;
      pid_ns_allowed = root;
      if (root) {
        if (unshare(CLONE_NEWNET) == 0 && loopback_up()) flags |= kNoNetwork;
        mount_ns = unshare(CLONE_NEWNS) == 0;
      } else if (!no_user_namespaces && unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) == 0) {
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
          mount_ns = pid_ns_allowed = true;
        }
      }
      if (mount_ns && mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0) {
        // Its folder becomes a mount of its own (a tmpfs of the output limit's
        // size, or the folder bound onto itself), to stay writable when
        // everything else is made read-only. We work in it from here on, so
        // that hiding a folder above it cannot take it away.
        bool own_folder = false, entries_bound = true;
        const int folder = private_folder && folder_slot >= 0 ? open(cwd.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        if (folder >= 0 && dup3(folder, folder_slot, O_CLOEXEC) == folder_slot &&
            mount("workbook-run", cwd.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, tmpfs_options.c_str()) == 0 &&
            chdir(cwd.c_str()) == 0) {
          own_folder = in_folder = true;
          for (const Entry& e : entries) {
            bool made = false;
            if (e.is_dir) {
              made = mkdir(e.name.c_str(), 0700) == 0;
            } else {
              const int fd = open(e.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
              made = fd >= 0;
              if (fd >= 0) close(fd);
            }
            entries_bound = entries_bound && made &&
                            mount(e.source.c_str(), e.name.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0;
          }
          const int tmpfs = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
          if (entries_bound && tmpfs >= 0 && folder_socket[1] >= 0 && send_fd(folder_socket[1], tmpfs)) {
            flags |= kFolderLimited;
          }
          if (tmpfs >= 0) close(tmpfs);
        } else if (!cwd.empty() && mount(cwd.c_str(), cwd.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0 &&
                   chdir(cwd.c_str()) == 0) {
          own_folder = in_folder = true;
        }
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
            syscall(kSysMountSetattr, AT_FDCWD, ".", AT_RECURSIVE, &writable, sizeof writable) == 0) {
          bool inputs_read_only = true;  // what was in its folder before stays as it was (no copy: no malloc here)
          for (size_t i = 0; (flags & kFolderLimited) != 0 && i < entries.size(); ++i) {
            inputs_read_only = inputs_read_only && syscall(kSysMountSetattr, AT_FDCWD, entries[i].name.c_str(),
                                                           AT_RECURSIVE, &read_only, sizeof read_only) == 0;
          }
          if (inputs_read_only) flags |= kReadOnly;
        }
      }
    }
    auto cannot_start = [&](StartStage stage, int code, const char* msg, size_t size) {
      const StartFailure failure{stage, errno};
      if (started[1] >= 0) (void)!write(started[1], &failure, sizeof failure);
      (void)!write(2, msg, size);
      _exit(code);
    };
    // A PID namespace of its own, where it runs as PID 2 under an init of
    // ours (PID 1): when the program ends, or the init is killed (a timeout,
    // or we die: PR_SET_PDEATHSIG down the chain), the kernel kills every
    // process left in it, a daemon of its own session too. We (this process)
    // stay outside, wait for the init and end as the program did.
    bool own_pids = false;
    if (pid_ns_allowed && unshare(CLONE_NEWPID) == 0) {
      int status_pipe[2] = {-1, -1};
      const char msg[] = "could not start the program in its sandbox (its PID namespace)\n";
      if (pipe2(status_pipe, O_CLOEXEC) != 0) cannot_start(StartStage::exec, 126, msg, sizeof msg - 1);
      prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      if (getppid() != parent) _exit(126);  // we are gone already
      // Closes every descriptor but 0, 1, 2 and `keep`: none of the run's pipes stays open in the init or here.
      auto keep_only = [](int keep) {
        if (keep > 3) syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u);
        syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u);
      };
      const pid_t init = fork();
      if (init < 0) cannot_start(StartStage::exec, 126, msg, sizeof msg - 1);
      if (init > 0) {
        keep_only(status_pipe[0]);
        int init_status = 0, program_status = 0;
        while (waitpid(init, &init_status, 0) < 0 && errno == EINTR) {
        }
        ssize_t n;
        do {
          n = read(status_pipe[0], &program_status, sizeof program_status);
        } while (n < 0 && errno == EINTR);
        const int status = n == static_cast<ssize_t>(sizeof program_status) ? program_status : init_status;
        if (WIFSIGNALED(status)) {
          const int sig = WTERMSIG(status);
          signal(sig, SIG_DFL);
          sigset_t set;
          sigemptyset(&set);
          sigaddset(&set, sig);
          sigprocmask(SIG_UNBLOCK, &set, nullptr);
          kill(getpid(), sig);
        }
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 126);
      }
      // The init: a /proc of this namespace (its PIDs are the ones the program sees), then the program.
      prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      close(status_pipe[0]);
      mount("proc", "/proc", "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
      const pid_t program = fork();
      if (program < 0) cannot_start(StartStage::exec, 126, msg, sizeof msg - 1);
      if (program > 0) {
        keep_only(status_pipe[1]);
        const int null_fd = open("/dev/null", O_RDWR);  // the run's output pipe stays the program's alone
        if (null_fd >= 0) {
          dup2(null_fd, 1);
          dup2(null_fd, 2);
          close(null_fd);
        }
        for (;;) {  // reaps every orphan until the program ends
          int status = 0;
          const pid_t done = waitpid(-1, &status, 0);
          if (done == program) {
            (void)!write(status_pipe[1], &status, sizeof status);
            _exit(0);
          }
          if (done < 0 && errno != EINTR) _exit(126);
        }
      }
      close(status_pipe[1]);
      setsid();  // a session of its own again (the init's death ends it all the same)
      own_pids = true;
      flags |= kOwnPids;
    }
    if (!cwd.empty() && !in_folder && chdir(cwd.c_str()) != 0) {
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
    // It dies with the thread that started it (set after setuid, which clears
    // it): a sandbox at once, a trusted program (a checker) with time to clean up.
    prctl(PR_SET_PDEATHSIG, options.sandbox ? SIGKILL : SIGTERM, 0, 0, 0);
    if (getppid() != (own_pids ? 1 : parent)) _exit(126);  // we (or the init) are gone already
    if (options.sandbox) {
      prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
      // Nothing of ours beyond stdin, stdout and stderr survives the exec.
      if (syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */) != 0) {
        for (int fd = 3; fd < 4096; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
      }
    }
    // The descriptors it inherits, at 3, 4, ...: each first moved above that
    // range (as are ours still needed here), so that none overwrites another.
    int exec_fd = exe_fd;
    if (!options.pass_fds.empty()) {
      const int first_free = 3 + static_cast<int>(options.pass_fds.size());
      auto above = [&](int& fd) {
        if (fd >= 0 && fd < first_free) fd = fcntl(fd, F_DUPFD_CLOEXEC, first_free);
      };
      above(exec_fd);
      above(report[1]);
      above(started[1]);
      int moved[16];
      const size_t n = std::min(options.pass_fds.size(), sizeof moved / sizeof moved[0]);
      for (size_t i = 0; i < n; ++i) moved[i] = fcntl(options.pass_fds[i], F_DUPFD_CLOEXEC, first_free);
      for (size_t i = 0; i < n; ++i) {
        if (moved[i] < 0 || dup2(moved[i], 3 + static_cast<int>(i)) < 0) {
          const char msg[] = "could not start the program (its descriptors could not be passed)\n";
          cannot_start(StartStage::exec, 126, msg, sizeof msg - 1);
        }
      }
    }
    if (report[1] >= 0) (void)!write(report[1], &flags, sizeof flags);
    if (exec_fd >= 0) {
      fexecve(exec_fd, argv.data(), envp.data());
    } else {
      execve(argv[0], argv.data(), envp.data());
    }
    const char msg[] = "could not start the program (execve failed)\n";
    cannot_start(StartStage::exec, 127, msg, sizeof msg - 1);
  }
  // A sandbox makes its own session (which a process group leader could not): never setpgid it from here.
  if (redirect && !options.sandbox) setpgid(pid, pid);
  const pid_t target = redirect ? -pid : pid;
  close_all({exe_fd, output[1], null_out, report[1], started[1], folder_socket[1], folder_slot});
  close_passed();
  if (report[0] >= 0) {
    // Written just before exec, after setsid: from here on its process group exists.
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
      result.isolation.folder_limited = (flags & kFolderLimited) != 0;
      result.isolation.own_pids = (flags & kOwnPids) != 0;
    }
  }
  // Its folder's tmpfs, which lives as long as we hold it (its mount namespace dies with it).
  const int tmpfs_fd = folder_socket[0] >= 0 && result.isolation.folder_limited ? receive_fd(folder_socket[0]) : -1;
  if (folder_socket[0] >= 0) close(folder_socket[0]);
  if (tmpfs_fd < 0) result.isolation.folder_limited = false;

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

  // Its output into its log, up to the limit; what comes past it is dropped (and stops it).
  size_t logged = 0;
  bool log_over = false;
  auto drain = [&](int wait_ms) {
    if (output[0] < 0) {
      if (wait_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      return;
    }
    struct pollfd p {output[0], POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) return;
    char buffer[65536];
    for (int rounds = 0; rounds < 64; ++rounds) {
      const ssize_t n = read(output[0], buffer, sizeof buffer);
      if (n == 0 || (n < 0 && errno != EINTR)) {
        if (n == 0) {  // every writer is gone
          close(output[0]);
          output[0] = -1;
        }
        return;
      }
      if (n < 0) continue;
      size_t keep = static_cast<size_t>(n);
      if (options.output_limit > 0 && logged + keep > options.output_limit) {
        keep = options.output_limit - std::min(logged, options.output_limit);
        log_over = true;
      }
      if (keep > 0 && log_fd >= 0) (void)!write(log_fd, buffer, keep);
      logged += static_cast<size_t>(n);
      if (static_cast<size_t>(n) < sizeof buffer) return;
    }
  };
  if (output[0] >= 0) fcntl(output[0], F_SETFL, O_NONBLOCK);

  // What it writes: its log as it comes, its tmpfs (a glance), or else its
  // folder (a walk) and the files its processes hold unlinked.
  auto over_output = [&]() {
    if (options.output_limit == 0) return false;
    if (log_over) return true;
    size_t used = logged;
    if (tmpfs_fd >= 0) {
      used += tmpfs_used(tmpfs_fd);
    } else {
      if (!cwd.empty()) used += tree_bytes(cwd, options.output_limit, log_fd);
      used += unlinked_bytes(processes_of_run(cgroups, own_user ? uid : 0, pid));
    }
    return used > options.output_limit;
  };
  int status = 0;
  struct rusage usage {};
  int pause_ms = 1;
  double measured_at = 0, stopping_since = -1;
  for (;;) {
    const pid_t done = wait4(pid, &status, WNOHANG, &usage);
    if (done == pid) break;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (g_interrupted != 0) {
      // Interrupted: a sandbox is killed at once, a trusted program (a
      // checker) gets SIGTERM to clean up after itself, then SIGKILL after 5 s.
      if (stopping_since < 0) {
        stopping_since = elapsed;
        kill(target, options.sandbox ? SIGKILL : SIGTERM);
      } else if (elapsed - stopping_since > 5) {
        kill(target, SIGKILL);
      }
    }
    const bool too_many = !cgroups.pids.empty() && cgroup_saw_pids_max(cgroups.pids);
    bool too_much = log_over;
    if (!too_much && options.output_limit > 0 && elapsed - measured_at > 0.02) {
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
    drain(pause_ms);
    pause_ms = std::min(pause_ms * 2, 20);
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
  drain(0);  // what is left in the pipe (a process that outlived it holds it open: not waited for)
  if (output[0] >= 0) close(output[0]);
  if (!cgroups.pids.empty() && cgroup_saw_pids_max(cgroups.pids) && !result.timed_out) result.process_limit_hit = true;
  if (!cgroups.memory.empty()) {
    // Killed itself, or failed because a process of its own was (a compiler's driver when cc1plus is).
    result.out_of_memory = !result.timed_out && (result.signal == SIGKILL || result.exit_code > 0) &&
                           cgroup_saw_oom(cgroups.memory);
  }
  for (const fs::path& dir : cgroups.dirs) remove_cgroup(dir);
  if (!result.output_limit_hit && !result.timed_out && over_output()) result.output_limit_hit = true;
  if (options.cpu_limit_s > 0) {
    result.cpu_limit_hit = result.signal == SIGXCPU ||
                           (result.signal == SIGKILL && result.cpu_seconds >= options.cpu_limit_s && !result.out_of_memory);
  }
  if (tmpfs_fd >= 0) {
    // Sparse files claim more than the tmpfs holds: what is copied is bounded by the limit as well.
    size_t entries = 0;
    if (result.ok() && tree_bytes_at(tmpfs_fd, options.output_limit, entries, before) > options.output_limit) {
      result.output_limit_hit = true;
    }
    if (result.ok()) {
      const int to = open(cwd.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (to >= 0) {
        size_t budget = options.output_limit;
        copy_back(tmpfs_fd, to, before, budget);
        close(to);
      }
    }
    close(tmpfs_fd);  // a stopped run's files go with it, at once
  } else if (!result.ok() && options.output_limit > 0 && !cwd.empty()) {
    remove_new_entries(cwd, before);
  }
  if (!options.log.empty()) result.log_tail = tail_of_fd(log_fd, result.output_limit_hit ? 3 : 30);
  if (log_fd >= 0) close(log_fd);
  live.finish();
  return result;
}

Isolation probe_sandbox() {
  std::string dir;
  try {
    dir = make_temp_folder("probe").string();
  } catch (const std::exception&) {
    return {};
  }
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "run", ec);
  fs::create_directories(fs::path(dir) / "hidden", ec);
  ProcessOptions o;
  o.argv = {"/bin/sh", "-c", ":"};
  o.cwd = fs::path(dir) / "run";
  o.sandbox = true;
  o.hidden = {fs::path(dir) / "hidden"};
  o.output_limit = size_t{1} << 20;
  o.timeout_s = 10;
  Isolation isolation;
  try {
    isolation = run_process(o).isolation;
    isolation.folder_limit = 0;  // the trial's own limit says nothing of a real run's
  } catch (const std::exception&) {
  }
  fs::remove_all(dir, ec);
  return isolation;
}

void hide_in_every_sandbox(const fs::path& path) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (ec) return;
  const char* env = std::getenv("WORKBOOK_SANDBOX_HIDE");
  const std::string value = env != nullptr && *env != '\0' ? std::string(env) + ":" + absolute.string() : absolute.string();
  setenv("WORKBOOK_SANDBOX_HIDE", value.c_str(), 1);
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
