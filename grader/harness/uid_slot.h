/// @file uid_slot.h
/// @brief The sandbox's own uids (as root): a pool of kUidSlots uids from
/// uid_base(), one held per run at a time (UidSlot), its folder given to it
/// and back, and every process of it killed when the run ends.
#pragma once

#include <sys/types.h>

#include <unistd.h>

#include <filesystem>

namespace workbook {

/// @brief How many uids the pool holds.
constexpr int kUidSlots = 256;

/// @brief The pool's first uid: WORKBOOK_SANDBOX_UID (at least 1000), else 2000000000.
unsigned uid_base();

/// @brief One uid of the pool, held (an open-file-description lock on byte
/// `slot` of a root-only lock file) for as long as this object lives, so that
/// no other run on this machine uses it at the same time. A uid that still has
/// processes (a run's orphans not yet reaped) is passed over, and the search
/// starts at a different slot each time.
class UidSlot {
 public:
  /// @brief Takes a free uid, waiting up to a minute for one; uid() is 0 when none came.
  UidSlot();
  /// @brief Gives the uid back (closes the lock file, which releases the lock).
  ~UidSlot() {
    if (fd_ >= 0) ::close(fd_);
  }
  UidSlot(const UidSlot&) = delete;
  UidSlot& operator=(const UidSlot&) = delete;
  /// @brief The uid held (0: none).
  unsigned uid() const { return uid_; }

 private:
  int fd_ = -1;
  unsigned uid_ = 0;
};

/// @brief Kills every process of `uid` (kill(-1) from a helper running as that
/// uid reaches exactly them), until none is alive: a process that left the
/// process group and the cgroup still dies with the run.
void kill_all_of_uid(unsigned uid);

/// @brief Gives a folder and everything in it (made by us, trusted) to `uid`.
void give_to(const std::filesystem::path& dir, unsigned uid);

/// @brief The tasks (processes and threads) `uid` has now, from /proc: RLIMIT_NPROC counts them all.
long tasks_of_uid(uid_t uid);

}  // namespace workbook
