// run_process: prepare (cgroups, uid, the child's plan, pipes), enter the
// sandbox (fork: sandbox_child.cpp), supervise (limits, output), collect (how
// it ended, its files); and what a run's result says in words.
#include "process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <thread>

#include "cgroup.h"
#include "fd.h"
#include "interrupts.h"
#include "run_output.h"
#include "sandbox_child.h"
#include "tiny/error.h"
#include "uid_slot.h"

extern char** environ;

namespace workbook {

namespace fs = std::filesystem;

namespace {

std::string mib(size_t bytes) {
  std::ostringstream s;
  if (bytes >= (size_t{1} << 30) && bytes % (size_t{1} << 30) == 0) {
    s << (bytes >> 30) << " GiB";
  } else {
    s << (bytes + (size_t{1} << 20) - 1) / (size_t{1} << 20) << " MiB";
  }
  return s.str();
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

// ---------------------------------------------------------------- prepare

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

// The child's environment: ours (in a sandbox only what programs need) with `env` on top.
std::vector<std::string> child_environment(const ProcessOptions& options) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    if (options.env.count(key) == 0 && (!options.sandbox || inherited_in_sandbox(key))) out.push_back(entry);
  }
  for (const auto& entry : options.env) {
    if (!entry.second.empty()) out.push_back(entry.first + "=" + entry.second);
  }
  return out;
}

// What the sandbox covers: `hidden` and WORKBOOK_SANDBOX_HIDE, those that
// exist, canonical; a path inside one hidden already is covered (and could
// not be mounted on): the outer ones first.
std::vector<HiddenPath> paths_to_cover(const ProcessOptions& options) {
  std::vector<HiddenPath> wanted, hidden;
  if (!options.sandbox) return hidden;
  std::vector<fs::path> to_hide = options.hidden;
  for (const fs::path& p : hidden_by_environment()) to_hide.push_back(p);
  for (const fs::path& p : to_hide) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (ec || !fs::exists(st)) continue;
    const std::string path = fs::canonical(p, ec).string();
    if (!ec) wanted.push_back({path, fs::is_directory(st)});
  }
  std::sort(wanted.begin(), wanted.end(), [](const HiddenPath& a, const HiddenPath& b) { return a.path.size() < b.path.size(); });
  for (const HiddenPath& w : wanted) {
    const bool covered = std::any_of(hidden.begin(), hidden.end(), [&](const HiddenPath& h) {
      return w.path == h.path || (h.is_dir && w.path.rfind(h.path + "/", 0) == 0);
    });
    if (!covered) hidden.push_back(w);
  }
  return hidden;
}

// The rlimits the child sets; the process limit's RLIMIT_NPROC where no
// pids cgroup holds it (or, with its own uid, as well as one).
std::vector<ResourceLimit> resource_limits(const ProcessOptions& options, bool own_user, const Cgroups& cgroups,
                                           ProcessResult& result) {
  std::vector<ResourceLimit> limits;
  // No RLIMIT_FSIZE: the emulated GPU's memory is a memfd as large as twice
  // the device; output is bounded otherwise (run_output.h).
  if (options.cpu_limit_s > 0) {
    const rlim_t cpu = static_cast<rlim_t>(std::ceil(options.cpu_limit_s));
    limits.push_back({RLIMIT_CPU, cpu, cpu + 5});  // SIGXCPU at the soft limit, SIGKILL at the hard one
  }
  if (options.sandbox || options.output_limit > 0) limits.push_back({RLIMIT_CORE, 0, 0});  // no core files
  if (options.address_space_limit > 0) {
    limits.push_back({RLIMIT_AS, options.address_space_limit, options.address_space_limit});
  }
  if (options.process_limit <= 0) return limits;
  if (own_user) {
    // Its uid is its own: the count is exact, and applies to root's child too. With a
    // pids cgroup as well, that one is to stop it first (it says so in pids.events).
    const rlim_t n = static_cast<rlim_t>(options.process_limit + (cgroups.pids().empty() ? 0 : 64));
    limits.push_back({RLIMIT_NPROC, n, n});
    result.process_limit_enforced = true;
  } else if (geteuid() != 0 && cgroups.pids().empty()) {
    // Shared with every process of this user: what it has now, plus the limit.
    const rlim_t n = static_cast<rlim_t>(tasks_of_uid(getuid()) + options.process_limit);
    struct rlimit current {};
    getrlimit(RLIMIT_NPROC, &current);
    limits.push_back({RLIMIT_NPROC, std::min(n, current.rlim_max), current.rlim_max});
    result.process_limit_enforced = true;
  }
  return limits;
}

