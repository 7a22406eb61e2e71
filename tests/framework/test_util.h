// Helpers shared by the framework tests that read and write files.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

#include "tiny/error.h"

namespace tiny_test {

// A fresh directory, removed with its contents at the end of the test (even
// when a test made it read-only).
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "tiny-test") {
    namespace fs = std::filesystem;
    std::string tmpl = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    const char* made = ::mkdtemp(buf.data());
    EXPECT_NE(made, nullptr);
    path_ = made ? made : "";
  }
  ~TempDir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  // File names in the directory, sorted (to see that no temporary file was left).
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

// The bytes of a file.
inline std::vector<char> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Writes `bytes` as the whole content of a file.
inline void spit(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// Expects `fn` to throw ErrorType whose message contains every one of `parts`.
template <typename ErrorType = tiny::IOError>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << (parts.empty() ? "" : parts.front())
                  << "\", but nothing was thrown";
  } catch (const ErrorType& e) {
    const std::string msg = e.what();
    for (const auto& part : parts) {
      EXPECT_NE(msg.find(part), std::string::npos) << "missing \"" << part << "\" in: " << msg;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type, message: " << e.what();
  }
}

// Runs `fn` and returns the tiny::IOError message it throws ("" if none).
// As root, which ignores file permissions, `fn` runs in a child process that
// has dropped to the unprivileged uid/gid 65534 ("nobody"), so permission
// tests really run in CI; `*skipped` is set when that drop is impossible.
inline std::string io_error_as_unprivileged(const std::function<void()>& fn, bool* skipped) {
  *skipped = false;
  if (::geteuid() != 0) {
    try {
      fn();
    } catch (const tiny::IOError& e) {
      return e.what();
    }
    return "";
  }
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    std::string message = "\x01";  // marks "did not throw"
    try {
      fn();
    } catch (const tiny::IOError& e) {
      message = e.what();
    } catch (...) {
      message = "another exception";
    }
    const ssize_t ignored = ::write(fds[1], message.data(), message.size());
    (void)ignored;
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string message;
  char buf[4096];
  for (ssize_t got; (got = ::read(fds[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<size_t>(got));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) *skipped = true;
  return message == "\x01" ? "" : message;
}

// Runs `fn` with writes limited to `max_file_bytes` per file (RLIMIT_FSIZE:
// write() fails with EFBIG part way through, as a full disk or a crash would
// cut it; works as root too) and returns the tiny::IOError message it throws
// ("" if none). The limit and SIGXFSZ's handler are restored afterwards.
inline std::string io_error_under_file_size_limit(size_t max_file_bytes, const std::function<void()>& fn) {
  struct rlimit saved;
  EXPECT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* previous = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = max_file_bytes;
  EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    fn();
  } catch (const tiny::IOError& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, previous);
  return message;
}

}  // namespace tiny_test
