/// @file text_file.cpp
/// @brief Whole-file reads and atomic writes (text_file.h).
#include "text_file.h"

#include <fstream>
#include <sstream>

#include "tiny/error.h"

namespace fs = std::filesystem;

namespace workbook {

std::string read_whole_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  TINY_CHECK(in.good(), IOError, "cannot read ", file.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file_atomically(const fs::path& file, const std::string& text) {
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    TINY_CHECK(out.good(), IOError, "cannot write ", tmp.string());
  }
  fs::rename(tmp, file);
}

}  // namespace workbook
