/// @file unpack.h
/// @brief Unpacking a submission that is a `.zip` or `.tar.gz` (libarchive), refusing what could harm the grader.
///
/// The archive is untrusted. An entry is refused, and with it the whole archive, when its path is
/// absolute or has a `..` part, when it is a symbolic or hard link, a device or a FIFO, or when the
/// archive unpacks to more than the limits (total size, number of entries, ratio of unpacked to packed
/// bytes: an archive bomb). Files are written by the grader itself (never by libarchive's disk writer),
/// with fresh names under a fresh folder, so nothing is written through a link or outside that folder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace workbook {

/// @brief How much an archive may unpack to; past any of them it is refused as an archive bomb.
struct ArchiveLimits {
  uint64_t max_total_bytes = uint64_t{64} << 20;  ///< all files together (a class's lessons are a few hundred KiB)
  uint64_t max_entries = 10000;                    ///< files and folders together
  double max_ratio = 200;                          ///< unpacked bytes over the archive's own bytes...
  uint64_t ratio_floor_bytes = uint64_t{1} << 20;  ///< ...checked once this much is unpacked (small files pack well)
  uint64_t max_archive_bytes = uint64_t{64} << 20; ///< the archive file itself (not even read past this)
};

/// @brief One entry an archive held: its path inside it (cleaned: no "." parts, no trailing "/") and its size.
struct ArchiveEntry {
  std::string path;
  uint64_t size = 0;
  bool folder = false;
};

/// @brief True when `name` ends in `.zip`, `.tar.gz` or `.tgz`: a submission the grader unpacks.
bool is_archive_name(const std::string& name);

/// @brief The name of a submission without its archive extension ("alice.tar.gz" gives "alice").
std::string archive_stem(const std::string& name);

/// @brief Unpacks `archive` into `dest`, which must not exist yet (it is created); returns its entries.
/// Throws tiny::ValueError naming the archive, the entry and the rule or limit it broke; what was
/// unpacked before then stays in `dest` for the caller to remove with its scratch folder.
std::vector<ArchiveEntry> unpack_archive(const std::filesystem::path& archive, const std::filesystem::path& dest,
                                         const ArchiveLimits& limits = {});

/// @brief The same reading and checks on an archive in memory, writing nothing: its entries (for the
/// fuzz target and tests). `shown` names the archive in errors.
std::vector<ArchiveEntry> read_archive(const void* data, size_t size, const std::string& shown,
                                       const ArchiveLimits& limits = {});

}  // namespace workbook
