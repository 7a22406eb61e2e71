/// @file text_file.h
/// @brief Whole-file reads and atomic writes for the grader's outputs (gradebooks, results, reports).
#pragma once

#include <filesystem>
#include <string>

namespace workbook {

/// @brief The whole of `file`'s bytes; throws tiny::IOError naming the file when it cannot be read.
std::string read_whole_file(const std::filesystem::path& file);

/// @brief Writes `text` to `file` through `file`.tmp and a rename, so a kill or a crash never leaves half a file.
///
/// Throws tiny::IOError naming the temporary file when it cannot be written.
void write_file_atomically(const std::filesystem::path& file, const std::string& text);

}  // namespace workbook
