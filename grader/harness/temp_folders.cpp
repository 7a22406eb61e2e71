// make_temp_folder and sweep_stale_temp_folders (process.h), and start_time_of.
#include "temp_folders.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cgroup.h"
#include "process.h"
#include "tiny/error.h"

namespace workbook {

namespace fs = std::filesystem;

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

namespace {

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
  remove_stale_cgroups();
  return static_cast<int>(stale.size());
}

}  // namespace workbook
