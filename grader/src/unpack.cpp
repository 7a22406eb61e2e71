#include "unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>

#include "tiny/error.h"

namespace workbook {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string mib(uint64_t bytes) {
  return bytes % (uint64_t{1} << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

// What a walk does with the entries it accepts: `file` gets each chunk of a file's data in turn.
struct Sink {
  std::function<void(const std::string& path)> folder;
  std::function<void(const std::string& path)> open_file;
  std::function<void(const void* data, size_t size)> write;
  std::function<void()> close_file;
};

// The entry's path made relative and clean ("a/./b/" gives "a/b"), or why it is refused.
std::string clean_path(const char* raw, std::string& why) {
  if (raw == nullptr || *raw == '\0') {
    why = "an entry has no name";
    return "";
  }
  const std::string path = raw;
  if (path[0] == '/') {
    why = "the entry \"" + path + "\" has an absolute path (it would be written outside the submission)";
    return "";
  }
  std::string clean;
  size_t parts = 0, start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string part = path.substr(start, end - start);
    start = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      why = "the entry \"" + path + "\" has a \"..\" in its path (it would be written outside the submission)";
      return "";
    }
    if (part.size() > 255 || ++parts > 64) {
      why = "the entry \"" + path.substr(0, 200) + "\" has a path too long or too deep for a lessons folder";
      return "";
    }
    clean += (clean.empty() ? "" : "/") + part;
  }
  if (clean.empty()) why = "the entry \"" + path + "\" names no file";
  return clean;
}

[[noreturn]] void refuse(const std::string& shown, const std::string& why, const std::string& fix) {
  TINY_THROW(ValueError, shown, " was refused: ", why, "; ", fix);
}

[[noreturn]] void unreadable(archive* a, const std::string& shown, const std::string& when) {
  const char* msg = archive_error_string(a);
  TINY_THROW(ValueError, shown, " cannot be read as a .zip or .tar.gz archive (", when, ": ",
             msg != nullptr ? msg : "no reason given", "): make it again with zip -r or tar czf, or submit the "
             "folder itself");
}

const std::string kRemake = "make the archive again from the lessons folder itself (zip -r NAME.zip lessons)";

// Refuses an entry that is not a plain file or folder: a link, a device, a FIFO or a socket.
void check_entry_type(archive_entry* entry, const std::string& path, const std::string& shown) {
  if (archive_entry_hardlink(entry) != nullptr) {
    refuse(shown, "the entry \"" + path + "\" is a hard link (to \"" + archive_entry_hardlink(entry) +
           "\"); links are not unpacked", "submit the files themselves, not links");
  }
  const mode_t type = archive_entry_filetype(entry);
  if (type == AE_IFLNK) {
    const char* target = archive_entry_symlink(entry);
    refuse(shown, "the entry \"" + path + "\" is a symbolic link (to \"" + (target != nullptr ? target : "") +
           "\"); links are not unpacked (one could point at any file of the grading machine)",
           "submit the files themselves, not links");
  }
  if (type != AE_IFREG && type != AE_IFDIR) {
    refuse(shown, "the entry \"" + path + "\" is not a file or a folder (a device, FIFO or socket)", kRemake);
  }
}

// Reads the data of file entry `e` into `sink`, adding it to `total` (the archive's unpacked bytes so far)
// within the limits on the total and on the compression ratio.
void read_file(archive* a, ArchiveEntry& e, uint64_t& total, uint64_t packed, const std::string& shown,
               const ArchiveLimits& limits, const Sink& sink) {
  const std::string& path = e.path;
  if (sink.open_file) sink.open_file(path);
  char buf[64 * 1024];
  for (;;) {
    const la_ssize_t got = archive_read_data(a, buf, sizeof buf);
    if (got == 0) break;
    if (got < 0) unreadable(a, shown, "reading \"" + path + "\"");
    total += static_cast<uint64_t>(got);
    e.size += static_cast<uint64_t>(got);
    if (total > limits.max_total_bytes) {
      refuse(shown, "it unpacks to more than " + mib(limits.max_total_bytes) + " (the limit on the total unpacked "
             "size, against archive bombs; passed in \"" + path + "\")", "submit only the lessons' exercise.cpp files");
    }
    if (total > limits.ratio_floor_bytes && static_cast<double>(total) > limits.max_ratio * static_cast<double>(packed)) {
      refuse(shown, "its " + std::to_string(packed) + " bytes unpack to more than " + std::to_string(total) + " (over " +
             std::to_string(static_cast<long long>(limits.max_ratio)) + " times its size: the limit on the "
             "compression ratio, against archive bombs; passed in \"" + path + "\")",
             "submit source files, which do not compress that well");
    }
    if (sink.write) sink.write(buf, static_cast<size_t>(got));
  }
  if (sink.close_file) sink.close_file();
}

// Reads every entry of the opened archive `a` (of `packed` bytes) into `sink`, applying the rules and
// limits; throws ValueError naming the archive (`shown`), the entry and the rule.
std::vector<ArchiveEntry> walk(archive* a, uint64_t packed, const std::string& shown, const ArchiveLimits& limits,
                               const Sink& sink) {
  std::vector<ArchiveEntry> entries;
  uint64_t total = 0;
  archive_entry* entry = nullptr;
  for (;;) {
    const int rc = archive_read_next_header(a, &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) unreadable(a, shown, "reading entry " + std::to_string(entries.size() + 1));
    if (entries.size() >= limits.max_entries) {
      refuse(shown, "it holds more than " + std::to_string(limits.max_entries) + " entries (the limit on the file "
             "count, against archive bombs)", "submit only the lessons folder");
    }
    std::string why;
    const char* raw = archive_entry_pathname(entry);
    const std::string path = clean_path(raw, why);
    // "./" is the folder `tar czf lessons.tgz .` archives first: the archive's own root, nothing to make.
    if (path.empty() && raw != nullptr && *raw != '\0' && *raw != '/' &&
        archive_entry_filetype(entry) == AE_IFDIR && std::string(raw).find_first_not_of("./") == std::string::npos) {
      continue;
    }
    if (path.empty()) refuse(shown, why, kRemake);
    check_entry_type(entry, path, shown);
    ArchiveEntry e{path, 0, archive_entry_filetype(entry) == AE_IFDIR};
    if (e.folder) {
      if (sink.folder) sink.folder(path);
      entries.push_back(e);
      continue;
    }
    if (archive_entry_size_is_set(entry) &&
        static_cast<uint64_t>(archive_entry_size(entry)) > limits.max_total_bytes - total) {
      refuse(shown, "the entry \"" + path + "\" says it is " + std::to_string(archive_entry_size(entry)) + " bytes, "
             "more than the limit on the total unpacked size (" + mib(limits.max_total_bytes) + ", against archive "
             "bombs)", "submit only the lessons' exercise.cpp files");
    }
    read_file(a, e, total, packed, shown, limits, sink);
    entries.push_back(e);
  }
  return entries;
}

using ArchivePtr = std::unique_ptr<archive, int (*)(archive*)>;

ArchivePtr new_reader() {
  ArchivePtr a(archive_read_new(), archive_read_free);
  TINY_CHECK(a != nullptr, RuntimeError, "libarchive could not make a reader (out of memory?)");
  // Only the two formats a submission may be; libarchive recognises them by content, not by name.
  archive_read_support_format_zip(a.get());
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_gzip(a.get());
  return a;
}

// Writes the files of an archive under `dest` (made by the caller): fresh names only (O_EXCL), never
// through a link (none is ever made there), mode 0644 / 0755 whatever the archive says.
class DiskSink {
 public:
  explicit DiskSink(fs::path dest, std::string shown) : dest_(std::move(dest)), shown_(std::move(shown)) {}
  ~DiskSink() { close(); }
  DiskSink(const DiskSink&) = delete;
  DiskSink& operator=(const DiskSink&) = delete;

