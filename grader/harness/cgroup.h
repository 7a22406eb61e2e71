/// @file cgroup.h
/// @brief Cgroups: the cgroup folders a run's child is put in (its memory and
/// pids limits), owned: they are emptied and removed when the owner goes, on
/// every path out of run_process.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace workbook {

/// @brief Where this process sits: its v1 hierarchies by controller, and its v2 folder.
struct OwnCgroups {
  std::map<std::string, std::filesystem::path> v1;  ///< controller ("memory", "pids") -> our folder
  std::filesystem::path unified;                    ///< our v2 folder (empty: none)
};

/// @brief Reads /proc/self/cgroup.
OwnCgroups own_cgroups();

/// @brief Fresh cgroups holding a run's limits (one per v1 hierarchy, or one
/// v2 folder), as far as this process may make them; removed by the destructor.
class Cgroups {
 public:
  /// @brief None (no limit asked for, or none could be made).
  Cgroups() = default;
  /// @brief Makes the cgroups for `memory_limit` bytes (0: none) and
  /// `process_limit` processes and threads (0: none); a limit that cannot be
  /// set leaves memory() or pids() empty.
  Cgroups(size_t memory_limit, int process_limit);
  /// @brief Kills whatever is still in them and removes them (remove()).
  ~Cgroups() { remove(); }
  Cgroups(const Cgroups&) = delete;
  Cgroups& operator=(const Cgroups&) = delete;

  /// @brief Every folder made, to join (their cgroup.procs), empty and remove.
  const std::vector<std::filesystem::path>& dirs() const { return dirs_; }
  /// @brief The folder holding the memory limit (empty: not enforced).
  const std::filesystem::path& memory() const { return memory_; }
  /// @brief The folder holding the pids limit (empty: not enforced).
  const std::filesystem::path& pids() const { return pids_; }
  /// @brief The memory cgroup killed a process for want of memory.
  bool saw_oom() const;
  /// @brief The pids cgroup refused a fork (pids.events "max").
  bool saw_pids_max() const;
  /// @brief The processes in the first cgroup (all of the run's, a daemon that left its process group too).
  std::vector<pid_t> processes() const;
  /// @brief Kills whatever is still in them (a process that left the process
  /// group) and removes the folders; the second call does nothing.
  void remove();

 private:
  std::vector<std::filesystem::path> dirs_;
  std::filesystem::path memory_, pids_;
  bool removed_ = false;
};

/// @brief Removes the empty cgroups `workbook-PID-N` beside ours whose process
/// (PID) is gone (killed outright: nothing of it ran to clean up).
void remove_stale_cgroups();

}  // namespace workbook
