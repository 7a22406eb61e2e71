#include "grade.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>

#include "build.h"
#include "harness/bundle.h"
#include "harness/output_of.h"
#include "harness/process.h"

namespace workbook {

namespace fs = std::filesystem;

namespace {

const char* kReset = "\033[0m";

const char* status_color(const std::string& status) {
  if (status == "passed") return "\033[32m";
  if (status == "not started" || status == "skipped") return "\033[2m";
  if (status == "in progress") return "\033[33m";
  return "\033[31m";
}

std::string first_lines(const std::string& text, size_t n) {
  std::istringstream in(text);
  std::string line, out;
  for (size_t i = 0; i < n && std::getline(in, line); ++i) out += line + "\n";
  return out;
}

std::string indent(const std::string& text, const std::string& pad) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) out += pad + line + "\n";
  return out;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) b /= 1024, ++u;
  std::ostringstream s;
  s << std::setprecision(u == 0 ? 6 : 3) << b << " " << units[u];
  return s.str();
}

// How the scoreboard shows a counter of WORKBOOK_LESSON_COUNTERS.
struct CounterView {
  const char* key;
  const char* label;
  bool bytes;  // shown as KiB, MiB
  bool peak;   // the largest of the checks, not their sum
};
const CounterView kCounterViews[] = {
    {"synchronizations", "syncs", false, false},
    {"kernel_launches", "launches", false, false},
    {"bytes_host_to_device", "to GPU", true, false},
    {"bytes_host_to_device_pinned", "pinned to GPU", true, false},
    {"bytes_host_to_device_pageable", "pageable to GPU", true, false},
    {"bytes_device_to_host", "to CPU", true, false},
    {"bytes_device_to_host_pinned", "pinned to CPU", true, false},
    {"bytes_device_to_host_pageable", "pageable to CPU", true, false},
    {"bytes_device_to_device", "GPU to GPU", true, false},
    {"device_mallocs", "device mallocs", false, false},
    {"max_memory_allocated", "peak memory", true, true},
};

double counter_value(const nlohmann::json& counters, const std::string& key) {
  if (key == "bytes_host_to_device" || key == "bytes_device_to_host") {
    return counter_value(counters, key + "_pageable") + counter_value(counters, key + "_pinned");
  }
  const auto it = counters.find(key);
  return it != counters.end() && it->is_number() ? it->get<double>() : 0.0;
}

// One counter over every check that counted, summed over the devices: checks summed, or their peak.
double counter_total(const LessonResult& r, const char* who, const std::string& key, bool peak) {
  double total = 0;
  for (const CheckResult& c : r.checks) {
    if (!c.details.is_object() || !c.details.contains("counters") || !c.details["counters"].contains(who)) continue;
    double check = 0;
    for (const auto& [device, counters] : c.details["counters"][who].items()) {
      if (counters.is_object()) check += counter_value(counters, key);
    }
    total = peak ? std::max(total, check) : total + check;
  }
  return total;
}

// "syncs 24 (ref 24), pinned to GPU 90.2 KiB (ref 90.2 KiB)": only the counters
// the lesson is about, over every check that counted; "-" when none apply.
std::string counters_text(const LessonResult& r) {
  bool any = false;
  for (const CheckResult& c : r.checks) any = any || (c.details.is_object() && c.details.contains("counters"));
  if (!any || r.counters_shown.empty()) return "-";
  std::ostringstream s;
  for (const std::string& key : r.counters_shown) {
    CounterView view{key.c_str(), key.c_str(), key.find("bytes") != std::string::npos, key.rfind("max_", 0) == 0};
    for (const CounterView& v : kCounterViews) {
      if (key == v.key) view = v;
    }
    auto shown = [&](double v) {
      return view.bytes ? human_bytes(v) : std::to_string(static_cast<unsigned long long>(v));
    };
    if (s.tellp() > 0) s << ", ";
    s << view.label << " " << shown(counter_total(r, "yours", key, view.peak)) << " (ref "
      << shown(counter_total(r, "reference", key, view.peak)) << ")";
  }
  return s.str();
}

