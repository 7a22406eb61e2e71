/// @file sandbox_child.h
/// @brief The child side of run_process: what the parent prepares before fork
/// (ChildPlan), and run_child, which runs after fork in the child and enters
/// the limits and the sandbox, then execs the program. Everything after fork
/// is async-signal-safe: no allocation, no locks (the parent may have had
/// other threads holding them), only system calls and reads of the plan.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace workbook {

/// @brief What the child reports to us through the `report` pipe just before it starts the program.
enum ChildFlags : unsigned {
  kOwnUser = 1,
  kNoNetwork = 2,
  kHidden = 4,
  kReported = 8,
  kReadOnly = 16,
  kFolderLimited = 32,
  kOwnPids = 64,
  kLoopbackDown = 128,  ///< a network namespace of its own whose loopback could not be brought up (no CAP_NET_ADMIN)
};

/// @brief Where the child stopped when it could not start the program.
enum class StartStage : int { chdir, setuid, exec };

/// @brief What the child writes to the `started` pipe when it cannot start
/// the program (a successful exec closes the pipe instead).
struct StartFailure {
  StartStage stage;  ///< what failed
  int error;         ///< its errno
};

/// @brief "its working folder cannot be entered: ...", "execve failed: No such file or directory: PROGRAM".
std::string start_failure_text(const StartFailure& failure, const std::string& program);

/// @brief A resource limit the child sets on itself (setrlimit).
struct ResourceLimit {
  int resource;       ///< RLIMIT_*
  rlim_t soft;        ///< its soft value
  rlim_t hard;        ///< its hard value
};

/// @brief A path a sandbox must not read, covered in its mount namespace.
struct HiddenPath {
  std::string path;  ///< canonical
  bool is_dir;       ///< covered by an empty tmpfs (a folder) or /dev/null (a file)
};

/// @brief A name already in a sandbox's folder, bound read-only into its tmpfs.
struct FolderEntry {
  std::string name;    ///< its name in the folder
  std::string source;  ///< the original, through the descriptor of the folder (/proc/self/fd/SLOT/NAME)
  bool is_dir;         ///< a folder (bound onto an empty folder) or a file (onto an empty file)
};

/// @brief Everything the child needs, made before fork (the child only reads it).
/// Not copyable: `argv` and `envp` point into `args` and `env`.
struct ChildPlan {
  ChildPlan() = default;
  ChildPlan(const ChildPlan&) = delete;
  ChildPlan& operator=(const ChildPlan&) = delete;

  std::vector<std::string> args;       ///< the program's arguments
  std::vector<std::string> env;        ///< its environment ("KEY=VALUE")
  std::vector<char*> argv;             ///< pointers into `args`, ended by nullptr (point_into_strings())
  std::vector<char*> envp;             ///< pointers into `env`, ended by nullptr
  int exe_fd = -1;                     ///< the program by descriptor (a sandbox: its path may be out of its uid's reach), else -1
  pid_t parent = 0;                    ///< our PID: the child ends at once when its parent is no longer us
  bool sandbox = false;                ///< ProcessOptions::sandbox
  bool redirect = true;                ///< a process group of its own, its output to `child_out` (not passthrough)
  bool root = false;                   ///< we run as root
  bool own_user = false;               ///< it takes `uid` (a sandbox, as root)
  unsigned uid = 0;                    ///< its own uid
  std::vector<std::string> procs;      ///< the cgroup.procs files it joins
  std::vector<ResourceLimit> limits;   ///< the rlimits it sets
  int child_out = -1;                  ///< its stdout and stderr (our pipe, or /dev/null); -1: ours
  bool no_user_namespaces = false;     ///< (tests) act as a system without unprivileged user namespaces
  std::string uid_map;                 ///< our uid mapped to itself, for a user namespace
  std::string gid_map;                 ///< our gid mapped to itself
  std::string cwd;                     ///< its folder ("": ours)
  std::vector<HiddenPath> hidden;      ///< what its mount namespace covers
  bool private_folder = false;         ///< its folder becomes a tmpfs of its own (the output limit's size)
  int folder_slot = -1;                ///< the descriptor number it puts its folder at, to bind the entries from
  std::string tmpfs_options;           ///< the tmpfs's mount options (its size, its owner)
  std::vector<FolderEntry> entries;    ///< what was in its folder, bound read-only into the tmpfs
  int report = -1;                     ///< write end of the pipe its ChildFlags go through
  int started = -1;                    ///< write end of the pipe a StartFailure goes through
  int folder_socket = -1;              ///< its end of the socket its tmpfs's descriptor is sent through
  std::vector<int> pass_fds;           ///< descriptors it inherits as 3, 4, ... (ProcessOptions::pass_fds)

  /// @brief Points argv and envp into args and env (call once both are final).
  void point_into_strings();
};

/// @brief The child's whole life after fork: enters its process group, its
/// cgroups, its limits, its namespaces and folder, its uid, then execs the
/// program; says through `report` what was in place, through `started` why it
/// could not start. Never returns.
[[noreturn]] void run_child(const ChildPlan& plan);

/// @brief Sends a descriptor over a local socket (async-signal-safe).
bool send_fd(int socket, int fd);

/// @brief Receives one (-1 when none came); non-blocking.
int receive_fd(int socket);

}  // namespace workbook
