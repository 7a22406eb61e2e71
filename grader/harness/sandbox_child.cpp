#include "sandbox_child.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace workbook {

std::string start_failure_text(const StartFailure& f, const std::string& program) {
  const std::string why = std::strerror(f.error);
  switch (f.stage) {
    case StartStage::chdir: return "its working folder cannot be entered: " + why;
    case StartStage::setuid: return "its sandbox's uid could not be taken: " + why;
    case StartStage::exec: break;
  }
  return "execve failed: " + why + ": " + program;
}

void ChildPlan::point_into_strings() {
  argv.clear();
  envp.clear();
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
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

// ---------------------------------------------------------------- after fork: async-signal-safe only

namespace {

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

// The descriptors the child still writes to us with, moved when pass_fds need their numbers.
struct ChildFds {
  int started, report, exe;
};

// The program never ran: says why on `started` (the parent's start_error) and on stderr, and exits.
template <size_t N>
[[noreturn]] void cannot_start(int started, StartStage stage, int code, const char (&msg)[N]) {
  const StartFailure failure{stage, errno};
  if (started >= 0) (void)!write(started, &failure, sizeof failure);
  (void)!write(2, msg, N - 1);
  _exit(code);
}

// Its own process group, so that a timeout kills everything it started (a
// sandbox: its own session, with no terminal to read or signal); a
// passthrough child stays in ours, so that Ctrl-C reaches it.
void enter_process_group(const ChildPlan& p) {
  // Our interrupt handler is not the child's.
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  if (p.sandbox && p.redirect) {
    setsid();
  } else if (p.redirect) {
    setpgid(0, 0);
  }
}

// Its cgroups, its rlimits, and its standard streams (stdin /dev/null).
void enter_limits(const ChildPlan& p) {
  for (const std::string& procs : p.procs) {
    const int fd = open(procs.c_str(), O_WRONLY);
    if (fd >= 0) {
      (void)!write(fd, "0", 1);
      close(fd);
    }
  }
  for (const ResourceLimit& l : p.limits) {
    const struct rlimit r = {l.soft, l.hard};
    setrlimit(l.resource, &r);
  }
  if (p.child_out >= 0) {
    dup2(p.child_out, 1);
    dup2(p.child_out, 2);
  }
  const int null_in = open("/dev/null", O_RDONLY);
  if (null_in >= 0) dup2(null_in, 0);
}

// Writes the `size` bytes of `text` to `file` (no std::string made here: no allocation after fork).
bool put(const char* file, const char* text, size_t size) {
  const int fd = open(file, O_WRONLY);
  const bool ok = fd >= 0 && write(fd, text, size) == static_cast<ssize_t>(size);
  if (fd >= 0) close(fd);
  return ok;
}

// A network namespace (its own loopback up) and a mount namespace: as root
// directly, else in a user namespace of our own where the system allows one.
// True when the mount namespace is there; `pid_ns_allowed`: a PID namespace may follow.
bool enter_namespaces(const ChildPlan& p, unsigned& flags, bool& pid_ns_allowed) {
  pid_ns_allowed = p.root;
  if (p.root) {
    // Without its loopback the run still has no network, only not even 127.0.0.1 (said so: lesson 6's ranks meet there).
    if (unshare(CLONE_NEWNET) == 0) flags |= loopback_up() ? kNoNetwork : (kNoNetwork | kLoopbackDown);
    return unshare(CLONE_NEWNS) == 0;
  }
  if (p.no_user_namespaces || unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) != 0) return false;
  // Our own uid and gid, mapped to themselves: the same files as before, in namespaces of our own.
  if (!put("/proc/self/uid_map", p.uid_map.data(), p.uid_map.size()) || !put("/proc/self/setgroups", "deny", 4) ||
      !put("/proc/self/gid_map", p.gid_map.data(), p.gid_map.size())) {
    return false;
  }
  flags |= loopback_up() ? kNoNetwork : (kNoNetwork | kLoopbackDown);
  pid_ns_allowed = true;
  return true;
}

// Binds each entry of its folder (opened at folder_slot) onto an empty one in the tmpfs; true when all were.
bool bind_entries(const ChildPlan& p) {
  bool all = true;
  for (const FolderEntry& e : p.entries) {
    bool made = false;
    if (e.is_dir) {
      made = mkdir(e.name.c_str(), 0700) == 0;
    } else {
      const int fd = open(e.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      made = fd >= 0;
      if (fd >= 0) close(fd);
    }
    all = all && made && mount(e.source.c_str(), e.name.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0;
  }
  return all;
}

// Its folder becomes a mount of its own (a tmpfs of the output limit's size,
// or the folder bound onto itself), to stay writable when everything else is
// made read-only. We work in it from here on (`in_folder`), so that hiding a
// folder above it cannot take it away. True when it is its own mount.
bool mount_own_folder(const ChildPlan& p, unsigned& flags, bool& in_folder) {
  const int folder = p.private_folder && p.folder_slot >= 0 ? open(p.cwd.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
  if (folder >= 0 && dup3(folder, p.folder_slot, O_CLOEXEC) == p.folder_slot &&
      mount("workbook-run", p.cwd.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, p.tmpfs_options.c_str()) == 0 &&
      chdir(p.cwd.c_str()) == 0) {
    in_folder = true;
    const bool entries_bound = bind_entries(p);
    const int tmpfs = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (entries_bound && tmpfs >= 0 && p.folder_socket >= 0 && send_fd(p.folder_socket, tmpfs)) {
      flags |= kFolderLimited;
    }
    if (tmpfs >= 0) close(tmpfs);
    return true;
  }
  if (!p.cwd.empty() && mount(p.cwd.c_str(), p.cwd.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0 &&
      chdir(p.cwd.c_str()) == 0) {
    in_folder = true;
    return true;
  }
  return false;
}

// Covers each hidden path: a folder by an empty, unreadable tmpfs, a file by /dev/null.
void hide_paths(const ChildPlan& p, unsigned& flags) {
  bool all = true;
  for (const HiddenPath& h : p.hidden) {
    const int rc = h.is_dir ? mount("workbook-hidden", h.path.c_str(), "tmpfs",
                                    MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=1,mode=000")
                            : mount("/dev/null", h.path.c_str(), nullptr, MS_BIND, nullptr);
    all = all && rc == 0;
  }
  if (all) flags |= kHidden;
}

// Every mount read-only but its folder; what was in its folder before stays as it was.
void make_read_only(const ChildPlan& p, unsigned& flags) {
  MountAttr read_only{};
  read_only.attr_set = kMountAttrReadOnly;
  MountAttr writable{};
  writable.attr_clr = kMountAttrReadOnly;
  if (syscall(kSysMountSetattr, AT_FDCWD, "/", AT_RECURSIVE, &read_only, sizeof read_only) != 0 ||
      syscall(kSysMountSetattr, AT_FDCWD, ".", AT_RECURSIVE, &writable, sizeof writable) != 0) {
    return;
  }
  bool inputs_read_only = true;  // no copy: no malloc here
  for (size_t i = 0; (flags & kFolderLimited) != 0 && i < p.entries.size(); ++i) {
    inputs_read_only = inputs_read_only && syscall(kSysMountSetattr, AT_FDCWD, p.entries[i].name.c_str(),
                                                   AT_RECURSIVE, &read_only, sizeof read_only) == 0;
  }
  if (inputs_read_only) flags |= kReadOnly;
}

// The sandbox's namespaces and mounts; returns the ChildFlags of what is in place.
unsigned enter_sandbox(const ChildPlan& p, bool& in_folder, bool& pid_ns_allowed) {
  unsigned flags = 0;
  const bool mount_ns = enter_namespaces(p, flags, pid_ns_allowed);
  if (!mount_ns || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return flags;
  const bool own_folder = mount_own_folder(p, flags, in_folder);
  hide_paths(p, flags);
  if (own_folder) make_read_only(p, flags);
  return flags;
}

// Closes every descriptor but 0, 1, 2 and `keep`: none of the run's pipes stays open in the init or its waiter.
void keep_only(int keep) {
  if (keep > 3) syscall(SYS_close_range, 3u, static_cast<unsigned>(keep - 1), 0u);
  syscall(SYS_close_range, static_cast<unsigned>(keep + 1), ~0u, 0u);
}

// Outside the PID namespace: waits for its init and ends as the program did
// (its status comes from the init through `status_fd`).
[[noreturn]] void end_as_the_program(pid_t init, int status_fd) {
  keep_only(status_fd);
  int init_status = 0, program_status = 0;
  while (waitpid(init, &init_status, 0) < 0 && errno == EINTR) {
  }
  ssize_t n;
  do {
    n = read(status_fd, &program_status, sizeof program_status);
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

// The init (PID 1): reaps every orphan until the program ends, then sends its status through `status_fd`.
[[noreturn]] void reap_as_init(pid_t program, int status_fd) {
  keep_only(status_fd);
  const int null_fd = open("/dev/null", O_RDWR);  // the run's output pipe stays the program's alone
  if (null_fd >= 0) {
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    close(null_fd);
  }
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(-1, &status, 0);
    if (done == program) {
      (void)!write(status_fd, &status, sizeof status);
      _exit(0);
    }
    if (done < 0 && errno != EINTR) _exit(126);
  }
}

// A PID namespace of its own, where it runs as PID 2 under an init of ours
// (PID 1): when the program ends, or the init is killed (a timeout, or we
// die: PR_SET_PDEATHSIG down the chain), the kernel kills every process left
// in it, a daemon of its own session too. This process stays outside, waits
// for the init and ends as the program did. Returns (in the program's process
// only) true; false when no PID namespace could be made.
bool enter_pid_namespace(const ChildPlan& p, int started) {
  if (unshare(CLONE_NEWPID) != 0) return false;
  static const char msg[] = "could not start the program in its sandbox (its PID namespace)\n";
  int status_pipe[2] = {-1, -1};
  if (pipe2(status_pipe, O_CLOEXEC) != 0) cannot_start(started, StartStage::exec, 126, msg);
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() != p.parent) _exit(126);  // we are gone already
  const pid_t init = fork();
  if (init < 0) cannot_start(started, StartStage::exec, 126, msg);
  if (init > 0) end_as_the_program(init, status_pipe[0]);
  // The init: a /proc of this namespace (its PIDs are the ones the program sees), then the program.
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  close(status_pipe[0]);
  mount("proc", "/proc", "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  const pid_t program = fork();
  if (program < 0) cannot_start(started, StartStage::exec, 126, msg);
  if (program > 0) reap_as_init(program, status_pipe[1]);
  close(status_pipe[1]);
  setsid();  // a session of its own again (the init's death ends it all the same)
  return true;
}

// Its own uid. Raw system calls: this child has one thread, and glibc's
// wrappers would try to reach the parent's others.
void take_uid(const ChildPlan& p, int started) {
  if (syscall(SYS_setgroups, 0, nullptr) != 0 || syscall(SYS_setgid, p.uid) != 0 || syscall(SYS_setuid, p.uid) != 0 ||
      getuid() != p.uid || geteuid() != p.uid) {
    static const char msg[] = "could not start the program in its sandbox (setuid failed)\n";
    cannot_start(started, StartStage::setuid, 126, msg);
  }
}

// The descriptors it inherits, at 3, 4, ...: each first moved above that
// range (as are ours still needed here), so that none overwrites another.
void pass_descriptors(const ChildPlan& p, ChildFds& fds) {
  if (p.pass_fds.empty()) return;
  const int first_free = 3 + static_cast<int>(p.pass_fds.size());
  auto above = [&](int& fd) {
    if (fd >= 0 && fd < first_free) fd = fcntl(fd, F_DUPFD_CLOEXEC, first_free);
  };
  above(fds.exe);
  above(fds.report);
  above(fds.started);
  int moved[16];
  const size_t n = std::min(p.pass_fds.size(), sizeof moved / sizeof moved[0]);
  for (size_t i = 0; i < n; ++i) moved[i] = fcntl(p.pass_fds[i], F_DUPFD_CLOEXEC, first_free);
  for (size_t i = 0; i < n; ++i) {
    if (moved[i] < 0 || dup2(moved[i], 3 + static_cast<int>(i)) < 0) {
      static const char msg[] = "could not start the program (its descriptors could not be passed)\n";
      cannot_start(fds.started, StartStage::exec, 126, msg);
    }
  }
}

}  // namespace

void run_child(const ChildPlan& p) {
  enter_process_group(p);
  enter_limits(p);
  unsigned flags = kReported;
  bool in_folder = false;       // already in `cwd`
  bool pid_ns_allowed = false;  // as root, or in a user namespace of our own
  if (p.sandbox) flags |= enter_sandbox(p, in_folder, pid_ns_allowed);
  ChildFds fds{p.started, p.report, p.exe_fd};
  const bool own_pids = pid_ns_allowed && enter_pid_namespace(p, fds.started);
  if (own_pids) flags |= kOwnPids;
  if (!p.cwd.empty() && !in_folder && chdir(p.cwd.c_str()) != 0) {
    static const char msg[] = "could not start the program (its working folder cannot be entered)\n";
    cannot_start(fds.started, StartStage::chdir, 126, msg);
  }
  if (p.own_user) {
    take_uid(p, fds.started);
    flags |= kOwnUser;
  }
  // It dies with the thread that started it (set after setuid, which clears
  // it): a sandbox at once, a trusted program (a checker) with time to clean up.
  prctl(PR_SET_PDEATHSIG, p.sandbox ? SIGKILL : SIGTERM, 0, 0, 0);
  if (getppid() != (own_pids ? 1 : p.parent)) _exit(126);  // we (or the init) are gone already
  if (p.sandbox) {
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    // Nothing of ours beyond stdin, stdout and stderr survives the exec.
    if (syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */) != 0) {
      for (int fd = 3; fd < 4096; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
  }
  pass_descriptors(p, fds);
  if (fds.report >= 0) (void)!write(fds.report, &flags, sizeof flags);
  if (fds.exe >= 0) {
    fexecve(fds.exe, p.argv.data(), p.envp.data());
  } else {
    execve(p.argv[0], p.argv.data(), p.envp.data());
  }
  static const char msg[] = "could not start the program (execve failed)\n";
  cannot_start(fds.started, StartStage::exec, 127, msg);
}

}  // namespace workbook
