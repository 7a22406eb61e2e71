#include "junit.h"

#include <cstdio>
#include <sstream>

namespace workbook {

namespace {

// The length of the UTF-8 sequence starting at s[i] if it is valid and a character XML 1.0 allows, else 0.
size_t allowed_char(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return c >= 0x20 || c == '\t' || c == '\n' || c == '\r' ? 1 : 0;
  const size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < n; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (cc & 0x3F);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  const bool forbidden = (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF || cp > 0x10FFFF;
  return overlong || forbidden ? 0 : n;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

std::string xml_text(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = allowed_char(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
      continue;
    }
    switch (text[i]) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += "&#10;"; break;  // kept in attributes, where a raw newline would become a space
      case '\r': out += "&#13;"; break;
      case '\t': out += "&#9;"; break;
      default: out.append(text, i, n);
    }
    i += n;
  }
  return out;
}

std::string junit_xml(const std::vector<LessonResult>& results, const std::string& name, uint64_t seed,
                      const SubmissionLayout* layout) {
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  double seconds = 0;
  std::ostringstream suites;
  if (layout != nullptr) {
    // What was found where, first: a lesson "not submitted" below is never a silent zero.
    const bool ok = layout->complete();
    const std::string text = layout->text();
    suites << "  <testsuite name=\"submission_layout\" tests=\"1\" failures=\"" << (ok ? 0 : 1)
           << "\" errors=\"0\" skipped=\"0\" time=\"0\">\n    <testcase classname=\"submission_layout\" "
           << "name=\"submission layout\" time=\"0\">\n      "
           << (ok ? "<system-out>" + xml_text(text) + "</system-out>"
                  : "<failure message=\"" + xml_text(first_line(text)) + "\" type=\"layout\">" + xml_text(text) +
                        "</failure>")
           << "\n    </testcase>\n  </testsuite>\n";
    tests += 1;
    failures += ok ? 0 : 1;
  }
  for (const LessonResult& r : results) {
    const std::string suite = "lesson_" + std::to_string(r.lesson->number);
    int t = 0, f = 0, e = 0, s = 0;
    std::ostringstream cases;
    auto testcase = [&](const std::string& check, double secs, const std::string& body) {
      cases << "    <testcase classname=\"" << xml_text(suite) << "\" name=\"" << xml_text(check) << "\" time=\""
            << seconds_text(secs) << "\"" << (body.empty() ? "/>\n" : ">\n" + body + "    </testcase>\n");
      ++t;
    };
    auto element = [](const char* tag, const std::string& message, const std::string& type, const std::string& text) {
      return std::string("      <") + tag + " message=\"" + xml_text(first_line(message)) + "\"" +
             (type.empty() ? "" : " type=\"" + xml_text(type) + "\"") + ">" + xml_text(text) + "</" + tag + ">\n";
    };
    if (r.checks.empty()) {  // no check could even be listed: the lesson is one failed case
      const bool workbook = r.status == "error";
      testcase(r.lesson->folder, r.seconds, element(workbook ? "error" : "failure", r.status + ": " + r.problem,
                                                    r.status, r.problem));
      (workbook ? e : f) += 1;
    }
    for (const CheckResult& c : r.checks) {
      std::string text = c.summary;
      if (!c.message.empty()) text += "\n" + c.message;
      if (!c.note.empty()) text += "\n" + c.note;
      if (c.verdict == "pass" && r.status != "error") {
        testcase(c.name, c.seconds, c.note.empty() ? "" : "      <system-out>" + xml_text(c.note) + "</system-out>\n");
      } else if (c.verdict == "todo" || c.verdict == "skip") {
        std::string why = first_line(c.message);
        if (c.verdict == "todo" && why.rfind("not done yet", 0) != 0) why = "not done yet: " + why;
        testcase(c.name, c.seconds, "      <skipped message=\"" + xml_text(why) + "\"/>\n");
        ++s;
      } else if (c.verdict == "error" || r.status == "error") {
        const std::string why = c.verdict == "error" ? c.message : r.problem;
        testcase(c.name, c.seconds, element("error", why, "workbook", text + "\n" + r.problem));
        ++e;
      } else {
        testcase(c.name, c.seconds, element("failure", c.message.empty() ? c.summary : c.message,
                                            r.status == "in progress" ? "fail" : r.status, text));
        ++f;
      }
    }
    suites << "  <testsuite name=\"" << xml_text(suite + " (" + r.lesson->title + ")") << "\" tests=\"" << t
           << "\" failures=\"" << f << "\" errors=\"" << e << "\" skipped=\"" << s << "\" time=\""
           << seconds_text(r.seconds) << "\">\n"
           << "    <properties><property name=\"status\" value=\"" << xml_text(r.status) << "\"/><property name=\"points\" value=\""
           << points_text(r.points) << "\"/><property name=\"max_points\" value=\"" << points_text(r.max_points)
           << "\"/></properties>\n"
           << cases.str() << "  </testsuite>\n";
    tests += t, failures += f, errors += e, skipped += s;
    seconds += r.seconds;
  }
  std::ostringstream doc;
  doc << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\""
      << xml_text("GPU Training Workbook: " + name + ", seed " + std::to_string(seed)) << "\" tests=\"" << tests
      << "\" failures=\"" << failures << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\" time=\""
      << seconds_text(seconds) << "\">\n"
      << suites.str() << "</testsuites>\n";
  return doc.str();
}

}  // namespace workbook