  void folder(const std::string& path) {
    std::error_code ec;
    fs::create_directories(dest_ / path, ec);
    TINY_CHECK(!ec, ValueError, shown_, " was refused: the folder \"", path, "\" cannot be made (", ec.message(),
               "; a file of the same name came first?)");
  }
  void open_file(const std::string& path) {
    const fs::path file = dest_ / path;
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    fd_ = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    TINY_CHECK(fd_ >= 0, ValueError, shown_, " was refused: \"", path, "\" cannot be unpacked (",
               std::strerror(errno), errno == EEXIST ? ": the archive holds it twice" : "", ")");
    path_ = path;
  }
  void write(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t w = ::write(fd_, p, size);
      if (w < 0 && errno == EINTR) continue;
      TINY_CHECK(w > 0, IOError, "cannot write \"", path_, "\" of ", shown_, " into the grader's scratch folder ",
                 dest_.string(), ": ", std::strerror(errno));
      p += w;
      size -= static_cast<size_t>(w);
    }
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  fs::path dest_;
  std::string shown_, path_;
  int fd_ = -1;
};

}  // namespace

bool is_archive_name(const std::string& name) {
  return ends_with(name, ".zip") || ends_with(name, ".tar.gz") || ends_with(name, ".tgz");
}

std::string archive_stem(const std::string& name) {
  for (const char* ext : {".tar.gz", ".tgz", ".zip"}) {
    if (ends_with(name, ext)) return name.substr(0, name.size() - std::strlen(ext));
  }
  return name;
}

