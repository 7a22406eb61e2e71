#include "gradebook.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>

#include "tiny/error.h"

namespace workbook {

namespace fs = std::filesystem;

namespace {

// A spreadsheet runs a cell that starts with one of these as a formula: such a
// name is written with a leading ' (the spreadsheet's own escape) and read back without it.
bool formula_start(char c) { return c == '=' || c == '+' || c == '-' || c == '@' || c == '\t' || c == '\r'; }

std::string csv_field(const std::string& s) {
  std::string out = "\"";
  if (!s.empty() && formula_start(s[0])) out += "'";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string unescaped_name(const std::string& field) {
  return field.size() >= 2 && field[0] == '\'' && formula_start(field[1]) ? field.substr(1) : field;
}

std::string percent_text(double points, double maximum) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << (maximum > 0 ? 100.0 * points / maximum : 0.0);
  return s.str();
}

// RFC 4180: quoted fields may hold commas, quotes ("") and newlines. A last row
// without its newline (a kill during the write) is not returned.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
    } else if (c == '\n') {
      row.push_back(field);
      field.clear();
      rows.push_back(row);
      row.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  return rows;
}

std::string html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// A folder name as one segment of a relative URL.
std::string url_segment(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// Per lesson: counts by status, and how often each check failed.
struct LessonTally {
  int passed = 0, in_progress = 0, not_started = 0, no_grade = 0;
  std::vector<std::pair<std::string, int>> failing;  // in the order first met: the lesson's order of checks
  void failed(const std::string& check) {
    for (auto& [name, count] : failing) {
      if (name == check) return void(++count);
    }
    failing.emplace_back(check, 1);
  }
  // A tie goes to the check met first (a hang fails every check once: its first check is the one to look at).
  std::string most_failed() const {
    std::string name;
    int most = 0;
    for (const auto& [check, count] : failing) {
      if (count > most) most = count, name = check;
    }
    return most == 0 ? "-" : name + " (" + std::to_string(most) + ")";
  }
};

std::map<int, LessonTally> tally(const std::vector<nlohmann::json>& summaries) {
  std::map<int, LessonTally> out;
  for (const nlohmann::json& s : summaries) {
    for (const nlohmann::json& l : s.value("lessons", nlohmann::json::array())) {
      LessonTally& t = out[l.value("number", 0)];
      const std::string status = l.value("status", "");
      if (status == "passed") {
        ++t.passed;
      } else if (status == "in progress") {
        ++t.in_progress;
      } else if (status == "not started") {
        ++t.not_started;
      } else if (status != "skipped") {
        ++t.no_grade;
      }
      for (const nlohmann::json& name : l.value("failing", nlohmann::json::array())) {
        if (name.is_string()) t.failed(name.get<std::string>());
      }
    }
  }
  return out;
}

}  // namespace

std::string duration_text(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lds", s);
  }
  return buf;
}

std::string problems_text(const std::vector<LessonResult>& results) {
  std::string out;
  for (const LessonResult& r : results) {
    std::string what;
    if (r.status == "does not compile" || r.status == "not submitted" || r.status == "out of time") {
      what = r.status;
    } else if (r.status == "error") {
      what = "could not be graded (the workbook's fault: see the report)";
    } else if (!r.timed_out.empty()) {
      what = "timed out";
    }
    if (!what.empty()) out += (out.empty() ? "" : "; ") + ("lesson " + std::to_string(r.lesson->number) + " " + what);
  }
  return out;
}

std::string gradebook_header(const std::vector<const Lesson*>& lessons) {
  std::string h = "submission,total,maximum,percent,seed,seconds,problems";
  for (const Lesson* l : lessons) {
    const std::string n = std::to_string(l->number);
    h += ",lesson_" + n + "_points,lesson_" + n + "_status";
  }
  return h + "\n";
}

std::string gradebook_row(const std::string& submission, const std::vector<LessonResult>& results, uint64_t seed,
                          double seconds) {
  double total = 0, maximum = 0;
  for (const LessonResult& r : results) total += r.points, maximum += r.max_points;
  std::ostringstream row;
  row << csv_field(submission) << "," << points_text(total) << "," << points_text(maximum) << ","
      << percent_text(total, maximum) << "," << seed << "," << static_cast<long>(seconds + 0.5) << ","
      << csv_field(problems_text(results));
  for (const LessonResult& r : results) row << "," << points_text(r.points) << "," << csv_field(r.status);
  return row.str() + "\n";
}