double median_of(const nlohmann::json& values) {
  std::vector<double> v;
  if (values.is_array()) {
    for (const auto& x : values) {
      if (x.is_number()) v.push_back(x.get<double>());
    }
  }
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// "1.23x": your median time over the reference's, the figures the check's note shows.
// A timed check's (WORKBOOK_TIMED_CHECK: host time or modelled) first; else any
// check that was judged on modelled speed and says so in details["timing"]
// (lesson 9's fixed_program is not a timed check, so that --no-timing keeps it,
// but its verdict is its speed against the reference's).
std::string timing_text(const LessonResult& r) {
  for (const bool timed_only : {true, false}) {
    for (const CheckResult& c : r.checks) {
      if (timed_only && !c.timed) continue;
      if (c.timed && c.note.rfind("timing inconclusive", 0) == 0) return "inconclusive";
      if (c.details.is_object() && c.details.contains("timing") && c.details["timing"].is_object()) {
        const nlohmann::json& t = c.details["timing"];
        const double yours = median_of(t.value("yours_ms", nlohmann::json::array()));
        const double ref = median_of(t.value("reference_ms", nlohmann::json::array()));
        const double ratio = yours > 0 && ref > 0 ? yours / ref : t.value("ratio", 0.0);
        std::ostringstream s;
        s << std::fixed << std::setprecision(2) << ratio << "x";
        return s.str();
      }
    }
  }
  return "-";
}

// Builds the lesson's runner; with options.progress, says so first when it must (compiling takes seconds).
BuildResult build_saying_so(const Recipe& recipe, const Lesson& lesson, const fs::path& lessons_dir,
                            const fs::path& build_dir, const GradeOptions& options) {
  std::error_code ec;
  const bool own = fs::equivalent(lessons_dir, recipe.source_dir / "lessons", ec);
  return build_student(recipe, lesson, lessons_dir, build_dir, [&]() {
    if (!options.progress) return;
    const std::string file = own ? "your exercise.cpp" : (lessons_dir / lesson.folder / "exercise.cpp").string();
    std::fflush(stdout);
    std::fprintf(stderr, "building lesson %d with %s ...\n", lesson.number, file.c_str());
    std::fflush(stderr);
  }, options.lesson_budget_s > 0 ? std::min(300.0, options.lesson_budget_s) : 300.0);
}

// The most of a compiler's output (quoting the student's file) or of another
// lesson-wide problem kept for the scoreboard, results.json and the report.
constexpr size_t kMaxProblemBytes = 4 * kMaxMessageBytes;
// The most of a checker's JSON that is read (its messages and details are bounded: this is far above them).
constexpr size_t kMaxCheckerJsonBytes = size_t{64} << 20;

// "" when `file` (exercise.cpp of a lesson) can be compiled: a plain file (or,
// in the student's own tree, a link to one); else why not, in a student's words.
std::string not_a_source_file(const fs::path& file, bool own_tree) {
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(file, ec);
  if (fs::is_symlink(link) && !own_tree) {
    return file.string() + " is a symbolic link: submit the file itself";
  }
  const fs::file_status st = fs::status(file, ec);
  if (fs::is_regular_file(st)) return "";
  const std::string kind = fs::is_directory(st) ? "a folder"
                           : fs::is_fifo(st)    ? "a FIFO (a named pipe)"
                           : fs::is_socket(st)  ? "a socket"
                           : fs::is_block_file(st) || fs::is_character_file(st) ? "a device"
                           : ec || !fs::exists(st) ? "a link to nothing"
                                                   : "not a plain file";
  return file.string() + " is " + kind + ", not a file of C++ source: exercise.cpp must be a plain file";
}

// A string field of a checker's JSON, bounded (the checker bounds them too).
std::string text_of(const nlohmann::json& c, const char* key) { return cut_text(c.at(key).get<std::string>()); }

// The checker's JSON into r: its checks, the counters it is about, the devices; the status they add up to.
void read_checker_results(const nlohmann::json& doc, LessonResult& r, uint64_t seed) {
  if (doc.contains("devices") && doc["devices"].is_array()) r.devices = doc["devices"];
  if (doc.contains("timed_out") && doc["timed_out"].is_string()) r.timed_out = text_of(doc, "timed_out");
  if (doc.contains("reference_runs") && doc["reference_runs"].is_number_integer()) {
    r.reference_runs = doc["reference_runs"];
  }
  if (doc.contains("reference_cache_hits") && doc["reference_cache_hits"].is_number_integer()) {
    r.reference_cache_hits = doc["reference_cache_hits"];
  }
  if (doc.contains("counters_shown") && doc["counters_shown"].is_array()) {
    for (const auto& name : doc["counters_shown"]) {
      if (name.is_string()) r.counters_shown.push_back(name);
    }
  }
  int errors = 0;
  for (const auto& c : doc.at("checks")) {
    CheckResult cr;
    cr.name = c.at("name");
    cr.summary = c.at("summary");
    cr.verdict = c.at("verdict");
    cr.message = text_of(c, "message");
    cr.note = text_of(c, "note");
    cr.timed = c.at("timed");
    cr.seconds = c.at("seconds");
    cr.details = c.at("details");
    if (cr.verdict != "skip") ++r.total;
    r.passed += cr.verdict == "pass";
    r.todo += cr.verdict == "todo";
    errors += cr.verdict == "error";
    r.checks.push_back(cr);
  }
  const std::string number = std::to_string(r.lesson->number);
  if (errors > 0) {
    // The workbook failed (a runner that could not start, a broken reference): not the student's doing.
    r.status = "error";
    r.problem = std::to_string(errors) + (errors == 1 ? " check" : " checks") + " of lesson " + number +
                " could not be run by the workbook (its fault, not your code's; their ERROR lines say what "
                "happened): run ./workbook check " + number + " again; if it happens again, please report it with "
                "the seed " + std::to_string(seed) + "\n";
  } else if (doc.value("deadline_hit", false) && r.passed < r.total) {
    // The submission's --deadline stopped the checks, not a mistake of the student's.
    r.status = "out of time";
    r.problem = "the time for grading this submission (the grader's --deadline) ran out during lesson " + number +
                ": its checks from then on were not run\n";
  } else if (r.total > 0 && r.passed == r.total) {
    r.status = "passed";
  } else if (r.total > 0 && r.todo == r.total) {
    r.status = "not started";
  } else if (r.total == 0) {
    r.status = "skipped";
  } else {
    r.status = "in progress";
  }
}

}  // namespace