// Makes a pipe (both ends close on exec) into two owners; both empty when it cannot.
void make_pipe(Fd& read_end, Fd& write_end) {
  int ends[2] = {-1, -1};
  if (pipe2(ends, O_CLOEXEC) != 0) return;
  read_end.reset(ends[0]);
  write_end.reset(ends[1]);
}

// Everything of one run that the parent owns: the descriptors are closed, the
// cgroups removed and the uid given back however run_process ends.
struct Launch {
  explicit Launch(const ProcessOptions& o) : options(o), cgroups(o.memory_limit, o.process_limit) {}
  const ProcessOptions& options;
  std::vector<Fd> passed;  // ProcessOptions::pass_fds: ours to close once the child has them
  Cgroups cgroups;
  std::unique_ptr<UidSlot> slot;
  ChildPlan plan;
  Fd exe, log, output_read, output_write, null_out, report_read, report_write, started_read, started_write;
  Fd folder_slot, socket_ours, socket_child;
  Fd tmpfs;                          // the run's tmpfs, received from the child (lives as long as we hold it)
  std::vector<std::string> before;   // the names in its folder before it ran
  pid_t pid = -1;
  std::chrono::steady_clock::time_point start;
};

// Its own uid (as root), taken from the pool, and its folder given to it.
void take_own_uid(Launch& l) {
  l.slot = std::make_unique<UidSlot>();
  l.plan.uid = l.slot->uid();
  TINY_CHECK(l.plan.uid != 0, Error, "could not start ", l.options.argv[0], " in its sandbox: no free uid (every one of ",
             kUidSlots, " from ", uid_base(), " is in use)");
  if (!l.options.cwd.empty()) give_to(l.options.cwd, l.plan.uid);
}

// A sandbox with an output limit writes into a tmpfs of that size of its
// own, mounted on its folder in its mount namespace; what was in the folder
// (its inputs, its log) is bound into it read-only.
void plan_private_folder(Launch& l) {
  ChildPlan& p = l.plan;
  // A descriptor number the child puts its folder at (opened in its own mount
  // namespace: a bind mount's source must be there), to bind the entries from.
  l.folder_slot.reset(open("/dev/null", O_RDONLY | O_CLOEXEC));
  p.folder_slot = l.folder_slot.get();
  for (const std::string& name : l.before) {
    std::error_code ec;
    p.entries.push_back({name, "/proc/self/fd/" + std::to_string(p.folder_slot) + "/" + name,
                         fs::is_directory(fs::symlink_status(fs::path(p.cwd) / name, ec))});
  }
  // A page more than the limit, so that a run that fills it is seen to be over it.
  p.tmpfs_options = "size=" + std::to_string(l.options.output_limit + 4096) + ",nr_inodes=100000,mode=0700";
  if (p.own_user) p.tmpfs_options += ",uid=" + std::to_string(p.uid) + ",gid=" + std::to_string(p.uid);
  int pair[2] = {-1, -1};
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) == 0) {
    l.socket_ours.reset(pair[0]);
    l.socket_child.reset(pair[1]);
  }
}

