/// @file atomic_file.cpp
/// @brief Atomic file replacement, shared by the `.npy` and safetensors writers.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/fault_injection.h"
#include "io/file_common.h"
#include "tiny/error.h"

namespace tiny::io::detail {
namespace {

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(const std::string& path, const std::string& kind, const std::string& example_name)
    : path_(path), target_(path), example_(example_name) {
  TINY_CHECK(!path.empty(), ValueError, "cannot save a ", kind, " file: the path is empty");

  // Write through a symbolic link rather than replacing the link itself.
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    if (char* real = ::realpath(path.c_str(), nullptr)) {
      target_ = real;
      std::free(real);
    }
  }
  if (::stat(target_.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      TINY_THROW(IOError, "cannot save ", path, ": it is a directory; pass a file path such as ", path, "/",
                 example_);
    if (!S_ISREG(st.st_mode))
      TINY_THROW(IOError, "cannot save ", path, ": it exists and is not a regular file; choose another path");
  }

  // The temporary file lives in the target's directory so that rename() is atomic.
  dir_ = parent_dir(target_);
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    tmp_ = dir_ + "/.tiny-" + kind + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) +
           ".tmp";
    // 0666 minus the umask: the permissions a plain open() would give.
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) {
      const int err = errno;
      struct stat dir_stat {};
      if (err == ENOENT && ::stat(dir_.c_str(), &dir_stat) != 0)
        TINY_THROW(IOError, "cannot save ", path, ": the directory ", dir_, " does not exist; create it first");
      if (err == ENOENT)  // /proc and its like: a directory that takes no new files
        TINY_THROW(IOError, "cannot save ", path, ": ", dir_, " takes no new files (", errno_text(err),
                   "); choose a path in a directory of your own");
      if (err == EACCES || err == EPERM || err == EROFS)
        TINY_THROW(IOError, "cannot save ", path, ": cannot create a file in ", dir_, " (", errno_text(err),
                   "); check the directory's permissions");
      TINY_THROW(IOError, "cannot save ", path, ": cannot create a temporary file in ", dir_, ": ",
                 errno_text(err));
    }
  }
  TINY_CHECK(fd_ >= 0, IOError, "cannot save ", path, ": could not find a free temporary file name in ", dir_);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t n) {
  TINY_CHECK(fd_ >= 0 && !committed_, IOError, "cannot write ", path_, ": the file was already committed");
  const char* buf = static_cast<const char*>(data);
  size_t done = 0;
  while (done < n) {
    const size_t chunk = n - done < (size_t{1} << 30) ? n - done : (size_t{1} << 30);
    const ssize_t put = ::write(fd_, buf + done, chunk);
    if (put < 0) {
      if (errno == EINTR) continue;
      TINY_THROW(IOError, "cannot write ", path_, ": ", errno_text(errno),
                 errno == ENOSPC ? " (the disk is full: free some space)" : "", "; the file was left unchanged");
    }
    done += static_cast<size_t>(put);
    fault::file_bytes_written(static_cast<uint64_t>(put));  // a planned crash mid-write (TINY_FAULT_INJECT)
  }
}

void AtomicFileWriter::commit() {
  TINY_CHECK(fd_ >= 0 && !committed_, IOError, "cannot save ", path_, ": the file was already committed");
  if (::fsync(fd_) != 0)
    TINY_THROW(IOError, "cannot save ", path_, ": fsync failed: ", errno_text(errno), "; the file was left unchanged");
  // close() can report a failed delayed write.
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    TINY_THROW(IOError, "cannot save ", path_, ": close failed: ", errno_text(errno), "; the file was left unchanged");
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    if (err == EISDIR)
      TINY_THROW(IOError, "cannot save ", path_, ": it is a directory; pass a file path such as ", path_, "/",
                 example_);
    TINY_THROW(IOError, "cannot save ", path_, ": rename failed: ", errno_text(err), "; the file was left unchanged");
  }
  committed_ = true;

  // Make the rename itself durable. Some file systems cannot fsync a directory
  // (EINVAL); the file is complete either way.
  const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    const int rc = ::fsync(dfd);
    const int err = errno;
    ::close(dfd);
    if (rc != 0 && err != EINVAL && err != EROFS && err != EBADF)
      TINY_THROW(IOError, "saved ", path_, " but could not make it durable: fsync of ", dir_,
                 " failed: ", errno_text(err));
  }
}

}  // namespace tiny::io::detail