Gradebook read_gradebook(const fs::path& file, const std::string& header) {
  std::ifstream in(file, std::ios::binary);
  TINY_CHECK(in.good(), IOError, "cannot read ", file.string());
  std::ostringstream text;
  text << in.rdbuf();
  std::vector<std::vector<std::string>> rows = parse_csv(text.str());
  const std::vector<std::vector<std::string>> expected = parse_csv(header);
  TINY_CHECK(!rows.empty() && rows[0] == expected[0], ValueError, "--resume: ", file.string(),
             " was not written for these lessons by this grader (its first line is not \"",
             header.substr(0, header.size() - 1), "\"): grade the same lessons as before, or choose another --out");
  Gradebook g;
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].size() != expected[0].size()) continue;  // cut short: that submission is graded again
    g.submissions.insert(unescaped_name(rows[i][0]));
    try {
      g.last_seed = std::stoull(rows[i][4]);
    } catch (const std::exception&) {
    }
    g.rows.push_back(rows[i]);
  }
  return g;
}

void write_gradebook(const fs::path& file, const std::string& header, const std::vector<std::vector<std::string>>& rows) {
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << header;
    for (const auto& row : rows) {
      for (size_t i = 0; i < row.size(); ++i) {
        // As gradebook_row wrote it: numbers bare, text (the name, with its formula escape; the problems; the
        // statuses) quoted.
        const bool text = i == 0 || i == 6 || (i > 7 && (i - 7) % 2 == 1);
        std::string f = text ? "\"" : "";
        for (char c : row[i]) f += c == '"' ? std::string("\"\"") : std::string(1, c);
        out << (i == 0 ? "" : ",") << f << (text ? "\"" : "");
      }
      out << "\n";
    }
    TINY_CHECK(out.good(), IOError, "cannot write ", tmp.string());
  }
  fs::rename(tmp, file);
}

void append_row(const fs::path& file, const std::string& row) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  TINY_CHECK(fd >= 0, IOError, "cannot open ", file.string(), " to add a row: ", std::strerror(errno));
  const ssize_t w = ::write(fd, row.data(), row.size());
  const int err = errno;
  ::fsync(fd);
  ::close(fd);
  TINY_CHECK(w == static_cast<ssize_t>(row.size()), IOError, "cannot add a row to ", file.string(), ": ",
             std::strerror(err));
}

nlohmann::json submission_summary(const std::string& submission, const std::vector<LessonResult>& results,
                                  uint64_t seed, double seconds) {
  double total = 0, maximum = 0;
  nlohmann::json lessons = nlohmann::json::array();
  for (const LessonResult& r : results) {
    total += r.points, maximum += r.max_points;
    nlohmann::json failing = nlohmann::json::array();
    // Checks that ran and failed (a stub's TODO is not a failure; a lesson that
    // does not compile or is missing fails every check and would tell nothing).
    const bool ran = r.status == "in progress" || r.status == "not started" || r.status == "passed";
    for (const CheckResult& c : r.checks) {
      if (ran && c.verdict == "fail") failing.push_back(c.name);
    }
    lessons.push_back({{"number", r.lesson->number}, {"status", r.status}, {"points", r.points},
                       {"max_points", r.max_points}, {"failing", failing}});
  }
  return {{"submission", submission}, {"seed", seed}, {"seconds", seconds}, {"total", total}, {"maximum", maximum},
          {"problems", problems_text(results)}, {"lessons", lessons}};
}