// Its stdout and stderr come through a pipe: we write its log, never more
// than the output limit, and no descriptor of it could grow the file.
void plan_output(Launch& l) {
  const ProcessOptions& o = l.options;
  l.plan.redirect = !(o.log.empty() && o.passthrough);
  if (l.plan.redirect && !o.log.empty()) {
    l.log.reset(open(o.log.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (l.log.valid()) make_pipe(l.output_read, l.output_write);
  }
  if (l.plan.redirect && !l.output_write.valid()) l.null_out.reset(open("/dev/null", O_RDWR | O_CLOEXEC));
  l.plan.child_out = l.output_write.valid() ? l.output_write.get() : l.null_out.get();
}

// Everything the child needs, before fork (only async-signal-safe calls after it).
void prepare(Launch& l, ProcessResult& result) {
  const ProcessOptions& o = l.options;
  ChildPlan& p = l.plan;
  for (int fd : o.pass_fds) l.passed.emplace_back(fd);
  result.memory_limit_enforced = !l.cgroups.memory().empty();
  result.process_limit_enforced = !l.cgroups.pids().empty();
  p.root = geteuid() == 0;
  p.sandbox = o.sandbox;
  p.own_user = o.sandbox && p.root;
  p.parent = getpid();
  p.args = o.argv;
  p.env = child_environment(o);
  p.point_into_strings();
  for (const fs::path& dir : l.cgroups.dirs()) p.procs.push_back((dir / "cgroup.procs").string());
  if (p.own_user) take_own_uid(l);
  p.limits = resource_limits(o, p.own_user, l.cgroups, result);
  // The program by descriptor: its path may be out of the sandbox's uid's reach.
  if (o.sandbox) l.exe.reset(open(o.argv[0].c_str(), O_PATH | O_CLOEXEC));
  p.exe_fd = l.exe.get();
  p.hidden = paths_to_cover(o);
  // For tests only: a plain user on a system without unprivileged user namespaces.
  p.no_user_namespaces = !p.root && std::getenv("WORKBOOK_SANDBOX_NO_USER_NAMESPACES") != nullptr;
  p.uid_map = std::to_string(getuid()) + " " + std::to_string(getuid()) + " 1\n";
  p.gid_map = std::to_string(getgid()) + " " + std::to_string(getgid()) + " 1\n";
  p.cwd = o.cwd.string();
  plan_output(l);
  if (!p.cwd.empty() && o.output_limit > 0) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(p.cwd, ec)) l.before.push_back(entry.path().filename().string());
  }
  p.private_folder = o.sandbox && o.output_limit > 0 && !p.cwd.empty();
  if (p.private_folder) plan_private_folder(l);
  p.folder_socket = l.socket_child.get();
  if (o.sandbox) make_pipe(l.report_read, l.report_write);
  p.report = l.report_write.get();
  // Closed by a successful exec; before that, the child writes why it could
  // not start: the program never ran, which is never the program's fault.
  make_pipe(l.started_read, l.started_write);
  p.started = l.started_write.get();
  p.pass_fds = o.pass_fds;
}

// ---------------------------------------------------------------- enter the sandbox

// Forks; the child enters its limits and sandbox and execs the program (run_child never returns).
void start(Launch& l) {
  l.start = std::chrono::steady_clock::now();
  l.pid = fork();
  TINY_CHECK(l.pid >= 0, Error, "could not start ", l.options.argv[0], ": fork failed (", std::strerror(errno), ")");
  if (l.pid == 0) run_child(l.plan);
  // A sandbox makes its own session (which a process group leader could not): never setpgid it from here.
  if (l.plan.redirect && !l.options.sandbox) setpgid(l.pid, l.pid);
  // The child's ends are its own now.
  for (Fd* fd : {&l.exe, &l.output_write, &l.null_out, &l.report_write, &l.started_write, &l.socket_child, &l.folder_slot}) {
    fd->reset();
  }
  l.passed.clear();
}

// Reads exactly one T from `fd` (retrying on EINTR); false when less came (the writer closed it).
template <typename T>
bool read_one(const Fd& fd, T& value) {
  ssize_t n;
  do {
    n = read(fd.get(), &value, sizeof value);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof value);
}

// What the child said before exec: the protections in place (written after
// setsid: from then on its process group exists), its tmpfs, or why it could not start.
void read_child_reports(Launch& l, ProcessResult& result) {
  unsigned flags = 0;
  if (l.report_read.valid() && read_one(l.report_read, flags)) {
    Isolation& i = result.isolation;
    i.own_user = (flags & kOwnUser) != 0;
    i.uid = i.own_user ? l.plan.uid : static_cast<unsigned>(getuid());
    i.no_network = (flags & kNoNetwork) != 0;
    i.loopback_down = (flags & kLoopbackDown) != 0;
    i.paths_hidden = (flags & kHidden) != 0;
    i.read_only = (flags & kReadOnly) != 0;
    i.folder_limited = (flags & kFolderLimited) != 0;
    i.own_pids = (flags & kOwnPids) != 0;
  }
  l.report_read.reset();
  // Its folder's tmpfs, which lives as long as we hold it (its mount namespace dies with it).
  if (l.socket_ours.valid() && result.isolation.folder_limited) l.tmpfs.reset(receive_fd(l.socket_ours.get()));
  l.socket_ours.reset();
  if (!l.tmpfs.valid()) result.isolation.folder_limited = false;
  StartFailure failure{};
  if (l.started_read.valid() && read_one(l.started_read, failure)) {
    result.start_failed = true;
    result.start_error = start_failure_text(failure, l.options.argv[0]);
  }
  l.started_read.reset();
}

