#include "grade.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>

#include "build.h"
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

uint64_t sum_counter(const LessonResult& r, const char* who, const char* key) {
  uint64_t total = 0;
  for (const CheckResult& c : r.checks) {
    if (!c.details.contains("counters")) continue;
    for (const auto& [device, counters] : c.details["counters"][who].items()) total += counters.value(key, uint64_t{0});
  }
  return total;
}

// "launches 31 (ref 31), syncs 4 (ref 4)" over every check that counted.
std::string counters_text(const LessonResult& r) {
  bool any = false;
  for (const CheckResult& c : r.checks) any = any || c.details.contains("counters");
  if (!any) return "-";
  std::ostringstream s;
  s << "syncs " << sum_counter(r, "yours", "synchronizations") << " (ref "
    << sum_counter(r, "reference", "synchronizations") << "), launches " << sum_counter(r, "yours", "kernel_launches")
    << " (ref " << sum_counter(r, "reference", "kernel_launches") << ")";
  return s.str();
}

std::string timing_text(const LessonResult& r) {
  for (const CheckResult& c : r.checks) {
    if (!c.timed) continue;
    if (c.note.rfind("timing inconclusive", 0) == 0) return "inconclusive";
    if (c.details.contains("timing")) {
      std::ostringstream s;
      s << std::fixed << std::setprecision(2) << c.details["timing"].value("ratio", 0.0) << "x";
      return s.str();
    }
  }
  return "-";
}

}  // namespace

std::vector<CheckInfo> list_checks(const Lesson& lesson) {
  const std::string command = "'" + lesson.checks.string() + "' --list";
  std::string text;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) text.append(buf, n);
    pclose(pipe);
  }
  std::vector<CheckInfo> out;
  try {
    const nlohmann::json doc = nlohmann::json::parse(text);
    for (const auto& c : doc.at("checks")) out.push_back({c.at("name"), c.at("summary"), c.at("timed")});
  } catch (const std::exception&) {
    // A checker that cannot list its checks leaves the list empty; grading reports the checker's failure.
  }
  return out;
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