std::vector<CheckInfo> list_checks(const Lesson& lesson) {
  // An argument vector, no shell: a quote or a space in the build folder's path is part of the path.
  const std::string text = output_of({lesson.checks.string(), "--list"}).out;
  std::vector<CheckInfo> out;
  try {
    const nlohmann::json doc = nlohmann::json::parse(text);
    for (const auto& c : doc.at("checks")) out.push_back({c.at("name"), c.at("summary"), c.at("timed")});
  } catch (const std::exception&) {
    // A checker that cannot list its checks leaves the list empty; grading reports the checker's failure.
  }
  return out;
}

void assign_points(LessonResult& r) {
  const Lesson& l = *r.lesson;
  r.points = r.max_points = 0;
  if (r.checks.empty()) {  // the checker could not even list its checks: the lesson is still worth its points
    r.max_points = l.points > 0 ? l.points : 1;
    return;
  }
  std::string unknown, field = "check_points";
  auto look_up = [&](const std::string& name, const char* in) {
    const bool known = std::any_of(r.checks.begin(), r.checks.end(), [&](const CheckResult& c) { return c.name == name; });
    if (known) return;
    if (unknown.empty()) field = in;
    unknown += (unknown.empty() ? "\"" : ", \"") + name + "\"";
  };
  for (const auto& entry : l.check_points) look_up(entry.first, "check_points");
  for (const auto& entry : l.check_visibility) look_up(entry.first, "check_visibility");
  double weights = 0;
  for (CheckResult& c : r.checks) {
    const auto it = l.check_points.find(c.name);
    c.max_points = c.verdict == "skip" ? 0 : it != l.check_points.end() ? it->second : 1.0;
    weights += c.max_points;
  }
  const double scale = l.points > 0 && weights > 0 ? l.points / weights : 1.0;
  for (CheckResult& c : r.checks) {
    c.max_points *= scale;
    c.points = c.verdict == "pass" && unknown.empty() ? c.max_points : 0;
    r.points += c.points;
    r.max_points += c.max_points;
  }
  if (!unknown.empty()) {
    // The instructor's weighting is wrong: loud, on this lesson only, and its maximum unchanged.
    std::string names;
    for (const CheckResult& c : r.checks) names += " " + c.name;
    r.status = "error";
    r.problem = "lessons/" + l.folder + "/lesson.json: '" + field + "' names " + unknown + ", not a check of lesson " +
                std::to_string(l.number) + " (its checks:" + names + "): correct the name, then grade again\n";
  }
}