// ---------------------------------------------------------------- supervise

// Its output into its log, up to the limit; what comes past it is dropped (and stops it).
class OutputPipe {
 public:
  OutputPipe(Fd& pipe, int log_fd, size_t limit) : pipe_(pipe), log_fd_(log_fd), limit_(limit) {
    if (pipe_.valid()) fcntl(pipe_.get(), F_SETFL, O_NONBLOCK);
  }
  // Waits up to `wait_ms` for output and logs what came.
  void drain(int wait_ms) {
    if (!pipe_.valid()) {
      if (wait_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
      return;
    }
    struct pollfd p {pipe_.get(), POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) return;
    char buffer[65536];
    for (int rounds = 0; rounds < 64; ++rounds) {
      const ssize_t n = read(pipe_.get(), buffer, sizeof buffer);
      if (n == 0 || (n < 0 && errno != EINTR)) {
        if (n == 0) pipe_.reset();  // every writer is gone
        return;
      }
      if (n < 0) continue;
      size_t keep = static_cast<size_t>(n);
      if (limit_ > 0 && logged_ + keep > limit_) {
        keep = limit_ - std::min(logged_, limit_);
        over_ = true;
      }
      if (keep > 0 && log_fd_ >= 0) (void)!write(log_fd_, buffer, keep);
      logged_ += static_cast<size_t>(n);
      if (static_cast<size_t>(n) < sizeof buffer) return;
    }
  }
  size_t logged() const { return logged_; }  // bytes it wrote, kept or not
  bool over() const { return over_; }         // it wrote more than the limit

 private:
  Fd& pipe_;
  int log_fd_;
  size_t limit_, logged_ = 0;
  bool over_ = false;
};

// What it wrote is over the output limit: its log as it comes, its tmpfs (a
// glance), or else its folder (a walk) and the files its processes hold unlinked.
bool over_output(const Launch& l, const OutputPipe& output) {
  const size_t limit = l.options.output_limit;
  if (limit == 0) return false;
  if (output.over()) return true;
  size_t used = output.logged();
  if (l.tmpfs.valid()) {
    used += tmpfs_used(l.tmpfs.get());
  } else {
    if (!l.plan.cwd.empty()) used += tree_bytes(l.plan.cwd, limit, l.log.get());
    used += unlinked_bytes(processes_of_run(l.cgroups, l.plan.own_user ? l.plan.uid : 0, l.pid));
  }
  return used > limit;
}

// Waits for it, logging its output, and stops it (its whole process group)
// at the time limit, the process limit, the output limit or an interrupt.
void supervise(const Launch& l, OutputPipe& output, ProcessResult& result, int& status, struct rusage& usage) {
  const ProcessOptions& o = l.options;
  const pid_t target = l.plan.redirect ? -l.pid : l.pid;
  int pause_ms = 1;
  double measured_at = 0, stopping_since = -1;
  for (;;) {
    if (wait4(l.pid, &status, WNOHANG, &usage) == l.pid) break;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - l.start).count();
    if (interrupted()) {
      // Interrupted: a sandbox is killed at once, a trusted program (a
      // checker) gets SIGTERM to clean up after itself, then SIGKILL after 5 s.
      if (stopping_since < 0) {
        stopping_since = elapsed;
        kill(target, o.sandbox ? SIGKILL : SIGTERM);
      } else if (elapsed - stopping_since > 5) {
        kill(target, SIGKILL);
      }
    }
    const bool too_many = l.cgroups.saw_pids_max();
    bool too_much = output.over();
    if (!too_much && o.output_limit > 0 && elapsed - measured_at > 0.02) {
      measured_at = elapsed;
      too_much = over_output(l, output);
    }
    if (elapsed > o.timeout_s || too_many || too_much) {
      result.timed_out = !too_many && !too_much;
      result.process_limit_hit = too_many;
      result.output_limit_hit = too_much;
      kill(target, SIGKILL);
      wait4(l.pid, &status, 0, &usage);
      break;
    }
    output.drain(pause_ms);
    pause_ms = std::min(pause_ms * 2, 20);
  }
}

// ---------------------------------------------------------------- collect

