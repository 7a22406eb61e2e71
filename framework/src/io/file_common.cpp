/// @file file_common.cpp
/// @brief The helpers the `.npy` and safetensors readers and the atomic writer share (see file_common.h).
#include "io/file_common.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tiny/error.h"

namespace tiny::io::detail {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string errno_text(int err) { return std::strerror(err); }

void throw_open_error(const std::string& path, int err, const char* doing) {
  if (err == ENOENT)
    TINY_THROW(IOError, "No such file: ", path, " (check the path; relative paths start from the current directory)");
  if (err == EACCES)
    TINY_THROW(IOError, "Permission denied: cannot ", doing, " ", path, "; check the file's permissions");
  TINY_THROW(IOError, "cannot ", doing, " ", path, ": ", errno_text(err));
}

size_t pread_full(int fd, char* buf, size_t n, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const size_t chunk = n - done < (size_t{1} << 30) ? n - done : (size_t{1} << 30);
    const ssize_t got = ::pread(fd, buf + done, chunk, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      TINY_THROW(IOError, "cannot read ", path, ": ", errno_text(errno));
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

std::vector<char> read_to_end(int fd, const std::string& path) {
  std::vector<char> all;
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) continue;
      TINY_THROW(IOError, "cannot read ", path, ": ", errno_text(errno));
    }
    if (got == 0) break;
    all.insert(all.end(), buf, buf + got);
  }
  return all;
}

std::string printable(const char* p, size_t n, size_t limit, ShowBytes show) {
  size_t shown = n < limit ? n : limit;
  // UTF-8: never cut inside a character (continuation bytes are 10xxxxxx).
  if (show == ShowBytes::kUtf8)
    while (shown < n && shown > 0 && (static_cast<unsigned char>(p[shown]) & 0xC0) == 0x80) --shown;
  std::string out;
  for (size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(p[i]);
    const bool plain = c >= 0x20 && c != 0x7f && (c < 0x80 || show == ShowBytes::kUtf8);
    if (c == '\\') {
      out += "\\\\";
    } else if (plain) {
      out += static_cast<char>(c);
    } else if (c == '\n' && show == ShowBytes::kAscii) {
      out += "\\n";
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (n > shown) out += "...";
  return out;
}

}  // namespace tiny::io::detail