std::string points_text(double points) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", points);
  std::string text = buf;
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text == "-0" ? "0" : text;
}

const CheckResult* LessonResult::first_problem() const {
  for (const CheckResult& c : checks) {
    if (c.verdict != "pass" && c.verdict != "skip") return &c;
  }
  return nullptr;
}

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32 | rd()) % 1000000000000ull;
}

bool use_color() { return isatty(1) && std::getenv("NO_COLOR") == nullptr; }

namespace {

// grade_lesson once the lesson's exercise.cpp is known to be there: build, run the checker, read its JSON.
void build_and_check(const Recipe& recipe, const Lesson& lesson, const fs::path& lessons_dir, const fs::path& build_dir,
                     const fs::path& work_dir, const GradeOptions& options, LessonResult& r,
                     const std::function<void(const std::string&, const std::string&)>& fail_all) {
  std::error_code ec;
  // Held until the last check has run: another process must not rebuild the runner under it.
  const std::string waiting = "waiting for another check of lesson " + std::to_string(lesson.number) + " to finish";
  const LessonLock lock(build_dir / lesson.folder, options.progress ? waiting : "");
  const auto started = std::chrono::steady_clock::now();
  auto budget_left = [&]() {
    return options.lesson_budget_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  const BuildResult built = build_saying_so(recipe, lesson, lessons_dir, build_dir, options);
  if (built.out_of_time) {
    // Not the student's compile error: the deadline left too little time to compile.
    return fail_all("out of time", "the time for grading this submission (the grader's --deadline) ran out while "
                                   "lesson " + std::to_string(lesson.number) + " was compiled");
  }
  if (!built.ok) return fail_all("does not compile", built.log);
  if (options.lesson_budget_s > 0 && budget_left() < 1) {
    return fail_all("out of time", "the time for grading this submission (the grader's --deadline) ran out while "
                                   "lesson " + std::to_string(lesson.number) + " was compiled");
  }
  r.warnings = cut_text(built.warnings, kMaxProblemBytes);
  if (options.verbose && !r.warnings.empty()) {
    print_warnings(std::cout, r.warnings);
    std::cout.flush();
  }
  fs::create_directories(work_dir);
  const fs::path json = work_dir / ("lesson_" + std::to_string(lesson.number) + ".json");
  fs::remove(json, ec);
  ProcessOptions p;
  p.argv = {lesson.checks.string(), "--student", built.runner.string(), "--reference", lesson.reference.string(),
            "--seed", std::to_string(options.seed), "--json", json.string()};
  if (!options.timing) p.argv.push_back("--no-timing");
  if (!options.reference_cache.empty()) {
    p.argv.push_back("--reference-cache");
    p.argv.push_back(options.reference_cache.string());
  }
  if (options.run_timeout_s > 0) {
    p.argv.push_back("--timeout");
    p.argv.push_back(std::to_string(options.run_timeout_s));
  }
  p.timeout_s = options.lesson_timeout_s;
  if (options.lesson_budget_s > 0) {
    // The checker cuts its runs to what is left and stops starting them after; the
    // grace lets it write its results before the grader would stop it.
    p.argv.push_back("--deadline");
    p.argv.push_back(std::to_string(budget_left()));
    p.timeout_s = std::min(p.timeout_s, budget_left() + 30);
  }
  std::fflush(stdout);
  if (options.verbose) {
    p.passthrough = true;
  } else {
    p.log = work_dir / ("lesson_" + std::to_string(lesson.number) + ".log");
  }
  const ProcessResult ran = run_process(p);
  nlohmann::json doc;
  try {
    const uintmax_t size = fs::file_size(json);
    TINY_CHECK(size <= kMaxCheckerJsonBytes, IOError, json.string(), " is ", bytes_text(size), ", more than the ",
               bytes_text(kMaxCheckerJsonBytes), " the grader reads");
    std::ifstream in(json);
    doc = nlohmann::json::parse(in);
    read_checker_results(doc, r, options.seed);
  } catch (const std::exception& e) {
    const std::string warnings = r.warnings;
    r = LessonResult{};
    r.lesson = &lesson;
    r.warnings = warnings;
    r.status = "error";
    r.problem = "the checker " + ran.describe() + " without results (a bug in the workbook: " + cut_text(e.what(), 512) +
                ")\n" + ran.log_tail;
  }
}

}  // namespace

LessonResult grade_lesson(const Recipe& recipe, const Lesson& lesson, const fs::path& lessons_dir,
                          const fs::path& build_dir, const fs::path& work_dir, const GradeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  LessonResult r;
  r.lesson = &lesson;
  std::error_code ec;
  auto finish = [&]() {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    assign_points(r);
    return r;
  };
  // Without a runner every check fails with the same reason (so the lesson's
  // maximum score stays the same); what a compiler quoted of the student's file is bounded.
  auto fail_all = [&](const std::string& status, const std::string& problem) {
    r.status = status;
    r.problem = cut_text(problem, kMaxProblemBytes);
    r.checks.clear();
    r.passed = r.total = r.todo = 0;
    const std::string verdict = status == "error" ? "error" : "fail";
    const std::string message = cut_text(status + (problem.empty() ? "" : ":\n" + r.problem));
    for (const CheckInfo& info : list_checks(lesson)) {
      r.checks.push_back({info.name, info.summary, verdict, message, "", info.timed, 0, nlohmann::json::object()});
      ++r.total;
    }
  };
  if (options.out_of_time) {
    fail_all("out of time", "the time for grading this submission (the grader's --deadline) ran out before lesson " +
                                std::to_string(lesson.number) + " was reached");
    return finish();
  }
  if (!lesson.problem.empty()) {
    // The workbook's own lesson.json is damaged: this lesson cannot be graded, the others can.
    fail_all("error", lesson.problem);
    return finish();
  }
  if (!options.not_submitted.empty()) {
    fail_all("not submitted", options.not_submitted);
    return finish();
  }
  const fs::path source = lessons_dir / lesson.folder / "exercise.cpp";
  if (!fs::exists(fs::symlink_status(source, ec))) {
    fail_all("not submitted", "no " + lesson.folder + "/exercise.cpp in " + lessons_dir.string());
    return finish();
  }
  const bool own_tree = fs::equivalent(lessons_dir, recipe.source_dir / "lessons", ec);
  if (const std::string why = not_a_source_file(source, own_tree); !why.empty()) {
    fail_all("not submitted", why);
    return finish();
  }
  try {
    build_and_check(recipe, lesson, lessons_dir, build_dir, work_dir, options, r, fail_all);
  } catch (const std::exception& e) {
    // Whatever went wrong stops this lesson only; the grading goes on.
    fail_all("error", "lesson " + std::to_string(lesson.number) + " could not be graded: " + cut_text(e.what(), 1024));
  }
  return finish();
}

void print_checks(std::ostream& out, const LessonResult& r, bool color) {
  for (const CheckResult& c : r.checks) {
    std::string tag = c.verdict == "pass" ? "PASS" : c.verdict == "fail" ? "FAIL" : c.verdict == "todo" ? "TODO"
                                           : c.verdict == "skip" ? "SKIP" : "ERROR";
    const char* col = c.verdict == "pass" ? "\033[32m" : c.verdict == "todo" ? "\033[33m" : c.verdict == "skip" ? "\033[36m" : "\033[31m";
    out << "    " << (color ? col : "") << std::left << std::setw(5) << tag << (color ? kReset : "") << " " << c.name
        << ": " << c.summary << "\n";
    if (!c.message.empty() && c.verdict != "pass") out << indent(c.message, "          ");
    if (!c.note.empty()) out << indent(c.note, "          ");
  }
}

void print_scoreboard(std::ostream& out, const std::vector<LessonResult>& results, uint64_t seed, bool color) {
  out << "\nGPU Training Workbook, seed " << seed << " (repeat it with --seed " << seed << ")\n\n";
  size_t title_width = std::string("lesson").size();
  for (const LessonResult& r : results) title_width = std::max(title_width, r.lesson->title.size());
  const int title_column = static_cast<int>(title_width + 1);  // titles are never cut
  // One row per lesson, narrow enough for an 80-column terminal; a lesson's GPU
  // work, when its checks count any, goes on the line below its title.
  out << "  " << std::left << std::setw(3) << "#" << std::setw(title_column) << "lesson" << std::setw(17) << "status"
      << std::setw(7) << "checks" << std::setw(6) << "score" << "time\n";
  for (const LessonResult& r : results) {
    std::ostringstream checks, score;
    if (r.total > 0) checks << r.passed << "/" << r.total;
    score << static_cast<int>(r.score() * 100 + 0.5) << "%";
    out << "  " << std::setw(3) << r.lesson->number << std::setw(title_column) << r.lesson->title
        << (color ? status_color(r.status) : "") << std::setw(17) << r.status << (color ? kReset : "")
        << std::setw(7) << checks.str() << std::setw(6) << score.str() << timing_text(r) << "\n";
    // Broken between counters, never inside one ("peak memory 8 KiB (ref 8 KiB)" stays whole).
    const std::string work = counters_text(r);
    if (work == "-") continue;
    std::string line = "     GPU work:";
    bool has_item = false;
    for (size_t at = 0; at < work.size(); at += 2) {
      size_t end = std::min(work.find(", ", at), work.size());
      const std::string item = work.substr(at, end - at) + (end < work.size() ? "," : "");
      if (has_item && line.size() + 1 + item.size() > 100) {
        out << line << "\n";
        line = "       ";
      }
      line += " " + item;
      has_item = true;
      at = end;
    }
    out << line << "\n";
  }
  bool any_work = false;
  for (const LessonResult& r : results) any_work = any_work || counters_text(r) != "-";
  out << "\n  time: your timed check's time over the reference's (under 1.00x is faster), in\n"
         "    modelled time on the emulated GPU: the same every run. -: no timed check\n";
  if (any_work) {
    out << "  GPU work: what your code made the GPU do in all the lesson's checks (copies,\n"
           "    waits, peak memory), beside the reference's; ./workbook check N shows each\n";
  }
  const LessonResult* next = nullptr;
  for (const LessonResult& r : results) {
    if (r.status != "passed" && r.status != "skipped") {
      next = &r;
      break;
    }
  }
  out << "\n";
  if (next == nullptr) {
    int ran = 0;
    for (const LessonResult& r : results) ran += r.total;
    if (results.empty()) {
      out << "No lesson was graded.\n";
    } else if (ran == 0) {
      // Nothing was checked, so nothing passed: no praise for that.
      out << "No check ran here: every check was skipped (its SKIP line says why).\n";
    } else {
      out << (results.size() == 1 ? "This lesson passes. Well done.\n" : "Every lesson checked here passes. Well done.\n");
    }
    return;
  }
  print_next(out, *next);
}

void print_next(std::ostream& out, const LessonResult& result) {
  const LessonResult* next = &result;
  const Lesson& l = *next->lesson;
  out << "Next: lesson " << l.number << ", " << l.title << " (about " << l.minutes << " min)\n"
      << "  read lessons/" << l.folder << "/README.md, then fill in lessons/" << l.folder << "/exercise.cpp\n";
  if (next->status == "does not compile") {
    out << "  it does not compile yet:\n" << indent(first_lines(next->problem, 12), "    ");
  } else if (next->status == "error") {
    out << indent(first_lines(next->problem, 12), "  ");
  } else if (const CheckResult* c = next->first_problem()) {
    // The message on lines of its own, whole (it names paths and values a student copies).
    out << "  " << (c->verdict == "todo" ? "to do" : "first problem") << ": " << c->name << ":\n"
        << indent(first_lines(c->message, 10), "    ");
  }
  out << "  check it with ./workbook check " << l.number << "; stuck? ./workbook hint " << l.number << "\n";
}

void print_warnings(std::ostream& out, const std::string& warnings) {
  if (warnings.empty()) return;
  out << "the compiler warns about your code:\n" << indent(warnings, "    ");
}

void print_watch_report(std::ostream& out, const LessonResult& r, int hints_seen, const std::string& when) {
  const Lesson& l = *r.lesson;
  out << "[" << when << "] lesson " << l.number << ": " << r.status;
  if (r.total > 0) out << ", " << r.passed << " of " << r.total << " checks pass";
  out << "\n";
  if (r.status == "does not compile") {
    out << indent(r.problem, "  ");
    return;
  }
  print_warnings(out, r.warnings);
  if (r.status == "error") {
    for (const CheckResult& c : r.checks) {
      if (c.verdict == "error") out << "  ERROR " << c.name << ":\n" << indent(c.message, "    ");
    }
    out << indent(r.problem, "  ");
    return;
  }
  const CheckResult* c = r.first_problem();
  if (c == nullptr) {
    out << "  all green: on to the next lesson (./workbook next)\n";
    return;
  }
  out << "  " << (c->verdict == "todo" ? "to do" : "first problem") << ": " << c->name << ": " << c->summary << "\n"
      << indent(c->message, "    ");
  // No hint unasked: the one shown is the last the student asked for (./workbook hint N moves on).
  const int count = static_cast<int>(l.hints.size());
  const std::string command = "./workbook hint " + std::to_string(l.number);
  if (count == 0) {
    out << "  stuck? lessons/" << l.folder << "/README.md explains each step\n";
    return;
  }
  const int seen = std::clamp(hints_seen, 0, count);
  if (seen > 0) out << "  hint " << seen << " of " << count << " (the last you asked for): " << l.hints[seen - 1] << "\n";
  if (seen < count) {
    out << "  stuck? " << command << " shows hint " << seen + 1 << " of " << count << "\n";
  } else {
    out << "  that was the last hint; " << command << " --all shows them all again\n";
  }
}

std::string gpus_needed(int gpus) {
  if (gpus <= 0) return "";
  // Said with the emulated GPU in mind: a laptop without an NVIDIA GPU can do every lesson.
  return gpus == 1 ? "needs a GPU (the emulated one will do)"
                   : "needs " + std::to_string(gpus) + " GPUs (the emulated ones will do)";
}

void print_lesson_list(std::ostream& out, const std::vector<Lesson>& lessons) {
  size_t title_width = 0, folder_width = 0;
  for (const Lesson& l : lessons) {
    title_width = std::max(title_width, l.title.size());
    folder_width = std::max(folder_width, ("lessons/" + l.folder).size());
  }
  for (const Lesson& l : lessons) {
    std::ostringstream minutes;
    minutes << "about " << std::setw(3) << std::right << l.minutes << " min";
    std::ostringstream line;
    line << std::left << std::setw(3) << l.number << std::setw(static_cast<int>(title_width + 2)) << l.title
         << minutes.str() << "  " << std::setw(static_cast<int>(folder_width + 2)) << ("lessons/" + l.folder)
         << (l.problem.empty() ? gpus_needed(l.gpus_required) : "lesson.json damaged: " + l.problem);
    std::string text = line.str();
    text.erase(text.find_last_not_of(' ') + 1);
    out << text << "\n";
  }
}

std::string visibility_of(const Lesson& l, const CheckResult& c) {
  const auto it = l.check_visibility.find(c.name);
  if (it != l.check_visibility.end()) return it->second;
  if (c.timed && !l.timed_visibility.empty()) return l.timed_visibility;
  return l.visibility.empty() ? "visible" : l.visibility;
}

nlohmann::json gradescope_results(const std::vector<LessonResult>& results, double seconds, uint64_t seed,
                                  const std::string& quiz, const SubmissionLayout* layout) {
  nlohmann::json doc;
  nlohmann::json tests = nlohmann::json::array();
  // Every output is plain text: C++ quoted in a message (std::vector<int>, <b>) is not HTML.
  auto item = [](const std::string& name, double score, double max_score, bool passed, const std::string& output,
                 const std::string& visibility, const std::string& tag) {
    nlohmann::json t = {{"name", name},          {"score", score},         {"max_score", max_score},
                        {"status", passed ? "passed" : "failed"}, {"output", output}, {"output_format", "text"},
                        {"visibility", visibility}};
    if (!tag.empty()) t["tags"] = {tag};
    return t;
  };
  if (layout != nullptr) {
    // First, so that a zero for "not submitted" always comes with what was found instead.
    tests.push_back(item("submission layout", 0, 0, layout->complete(), layout->text(), "visible", ""));
  }
  double score = 0;
  for (const LessonResult& r : results) {
    const std::string lesson = "lesson " + std::to_string(r.lesson->number) + " (" + r.lesson->title + ")";
    const std::string tag = "lesson_" + std::to_string(r.lesson->number);
    const std::string visibility = r.lesson->visibility.empty() ? "visible" : r.lesson->visibility;
    if (r.checks.empty()) {  // the checker itself failed
      tests.push_back(item(lesson, 0, r.max_points, false, r.status + (r.problem.empty() ? "" : ":\n" + r.problem),
                           visibility, tag));
      continue;
    }
    for (const CheckResult& c : r.checks) {
      if (c.verdict == "skip") continue;
      const bool pass = c.points > 0 || (c.verdict == "pass" && c.max_points == 0);
      std::string output = c.summary;
      if (!c.message.empty()) output += "\n" + c.message;
      if (!c.note.empty()) output += "\n" + c.note;
      // What stopped the whole lesson (the workbook's fault, the deadline), unless its message says it already.
      const bool lesson_wide = r.status == "error" || r.status == "out of time";
      if (lesson_wide && !r.problem.empty() && output.find(r.problem) == std::string::npos) output += "\n" + r.problem;
      tests.push_back(item(lesson + ": " + c.name, c.points, c.max_points, pass, output, visibility_of(*r.lesson, c), tag));
      score += c.points;
    }
  }
  doc["score"] = score;
  doc["execution_time"] = static_cast<int>(seconds + 0.5);
  doc["output"] = "Checked with seed " + std::to_string(seed) + "." +
                  (quiz.empty() ? std::string() : "\n\nquiz.txt (not graded):\n" + quiz);
  doc["output_format"] = "text";
  doc["test_output_format"] = "text";
  doc["test_name_format"] = "text";
  doc["tests"] = tests;
  return doc;
}

}  // namespace workbook
