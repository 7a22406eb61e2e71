/// @file process.h
/// @brief Runs a child program under limits, optionally as a hostile program
/// in a sandbox, and says in plain words how it ended (exit code, crash signal,
/// timeout, out of memory, too much output, too many processes).
///
/// Limits (any program):
/// - wall time: the process group is killed at `timeout_s`;
/// - memory: a cgroup (v2 `memory.max`, or v1 `memory.limit_in_bytes`) where
///   this process may create one, never RLIMIT_AS, which breaks programs linked
///   with CUDA or sanitizers (they reserve terabytes of address space);
///   `address_space_limit` adds RLIMIT_AS for the programs it suits (a compiler);
/// - processes and threads: a cgroup's `pids.max` (v1 `pids` hierarchy or v2),
///   else RLIMIT_NPROC (which root ignores, except on a sandbox's own uid);
/// - CPU time (RLIMIT_CPU) and no core files (RLIMIT_CORE 0);
/// - output: its stdout and stderr come to us through a pipe and we write its
///   log, never more than `output_limit`; its folder, in a sandbox with a mount
///   namespace, is a tmpfs of that size of its own (what it writes there is
///   copied back into `cwd` when it ends well, and dropped at once when it is
///   stopped); without one, the folder is measured every 20 ms, with the files
///   its processes hold open and unlinked. Not RLIMIT_FSIZE: the emulated GPU's
///   memory is a memfd twice the device's size, which it would forbid.
/// Where a cgroup cannot be made, `memory_limit_enforced` or
/// `process_limit_enforced` says so.
///
/// The sandbox (`sandbox = true`, for a student's code and for compiling it)
/// adds, as root: its own unprivileged uid (one of a pool, one per run at a
/// time, so that two submissions graded at once cannot reach each other's
/// processes; its folder is given back to root when it ends), its own network
/// namespace (a loopback of its own, nothing else), a mount namespace in which
/// the `hidden` paths (and those of WORKBOOK_SANDBOX_HIDE) are covered by an
/// empty, unreadable tmpfs (a file by /dev/null), no new privileges (setuid
/// programs do not raise it), a session of its own (no terminal), only the
/// environment variables a program needs (PATH, locale, TINY_*, ...: none of
/// the grader's secrets), no inherited file descriptors but its standard ones
/// and `pass_fds`,
/// and every file system read-only to it but its own folder (`cwd`, given to
/// its uid; the files already in it are read-only); everything else keeps its
/// permissions, so a folder of mode 0700 owned by root above it is out of its
/// reach, and a PID namespace of its own (it runs under an init of ours: when
/// it ends or is stopped, every process it started dies, a daemon of its own
/// session too, and it sees only its own processes in /proc). Not as root, a
/// user namespace gives the network, mount and PID isolation
/// where the system allows unprivileged ones; the uid stays ours.
/// `isolation` says what was in place.
///
/// Every child dies with us (PR_SET_PDEATHSIG: SIGKILL for a sandbox, SIGTERM
/// for a trusted program, which then cleans up after itself), and after
/// exit_cleanly_on_interrupt() Ctrl-C or SIGTERM stops every child, removes
/// their cgroups and the folders of remove_on_interrupt(), and exits 130 or 143.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace workbook {

/// @brief What to run and under which limits.
struct ProcessOptions {
  std::vector<std::string> argv;               ///< program and arguments
  std::map<std::string, std::string> env;      ///< set (or, with an empty value, unset) on top of ours
  double timeout_s = 60;                       ///< wall time before the process group is killed
  size_t memory_limit = 0;                     ///< bytes; 0 = none
  std::filesystem::path log;                   ///< stdout and stderr go here (empty: /dev/null, or ours with passthrough)
  bool passthrough = false;                    ///< with no log: the child writes to our stdout and stderr
  std::filesystem::path cwd;                   ///< the child's working folder (empty: ours)
  size_t output_limit = 0;                     ///< bytes it may write, its log and its folder (`cwd`) together, measured as it runs; 0 = none
  double cpu_limit_s = 0;                      ///< seconds of CPU time (RLIMIT_CPU, SIGXCPU); 0 = none
  int process_limit = 0;                       ///< processes and threads at once (pids.max, else RLIMIT_NPROC); 0 = none
  size_t address_space_limit = 0;              ///< bytes of address space (RLIMIT_AS), for programs that reserve little (a compiler); 0 = none
  bool sandbox = false;                        ///< a hostile program: own uid, no network, `hidden` unreadable (see the file's comment)
  std::vector<std::filesystem::path> hidden;   ///< with sandbox: paths it must not read (covered in its mount namespace)
  /// Descriptors the program inherits as 3, 4, ... in this order (a sandbox
  /// inherits none other); run_process closes ours once it has started it.
  std::vector<int> pass_fds;
};

