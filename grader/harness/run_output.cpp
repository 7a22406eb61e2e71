#include "run_output.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

namespace workbook {

namespace fs = std::filesystem;

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
size_t tree_bytes_at(int dir_fd, size_t full, size_t& entries, const std::vector<std::string>& skip, int depth) {
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
  if (!cgroups.dirs().empty()) return cgroups.processes();
  std::vector<pid_t> pids;
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
void copy_back(int from, int to, const std::vector<std::string>& skip, size_t& budget, int depth) {
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

// Bytes used in a tmpfs we hold by descriptor.
size_t tmpfs_used(int fd) {
  struct statfs st {};
  if (fstatfs(fd, &st) != 0) return 0;
  return static_cast<size_t>(st.f_blocks - st.f_bfree) * static_cast<size_t>(st.f_bsize);
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

}  // namespace workbook