LessonResult grade_lesson(const Recipe& recipe, const Lesson& lesson, const fs::path& lessons_dir,
                          const fs::path& build_dir, const fs::path& work_dir, const GradeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  LessonResult r;
  r.lesson = &lesson;
  auto finish = [&]() {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  // Without a runner every check fails with the same reason (so the lesson's maximum score stays the same).
  auto fail_all = [&](const std::string& status, const std::string& problem) {
    r.status = status;
    r.problem = problem;
    for (const CheckInfo& info : list_checks(lesson)) {
      r.checks.push_back({info.name, info.summary, "fail", status + (problem.empty() ? "" : ":\n" + problem), "",
                          info.timed, 0, nlohmann::json::object()});
      ++r.total;
    }
    return finish();
  };
  if (!fs::exists(lessons_dir / lesson.folder / "exercise.cpp")) {
    return fail_all("not submitted", "no " + lesson.folder + "/exercise.cpp in " + lessons_dir.string());
  }
  const BuildResult built = build_student(recipe, lesson, lessons_dir, build_dir);
  if (!built.ok) return fail_all("does not compile", built.log);
  fs::create_directories(work_dir);
  const fs::path json = work_dir / ("lesson_" + std::to_string(lesson.number) + ".json");
  std::error_code ec;
  fs::remove(json, ec);
  ProcessOptions p;
  p.argv = {lesson.checks.string(), "--student", built.runner.string(), "--reference", lesson.reference.string(),
            "--seed", std::to_string(options.seed), "--json", json.string()};
  if (!options.timing) p.argv.push_back("--no-timing");
  if (options.run_timeout_s > 0) {
    p.argv.push_back("--timeout");
    p.argv.push_back(std::to_string(options.run_timeout_s));
  }
  p.timeout_s = options.lesson_timeout_s;
  if (options.verbose) {
    p.passthrough = true;
  } else {
    p.log = work_dir / ("lesson_" + std::to_string(lesson.number) + ".log");
  }
  const ProcessResult ran = run_process(p);
  nlohmann::json doc;
  try {
    std::ifstream in(json);
    doc = nlohmann::json::parse(in);
  } catch (const std::exception&) {
    r.status = "error";
    r.problem = "the checker " + ran.describe() + " without results (a bug in the workbook)\n" + ran.log_tail;
    return finish();
  }
  if (doc.contains("devices") && doc["devices"].is_array()) r.devices = doc["devices"];
  for (const auto& c : doc.at("checks")) {
    CheckResult cr;
    cr.name = c.at("name");
    cr.summary = c.at("summary");
    cr.verdict = c.at("verdict");
    cr.message = c.at("message");
    cr.note = c.at("note");
    cr.timed = c.at("timed");
    cr.seconds = c.at("seconds");
    cr.details = c.at("details");
    if (cr.verdict != "skip") ++r.total;
    r.passed += cr.verdict == "pass";
    r.todo += cr.verdict == "todo";
    r.checks.push_back(cr);
  }
  if (r.total > 0 && r.passed == r.total) {
    r.status = "passed";
  } else if (r.total > 0 && r.todo == r.total) {
    r.status = "not started";
  } else if (r.total == 0) {
    r.status = "skipped";
  } else {
    r.status = "in progress";
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
  out << "\nGPU Training Workbook: lessons checked with seed " << seed << " (rerun with --seed " << seed
      << " to repeat)\n\n";
  out << "  " << std::left << std::setw(3) << "#" << std::setw(36) << "lesson" << std::setw(18) << "status"
      << std::setw(8) << "checks" << std::setw(7) << "score" << std::setw(14) << "speed vs ref" << "GPU work (yours vs reference)\n";
  for (const LessonResult& r : results) {
    std::ostringstream checks, score;
    if (r.total > 0) checks << r.passed << "/" << r.total;
    score << static_cast<int>(r.score() * 100 + 0.5) << "%";
    out << "  " << std::setw(3) << r.lesson->number << std::setw(36) << r.lesson->title.substr(0, 35)
        << (color ? status_color(r.status) : "") << std::setw(18) << r.status << (color ? kReset : "")
        << std::setw(8) << checks.str() << std::setw(7) << score.str() << std::setw(14) << timing_text(r)
        << counters_text(r) << "\n";
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
    out << (results.size() == 1 ? "This lesson passes. Well done.\n" : "Every lesson checked here passes. Well done.\n");
    return;
  }
  print_next(out, *next);
}

void print_next(std::ostream& out, const LessonResult& result) {
  const LessonResult* next = &result;
  const Lesson& l = *next->lesson;
  out << "Next: lesson " << l.number << ", " << l.title << " (about " << l.minutes << " min): read lessons/" << l.folder
      << "/README.md and fill in lessons/" << l.folder << "/exercise.cpp\n";
  if (next->status == "does not compile") {
    out << "  it does not compile yet:\n" << indent(first_lines(next->problem, 12), "    ");
  } else if (next->status == "error") {
    out << indent(first_lines(next->problem, 12), "  ");
  } else if (const CheckResult* c = next->first_problem()) {
    out << "  " << (c->verdict == "todo" ? "to do" : "first problem") << ": " << c->name << ": "
        << indent(first_lines(c->message, 10), "    ").substr(4);
  }
  out << "  check it with ./workbook check " << l.number << "; stuck? ./workbook hint " << l.number << "\n";
}

nlohmann::json gradescope_results(const std::vector<LessonResult>& results, double seconds, uint64_t seed,
                                  const std::string& quiz) {
  nlohmann::json doc;
  nlohmann::json tests = nlohmann::json::array();
  double score = 0;
  for (const LessonResult& r : results) {
    const std::string lesson = "lesson " + std::to_string(r.lesson->number) + " (" + r.lesson->title + ")";
    const std::string tag = "lesson_" + std::to_string(r.lesson->number);
    if (r.checks.empty()) {  // the checker itself failed
      tests.push_back({{"name", lesson}, {"score", 0}, {"max_score", 1}, {"status", "failed"},
                       {"output", r.status + (r.problem.empty() ? "" : ":\n" + r.problem)}, {"tags", {tag}}});
      continue;
    }
    for (const CheckResult& c : r.checks) {
      if (c.verdict == "skip") continue;
      const bool pass = c.verdict == "pass";
      std::string output = c.summary;
      if (!c.message.empty()) output += "\n" + c.message;
      if (!c.note.empty()) output += "\n" + c.note;
      tests.push_back({{"name", lesson + ": " + c.name}, {"score", pass ? 1 : 0}, {"max_score", 1},
                       {"status", pass ? "passed" : "failed"}, {"output", output}, {"tags", {tag}}});
      score += pass ? 1 : 0;
    }
  }
  doc["score"] = score;
  doc["execution_time"] = static_cast<int>(seconds + 0.5);
  doc["output"] = "Checked with seed " + std::to_string(seed) + "." +
                  (quiz.empty() ? std::string() : "\n\nquiz.txt (not graded):\n" + quiz);
  doc["tests"] = tests;
  return doc;
}

}  // namespace workbook
