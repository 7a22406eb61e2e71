#include "output_of.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "fd.h"

extern char** environ;

namespace workbook {

ProgramOutput output_of(const std::vector<std::string>& argv, bool quiet_stderr) {
  ProgramOutput result;
  if (argv.empty()) return result;
  int ends[2] = {-1, -1};
  if (pipe2(ends, O_CLOEXEC) != 0) return result;
  Fd read_end(ends[0]), write_end(ends[1]);
  // The arguments as posix_spawn wants them: pointers into our copies, ended by nullptr.
  std::vector<std::string> args = argv;
  std::vector<char*> pointers;
  for (std::string& a : args) pointers.push_back(a.data());
  pointers.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);  // dup2 clears O_CLOEXEC on 1
  if (quiet_stderr) posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, pointers[0], &actions, nullptr, pointers.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  write_end.reset();  // ours closed: the read end sees EOF once the program's copy is gone
  if (rc != 0) return result;
  result.started = true;

  char buffer[4096];
  for (;;) {
    const ssize_t n = read(read_end.get(), buffer, sizeof buffer);
    if (n > 0) {
      result.out.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return result;
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

}  // namespace workbook
