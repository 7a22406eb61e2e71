// Helpers shared by the fuzz target bodies (framework_targets.cpp, grader_targets.cpp).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace tiny_fuzz {

// An anonymous in-memory file holding the bytes; path() names it for readers that only take a path.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = ::memfd_create("tiny_fuzz", MFD_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error("memfd_create failed");
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) throw std::runtime_error("writing the memfd failed");
      done += static_cast<size_t>(n);
    }
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_ = -1;
};

// A scratch folder made once per process (removed at exit).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tiny_fuzz-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    static std::filesystem::path keep = tmpl;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(keep, ec);
    });
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& file, const void* data, size_t size) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out.good()) throw std::runtime_error("cannot write " + file.string());
}

}  // namespace tiny_fuzz

namespace tiny_fuzz {

// A broken promise of a reader that did not throw (e.g. data that does not match its shape). Not a
// std::exception on purpose: the fuzzer's catch lets it escape (std::terminate, a reported crash) and
// the corpus replay tests fail on it.
struct Bug {
  std::string what;
};

inline void require(bool ok, const std::string& what) {
  if (!ok) throw Bug{what};
}

}  // namespace tiny_fuzz