std::vector<ArchiveEntry> unpack_archive(const fs::path& file, const fs::path& dest, const ArchiveLimits& limits) {
  const std::string shown = file.filename().string();
  // O_NOFOLLOW and O_NONBLOCK: a submission that is a link, or a FIFO, is not read.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  TINY_CHECK(fd >= 0, ValueError, shown, " cannot be opened (", std::strerror(errno),
             errno == ELOOP ? ": it is a symbolic link; submit the archive itself" : "", ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    TINY_THROW(ValueError, shown, " is not a regular file: only a .zip or .tar.gz file is unpacked");
  }
  if (static_cast<uint64_t>(st.st_size) > limits.max_archive_bytes) {
    ::close(fd);
    TINY_THROW(ValueError, shown, " was refused: it is ", st.st_size, " bytes, more than ", mib(limits.max_archive_bytes),
               " (the limit on an archive's size; a lessons folder is a few hundred KiB): submit only the lessons "
               "folder, without build/ or .git/");
  }
  ArchivePtr a = new_reader();
  if (archive_read_open_fd(a.get(), fd, 64 * 1024) != ARCHIVE_OK) {
    const std::string msg = archive_error_string(a.get()) != nullptr ? archive_error_string(a.get()) : "";
    ::close(fd);
    TINY_THROW(ValueError, shown, " cannot be read as a .zip or .tar.gz archive (", msg, "): make it again with "
               "zip -r or tar czf, or submit the folder itself");
  }
  std::error_code ec;
  TINY_CHECK(fs::create_directory(dest, ec) && !ec, IOError, "cannot make the grader's scratch folder ", dest.string(),
             " to unpack ", shown, ": ", ec ? ec.message() : "it exists already");
  DiskSink disk(dest, shown);
  Sink sink;
  sink.folder = [&](const std::string& p) { disk.folder(p); };
  sink.open_file = [&](const std::string& p) { disk.open_file(p); };
  sink.write = [&](const void* d, size_t n) { disk.write(d, n); };
  sink.close_file = [&]() { disk.close(); };
  try {
    std::vector<ArchiveEntry> entries = walk(a.get(), static_cast<uint64_t>(st.st_size), shown, limits, sink);
    a.reset();
    ::close(fd);
    return entries;
  } catch (...) {
    a.reset();
    ::close(fd);
    throw;
  }
}

std::vector<ArchiveEntry> read_archive(const void* data, size_t size, const std::string& shown,
                                       const ArchiveLimits& limits) {
  ArchivePtr a = new_reader();
  if (archive_read_open_memory(a.get(), data, size) != ARCHIVE_OK) {
    const char* msg = archive_error_string(a.get());
    TINY_THROW(ValueError, shown, " cannot be read as a .zip or .tar.gz archive (", msg != nullptr ? msg : "",
               "): make it again with zip -r or tar czf, or submit the folder itself");
  }
  return walk(a.get(), size, shown, limits, Sink{});
}

}  // namespace workbook
