#include "stubs.h"

#include <sstream>

#include "tiny/error.h"

namespace workbook {

namespace {

std::string trim_left(const std::string& s) { return s.substr(std::min(s.find_first_not_of(" \t"), s.size())); }

std::string c_string(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string make_stub(const std::string& solution, int number, const std::string& origin) {
  static const std::string kBegin = "// BEGIN SOLUTION", kEnd = "// END SOLUTION";
  std::istringstream in(solution);
  std::ostringstream out;
  std::string line;
  int line_number = 0, region_start = 0;
  bool inside = false;
  while (std::getline(in, line)) {
    ++line_number;
    const std::string body = trim_left(line);
    if (body.rfind(kBegin, 0) == 0) {
      TINY_CHECK(!inside, ValueError, origin, ":", line_number, ": BEGIN SOLUTION inside the region opened at line ",
                 region_start, " (regions cannot nest)");
      const std::string rest = body.substr(kBegin.size());
      TINY_CHECK(rest.size() > 2 && rest[0] == ':', ValueError, origin, ":", line_number,
                 ": write what the student must do after the marker: // BEGIN SOLUTION: <what to do>");
      const std::string indent = line.substr(0, line.size() - body.size());
      out << indent << "TINY_TODO(\"lesson " << number << ": " << c_string(trim_left(rest.substr(1))) << "\");\n";
      inside = true;
      region_start = line_number;
    } else if (body.rfind(kEnd, 0) == 0) {
      TINY_CHECK(inside, ValueError, origin, ":", line_number, ": END SOLUTION without a BEGIN SOLUTION before it");
      inside = false;
    } else if (!inside) {
      out << line << "\n";
    }
  }
  TINY_CHECK(!inside, ValueError, origin, ":", region_start, ": the region opened here has no // END SOLUTION");
  return out.str();
}

}  // namespace workbook
