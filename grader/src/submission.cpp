#include "submission.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace workbook {

namespace fs = std::filesystem;

fs::path submission_lessons_dir(const fs::path& dir) {
  std::error_code ec;  // a symlink loop or an unreadable folder is "no lessons/ here"
  return fs::is_directory(dir / "lessons", ec) ? dir / "lessons" : dir;
}

std::string read_quiz(const fs::path& lessons_dir) {
  const fs::path file = lessons_dir / "quiz.txt";
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(file, ec);
  if (ec || st.type() == fs::file_type::not_found) return "";
  if (st.type() != fs::file_type::regular) return "[quiz.txt is not a regular file (a symlink, folder or device): not read]";
  // O_NOFOLLOW and O_NONBLOCK: the file may have been swapped for a symlink or a FIFO since.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::string("[quiz.txt cannot be read: ") + std::strerror(errno) + "]";
  struct stat info;
  std::string text;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return "[quiz.txt is not a regular file: not read]";
  }
  char buf[4096];
  while (text.size() <= kMaxQuizBytes) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  if (text.size() > kMaxQuizBytes) {
    text.resize(kMaxQuizBytes);
    text += "\n[quiz.txt cut at " + std::to_string(kMaxQuizBytes) + " bytes]";
  }
  return text;
}

std::string results_json_text(const nlohmann::json& doc) {
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace workbook