/// @brief Which parts of the sandbox were in place for a run (ProcessOptions::sandbox).
struct Isolation {
  bool own_user = false;      ///< ran as an unprivileged uid of its own (root only)
  unsigned uid = 0;           ///< that uid
  bool no_network = false;    ///< in a network namespace of its own: no interface but its own loopback
  bool loopback_down = false;  ///< ... whose loopback could not be brought up: not even 127.0.0.1 (no CAP_NET_ADMIN)
  bool paths_hidden = false;  ///< every `hidden` path was covered in its mount namespace
  bool read_only = false;     ///< every file system is read-only to it, but its folder (`cwd`)
  bool folder_limited = false;  ///< its folder was a tmpfs of `folder_limit` bytes of its own (ProcessOptions::output_limit)
  size_t folder_limit = 0;      ///< the output limit it ran under (0: none)
  bool own_pids = false;        ///< in a PID namespace of its own: every process it started died with it
  /// @brief "own uid 2000000003, no network, sources hidden, read-only but its folder, its folder a 64 MiB tmpfs,
  /// own PID namespace",
  /// or, for each part, what was missing ("our uid", "network reachable", ...).
  std::string describe() const;
  /// @brief True when every protection was in place (as root with namespaces).
  bool complete() const { return own_user && no_network && paths_hidden && read_only && folder_limited && own_pids; }
  /// @brief What was missing, in words ("its own uid (needs root), a mount namespace ..."); "" when complete.
  std::string missing() const;
};

/// @brief How the child ended.
struct ProcessResult {
  int exit_code = -1;                  ///< when it exited normally
  int signal = 0;                      ///< the signal that ended it, if any
  bool timed_out = false;              ///< killed at the time limit
  bool out_of_memory = false;          ///< killed by the cgroup's memory limit
  bool output_limit_hit = false;       ///< wrote more than ProcessOptions::output_limit (its log and folder)
  bool cpu_limit_hit = false;          ///< used up ProcessOptions::cpu_limit_s of CPU time
  bool process_limit_hit = false;      ///< tried to have more than ProcessOptions::process_limit processes and threads
  bool memory_limit_enforced = false;  ///< a cgroup memory limit was in place
  bool process_limit_enforced = false; ///< a cgroup pids limit (or RLIMIT_NPROC) was in place
  Isolation isolation;                 ///< with sandbox: what was in place
  size_t memory_limit = 0;             ///< the limits it ran under (for the messages)
  size_t output_limit = 0;             ///< "
  double cpu_limit_s = 0;              ///< "
  int process_limit = 0;               ///< "
  double seconds = 0;                  ///< wall time
  double cpu_seconds = 0;              ///< user + system CPU time of the program itself
  std::string log_tail;                ///< the last lines of its output
  /// @brief The program never ran: its file could not be executed (missing,
  /// being written, not a program), or its folder or uid could not be set up.
  /// That is the caller's fault, never the program's; `start_error` says why.
  bool start_failed = false;
  std::string start_error;             ///< with start_failed: e.g. "execve failed: No such file or directory"

  /// @brief True for exit code 0 within every limit.
  bool ok() const {
    return !start_failed && !timed_out && signal == 0 && exit_code == 0 && !output_limit_hit && !process_limit_hit &&
           !cpu_limit_hit;
  }
  /// @brief "exited with code 3", "could not be started (execve failed: ...)", "crashed: SIGSEGV (segmentation fault: ...)", "wrote more than 64 MiB of output ...".
  std::string describe() const;
};

/// @brief Runs the program and waits (at most timeout_s). Throws tiny::Error if it cannot start.
ProcessResult run_process(const ProcessOptions& options);

/// @brief True when this process may run a sandbox with its own uid (it runs as root).
bool sandbox_has_own_user();

/// @brief Which protections a sandbox gets on this machine, as this user: a
/// trial run of /bin/sh in one (about 10 ms). The grader says what was missing.
Isolation probe_sandbox();

/// @brief Adds `path` to what every sandbox started from now on hides (also in
/// child processes: WORKBOOK_SANDBOX_HIDE), e.g. a batch of submissions.
void hide_in_every_sandbox(const std::filesystem::path& path);

/// @brief Ctrl-C (SIGINT) and SIGTERM stop this program cleanly: every child
/// of run_process is stopped (a sandbox at once, a trusted program with SIGTERM
/// and 5 s to clean up, then SIGKILL), with everything it started, its cgroups
/// are removed, so are the folders of remove_on_interrupt(), and the program
/// exits 130 (SIGINT) or 143 (SIGTERM). Call once, early in main(). With a
/// `farewell`, the program says on stderr that it was interrupted, then that text
/// (the grader does; the checkers it starts stay quiet, so one line is printed).
void exit_cleanly_on_interrupt(const char* farewell = nullptr);

/// @brief A temporary folder to remove when the program is interrupted.
void remove_on_interrupt(const std::filesystem::path& folder);

/// @brief A fresh folder `workbook-WHAT-PID.START-XXXXXX` in the temporary
/// folder (mode 0700; PID and START, this process's start time, prove whose it
/// is), removed when the program is interrupted (remove_on_interrupt).
/// Throws tiny::IOError when it cannot be made.
std::filesystem::path make_temp_folder(const std::string& what);

/// @brief Removes the folders of make_temp_folder that a process killed
/// outright (SIGKILL: nothing of it ran to clean up) left in the temporary
/// folder: only those named so, owned by this user, not a link, whose
/// process is gone (no process of that PID, or one started at another
/// time); never anything else, never following a link inside. Returns how many.
int sweep_stale_temp_folders();

/// @brief The last `max_lines` lines of a text file ("" if it cannot be read); long lines are cut.
std::string tail_of_file(const std::filesystem::path& path, size_t max_lines = 30);

}  // namespace workbook
