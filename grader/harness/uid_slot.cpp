#include "uid_slot.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace workbook {

namespace fs = std::filesystem;

namespace {

constexpr unsigned kDefaultUidBase = 2000000000u;

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

}  // namespace

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

UidSlot::UidSlot() {
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

void give_to(const fs::path& dir, unsigned uid) {
  std::error_code ec;
  if (lchown(dir.c_str(), uid, uid) != 0) return;
  chmod(dir.c_str(), 0700);
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    (void)!lchown(it->path().c_str(), uid, uid);
  }
}

long tasks_of_uid(uid_t uid) {
  long tasks = 0;
  for_each_process([&](const ProcessStatus& p) {
    if (p.uid == uid) tasks += p.threads;
  });
  return tasks;
}

}  // namespace workbook