std::string class_table(const std::vector<const Lesson*>& lessons, const std::vector<nlohmann::json>& summaries) {
  const std::map<int, LessonTally> t = tally(summaries);
  std::vector<double> percents;
  int full = 0;
  for (const nlohmann::json& s : summaries) {
    const double max = s.value("maximum", 0.0), total = s.value("total", 0.0);
    percents.push_back(max > 0 ? 100 * total / max : 0);
    full += max > 0 && total >= max - 1e-9;
  }
  std::sort(percents.begin(), percents.end());
  std::ostringstream out;
  out << "\nthe class: " << summaries.size() << " submission" << (summaries.size() == 1 ? "" : "s");
  if (!percents.empty()) {
    double mean = 0;
    for (double p : percents) mean += p;
    mean /= percents.size();
    const size_t n = percents.size();
    const double median = n % 2 ? percents[n / 2] : (percents[n / 2 - 1] + percents[n / 2]) / 2;
    out << std::fixed << std::setprecision(1) << ", mean " << mean << "%, median " << median << "%, " << full
        << " with full marks";
  }
  out << "\n\n";
  size_t title_width = 6;
  for (const Lesson* l : lessons) title_width = std::max(title_width, l->title.size());
  const int w = static_cast<int>(title_width + 1);
  out << "  " << std::left << std::setw(3) << "#" << std::setw(w) << "lesson" << std::right << std::setw(7) << "passed"
      << std::setw(12) << "in progress" << std::setw(12) << "not started" << std::setw(9) << "no grade"
      << "  failing check met most often\n";
  for (const Lesson* l : lessons) {
    const auto it = t.find(l->number);
    const LessonTally x = it == t.end() ? LessonTally{} : it->second;
    out << "  " << std::left << std::setw(3) << l->number << std::setw(w) << l->title << std::right << std::setw(7)
        << x.passed << std::setw(12) << x.in_progress << std::setw(12) << x.not_started << std::setw(9) << x.no_grade
        << "  " << x.most_failed() << "\n";
  }
  out << "\n  no grade: does not compile, not submitted, out of time, or the workbook's error;\n"
         "  (N): how many submissions failed that check (a stub left as it was is not counted)\n";
  return out.str();
}

std::string class_index_html(const std::vector<const Lesson*>& lessons, const std::vector<nlohmann::json>& summaries,
                             const std::string& warning) {
  const std::map<int, LessonTally> t = tally(summaries);
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>GPU Training Workbook: the class</title>\n"
       "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse;"
       "margin:1em 0}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}td.n{text-align:right}"
       ".warn{background:#fff4e5;padding:.6em;border-left:4px solid #d97706;white-space:pre-wrap}</style></head>\n<body>\n"
       "<h1>GPU Training Workbook: the class</h1>\n";
  if (!warning.empty()) h << "<p class=\"warn\">" << html(warning) << "</p>\n";
  h << "<h2>Lessons</h2>\n<table>\n<thead><tr><th>#</th><th>lesson</th><th>passed</th><th>in progress</th>"
       "<th>not started</th><th>no grade</th><th>failing check met most often</th></tr></thead>\n<tbody>\n";
  for (const Lesson* l : lessons) {
    const auto it = t.find(l->number);
    const LessonTally x = it == t.end() ? LessonTally{} : it->second;
    h << "<tr><td class=\"n\">" << l->number << "</td><td>" << html(l->title) << "</td><td class=\"n\">" << x.passed
      << "</td><td class=\"n\">" << x.in_progress << "</td><td class=\"n\">" << x.not_started << "</td><td class=\"n\">"
      << x.no_grade << "</td><td>" << html(x.most_failed()) << "</td></tr>\n";
  }
  h << "</tbody></table>\n<h2>Submissions</h2>\n<table>\n<thead><tr><th>submission</th><th>points</th><th>of</th>"
       "<th>percent</th><th>problems</th><th>seed</th></tr></thead>\n<tbody>\n";
  for (const nlohmann::json& s : summaries) {
    const std::string name = s.value("submission", "");
    const double total = s.value("total", 0.0), max = s.value("maximum", 0.0);
    h << "<tr><td><a href=\"" << html(url_segment(name)) << "/report.html\">" << html(name) << "</a></td><td class=\"n\">"
      << points_text(total) << "</td><td class=\"n\">" << points_text(max) << "</td><td class=\"n\">"
      << percent_text(total, max) << "%</td><td>" << html(s.value("problems", "")) << "</td><td class=\"n\">"
      << s.value("seed", uint64_t{0}) << "</td></tr>\n";
  }
  h << "</tbody></table>\n<p>Points follow each lesson's lesson.json (\"points\", \"check_points\"; one point per check "
       "by default), as in gradebook.csv and each results.json.</p>\n</body></html>\n";
  return h.str();
}

}  // namespace workbook
