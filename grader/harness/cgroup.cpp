#include "cgroup.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "temp_folders.h"

namespace workbook {

namespace fs = std::filesystem;

namespace {

bool write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  return out.good();
}

fs::path fresh_cgroup(const fs::path& parent) {
  static std::atomic<int> counter{0};
  const fs::path dir = parent / ("workbook-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::error_code ec;
  return fs::create_directory(dir, ec) ? dir : fs::path();
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

}  // namespace

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

Cgroups::Cgroups(size_t memory_limit, int process_limit) {
  if (memory_limit == 0 && process_limit <= 0) return;
  const OwnCgroups own = own_cgroups();
  std::error_code ec;
  fs::path v2;  // made on first use
  auto unified = [&]() {
    if (v2.empty() && !own.unified.empty()) {
      v2 = fresh_cgroup(own.unified);
      if (!v2.empty()) dirs_.push_back(v2);
    }
    return v2;
  };
  if (memory_limit > 0) {
    const std::string limit = std::to_string(memory_limit);
    if (own.v1.count("memory") != 0) {
      const fs::path dir = fresh_cgroup(own.v1.at("memory"));
      if (!dir.empty() && write_file(dir / "memory.limit_in_bytes", limit)) {
        if (fs::exists(dir / "memory.memsw.limit_in_bytes")) write_file(dir / "memory.memsw.limit_in_bytes", limit);
        dirs_.push_back(dir);
        memory_ = dir;
      } else if (!dir.empty()) {
        fs::remove(dir, ec);
      }
    } else if (const fs::path dir = unified(); !dir.empty() && fs::exists(dir / "memory.max") &&
                                               write_file(dir / "memory.max", limit)) {
      write_file(dir / "memory.swap.max", "0");
      memory_ = dir;
    }
  }
  if (process_limit > 0) {
    const std::string limit = std::to_string(process_limit);
    if (own.v1.count("pids") != 0) {
      const fs::path dir = fresh_cgroup(own.v1.at("pids"));
      if (!dir.empty() && write_file(dir / "pids.max", limit)) {
        dirs_.push_back(dir);
        pids_ = dir;
      } else if (!dir.empty()) {
        fs::remove(dir, ec);
      }
    } else if (const fs::path dir = unified(); !dir.empty() && fs::exists(dir / "pids.max") &&
                                               write_file(dir / "pids.max", limit)) {
      pids_ = dir;
    }
  }
  // A v2 folder that ended up holding no limit is of no use.
  if (!v2.empty() && memory_ != v2 && pids_ != v2) {
    dirs_.erase(std::remove(dirs_.begin(), dirs_.end(), v2), dirs_.end());
    fs::remove(v2, ec);
  }
}

bool Cgroups::saw_oom() const {
  if (memory_.empty()) return false;
  if (cgroup_event(memory_ / "memory.events", "oom_kill") > 0) return true;
  if (cgroup_event(memory_ / "memory.oom_control", "oom_kill") > 0) return true;
  std::ifstream failcnt(memory_ / "memory.failcnt");
  long long value = 0;
  return failcnt >> value && value > 0;
}

bool Cgroups::saw_pids_max() const { return !pids_.empty() && cgroup_event(pids_ / "pids.events", "max") > 0; }

std::vector<pid_t> Cgroups::processes() const {
  std::vector<pid_t> pids;
  if (dirs_.empty()) return pids;
  std::ifstream procs(dirs_.front() / "cgroup.procs");
  for (pid_t pid = 0; procs >> pid;) pids.push_back(pid);
  return pids;
}

void Cgroups::remove() {
  if (removed_) return;
  removed_ = true;
  for (const fs::path& dir : dirs_) remove_cgroup(dir);
}

void remove_stale_cgroups() {
  const OwnCgroups own = own_cgroups();
  std::vector<fs::path> parents;
  for (const auto& entry : own.v1) parents.push_back(entry.second);
  if (!own.unified.empty()) parents.push_back(own.unified);
  std::error_code ec;
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
}

}  // namespace workbook