// How it ended: its exit code or signal, its time, and which limit it hit.
void read_status(const Launch& l, int status, const struct rusage& usage, ProcessResult& result) {
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - l.start).count();
  result.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status) && !result.timed_out && !result.process_limit_hit && !result.output_limit_hit) {
    result.signal = WTERMSIG(status);
  }
}

// Its files: a run that ended well has its tmpfs copied back into its folder
// (sparse files claim more than the tmpfs holds: the copy is bounded by the
// limit as well); a stopped run's files go with it, at once.
void collect_files(Launch& l, ProcessResult& result) {
  const ProcessOptions& o = l.options;
  if (l.tmpfs.valid()) {
    size_t entries = 0;
    if (result.ok() && tree_bytes_at(l.tmpfs.get(), o.output_limit, entries, l.before) > o.output_limit) {
      result.output_limit_hit = true;
    }
    if (result.ok()) {
      const Fd to(open(l.plan.cwd.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      size_t budget = o.output_limit;
      if (to.valid()) copy_back(l.tmpfs.get(), to.get(), l.before, budget);
    }
    l.tmpfs.reset();
  } else if (!result.ok() && o.output_limit > 0 && !l.plan.cwd.empty()) {
    remove_new_entries(l.plan.cwd, l.before);
  }
}

// After it ended: whatever it left behind killed, its folder back to root,
// the rest of its output, the limits it hit, its files, the tail of its log.
void collect(Launch& l, OutputPipe& output, int status, const struct rusage& usage, ProcessResult& result) {
  const ProcessOptions& o = l.options;
  if (l.plan.redirect) kill(-l.pid, SIGKILL);  // whatever the program started and left behind
  read_status(l, status, usage, result);
  if (l.plan.own_user) {
    kill_all_of_uid(l.plan.uid);
    // Its folder back to root: the next run given this uid must not read it.
    if (!o.cwd.empty()) give_to(o.cwd, 0);
  }
  output.drain(0);  // what is left in the pipe (a process that outlived it holds it open: not waited for)
  l.output_read.reset();
  if (l.cgroups.saw_pids_max() && !result.timed_out) result.process_limit_hit = true;
  if (!l.cgroups.memory().empty()) {
    // Killed itself, or failed because a process of its own was (a compiler's driver when cc1plus is).
    result.out_of_memory = !result.timed_out && (result.signal == SIGKILL || result.exit_code > 0) && l.cgroups.saw_oom();
  }
  l.cgroups.remove();
  if (!result.output_limit_hit && !result.timed_out && over_output(l, output)) result.output_limit_hit = true;
  if (o.cpu_limit_s > 0) {
    result.cpu_limit_hit = result.signal == SIGXCPU ||
                           (result.signal == SIGKILL && result.cpu_seconds >= o.cpu_limit_s && !result.out_of_memory);
  }
  collect_files(l, result);
  if (!o.log.empty()) result.log_tail = tail_of_fd(l.log.get(), result.output_limit_hit ? 3 : 30);
}

}  // namespace

std::string Isolation::describe() const {
  std::string s = own_user ? "own uid " + std::to_string(uid) : "our uid";
  s += no_network ? (loopback_down ? ", no network (not even 127.0.0.1: its loopback could not be brought up, which "
                                     "needs CAP_NET_ADMIN)"
                                   : ", no network")
                  : ", network reachable";
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
  const Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  return fd.valid() ? tail_of_fd(fd.get(), max_lines) : "";
}

bool sandbox_has_own_user() { return geteuid() == 0; }

ProcessResult run_process(const ProcessOptions& options) {
  TINY_CHECK(!options.argv.empty(), ValueError, "run_process: no program given");
  LiveRun live;  // after an interrupt no child starts; the watcher waits for this one to be stopped
  ProcessResult result;
  result.memory_limit = options.memory_limit;
  result.output_limit = options.output_limit;
  result.cpu_limit_s = options.cpu_limit_s;
  result.process_limit = options.process_limit;
  result.isolation.folder_limit = options.sandbox ? options.output_limit : 0;
  Launch launch(options);  // owns every descriptor, the cgroups and the uid: nothing leaks on a throw
  prepare(launch, result);
  start(launch);
  read_child_reports(launch, result);
  OutputPipe output(launch.output_read, launch.log.get(), options.output_limit);
  int status = 0;
  struct rusage usage {};
  supervise(launch, output, result, status, usage);
  collect(launch, output, status, usage, result);
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

}  // namespace workbook
