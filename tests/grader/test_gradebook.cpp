// One weighting for every output (lesson.json's points), the gradebook's rows,
// read back by --resume, the class table and index.html, JUnit XML, and how a
// submission's deadline is shared among its lessons.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "batch.h"
#include "grade.h"
#include "gradebook.h"
#include "junit.h"
#include "recipe.h"
#include "report.h"

namespace {

namespace fs = std::filesystem;
using namespace workbook;

Lesson lesson(int number, const std::string& title) {
  Lesson l;
  l.number = number;
  l.title = title;
  l.folder = std::to_string(number) + "_lesson";
  return l;
}

CheckResult check(const std::string& name, const std::string& verdict, const std::string& message = "") {
  CheckResult c;
  c.name = name;
  c.summary = name + " works";
  c.verdict = verdict;
  c.message = message;
  return c;
}

// A lesson's result as grade_lesson makes it: checks, counts, status, then points.
LessonResult result(const Lesson& l, std::vector<CheckResult> checks, const std::string& status) {
  LessonResult r;
  r.lesson = &l;
  r.status = status;
  r.checks = std::move(checks);
  for (const CheckResult& c : r.checks) {
    if (c.verdict != "skip") ++r.total;
    r.passed += c.verdict == "pass";
    r.todo += c.verdict == "todo";
  }
  assign_points(r);
  return r;
}

double field_number(const std::string& row, size_t index) {
  std::vector<std::string> fields;
  std::string f;
  bool quoted = false;
  for (char c : row) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) fields.push_back(f), f.clear();
    else if (c != '\n') f += c;
  }
  fields.push_back(f);
  return std::stod(fields.at(index));
}

TEST(Points, OnePointPerCheckUnlessTheLessonSaysOtherwiseAndSkippedChecksCountForNothing) {
  const Lesson plain = lesson(1, "Plain");
  const LessonResult r = result(plain, {check("a", "pass"), check("b", "fail"), check("c", "skip")}, "in progress");
  EXPECT_DOUBLE_EQ(r.max_points, 2);
  EXPECT_DOUBLE_EQ(r.points, 1);
  EXPECT_DOUBLE_EQ(r.checks[2].max_points, 0);

  Lesson weighted = lesson(2, "Weighted");
  weighted.points = 10;
  weighted.check_points = {{"a", 3}};  // a: 3 parts of 4, b: 1 part, c: skipped
  const LessonResult w = result(weighted, {check("a", "pass"), check("b", "fail"), check("c", "skip")}, "in progress");
  EXPECT_DOUBLE_EQ(w.max_points, 10);
  EXPECT_DOUBLE_EQ(w.points, 7.5);
  EXPECT_DOUBLE_EQ(w.score(), 0.75);
}

TEST(Points, ACheckPointsNameThatIsNoCheckMakesTheLessonAnErrorNamingFileAndField) {
  Lesson l = lesson(3, "Typo");
  l.check_points = {{"trian_step", 5}};
  const LessonResult r = result(l, {check("train_step", "pass"), check("b", "pass")}, "passed");
  EXPECT_EQ(r.status, "error");
  EXPECT_NE(r.problem.find("lessons/3_lesson/lesson.json: 'check_points' names \"trian_step\""), std::string::npos)
      << r.problem;
  EXPECT_NE(r.problem.find("train_step"), std::string::npos);
  EXPECT_DOUBLE_EQ(r.points, 0);
  EXPECT_DOUBLE_EQ(r.max_points, 2);  // the maximum stays what it is
}

TEST(Points, ALessonWhoseChecksCouldNotBeListedIsStillWorthItsPoints) {
  Lesson l = lesson(4, "Broken");
  l.points = 12;
  EXPECT_DOUBLE_EQ(result(l, {}, "error").max_points, 12);
  EXPECT_DOUBLE_EQ(result(lesson(5, "Broken too"), {}, "error").max_points, 1);
}

TEST(Points, LessonJsonPointsThatAreNotPointsAreRefusedNamingTheField) {
  const fs::path dir = fs::temp_directory_path() / ("points_test_" + std::to_string(::getpid()));
  fs::create_directories(dir / "lessons" / "1_one");
  fs::create_directories(dir / "lessons" / "2_two");
  std::ofstream(dir / "lessons" / "1_one" / "lesson.json") << R"({"title": "One", "points": -3})";
  std::ofstream(dir / "lessons" / "2_two" / "lesson.json") << R"({"title": "Two", "check_points": {"a": "many"}})";
  std::ofstream(dir / "recipe.json") << R"({"source_dir": ")" << dir.string() << R"(", "build_dir": "b", "student_dir": "s",
    "launcher": "", "cxx": "c++", "flags": [], "defines": [], "include_dirs": [], "link": [],
    "lessons": [{"number": 1, "folder": "1_one", "glue": [], "reference": "r", "checks": "c", "demo_target": "d"},
                {"number": 2, "folder": "2_two", "glue": [], "reference": "r", "checks": "c", "demo_target": "d"}]})";
  const Recipe recipe = Recipe::load(dir / "recipe.json");
  fs::remove_all(dir);
  EXPECT_NE(recipe.lesson(1).problem.find("'points' must be a number of points from 0 to 1000000, got -3"),
            std::string::npos) << recipe.lesson(1).problem;
  EXPECT_NE(recipe.lesson(2).problem.find("'check_points.a' must be a number of points"), std::string::npos)
      << recipe.lesson(2).problem;
}

// Student 4 was 85.1% in results.json and 87.5% in the gradebook: one weighting now feeds both, and the report.
TEST(Gradebook, TheCsvResultsJsonAndTheReportAgreeOnTheTotal) {
  Lesson a = lesson(1, "Small"), b = lesson(2, "Big");
  b.points = 30;
  const std::vector<LessonResult> results = {
      result(a, {check("x", "pass"), check("y", "pass"), check("z", "fail")}, "in progress"),
      result(b, {check("p", "pass"), check("q", "todo"), check("r", "fail"), check("s", "pass")}, "in progress")};
  const nlohmann::json doc = gradescope_results(results, 1, 7, "");
  const std::string row = gradebook_row("alice", results, 7, 1);
  double max_score = 0;
  for (const auto& t : doc["tests"]) max_score += t["max_score"].get<double>();
  EXPECT_DOUBLE_EQ(doc["score"].get<double>(), 2 + 15);
  EXPECT_DOUBLE_EQ(field_number(row, 1), doc["score"].get<double>());
  EXPECT_DOUBLE_EQ(field_number(row, 2), max_score);
  EXPECT_DOUBLE_EQ(field_number(row, 3), 51.5);  // 17 of 33
  // The report's and the scoreboard's per-lesson percent are the same points.
  std::ostringstream board;
  print_scoreboard(board, results, 7, false);
  EXPECT_NE(board.str().find("50%"), std::string::npos) << board.str();  // lesson 2: 15 of 30
  const std::string html = html_report(results, 7, "t");
  EXPECT_NE(html.find(">50%<"), std::string::npos);
  EXPECT_NE(html.find(">15 of 30<"), std::string::npos);
  EXPECT_NE(html.find("Total: <b>17</b> of 33 points (51.5%)."), std::string::npos);
}

TEST(Gradebook, ProblemsAreTheGradersOwnWordsNeverTheSubmissions) {
  const Lesson l1 = lesson(1, "A"), l2 = lesson(2, "B"), l3 = lesson(3, "C"), l4 = lesson(4, "D");
  std::vector<LessonResult> results = {
      result(l1, {check("a", "fail", "lesson 9 does not compile; =cmd|' /C calc'!A0")}, "in progress"),
      result(l2, {check("a", "fail")}, "does not compile"), result(l3, {check("a", "fail")}, "not submitted"),
      result(l4, {check("a", "fail"), check("b", "fail", "was not run: ...")}, "in progress")};
  results[3].timed_out = "count_devices() in check a, stopped after 10.0 s";
  EXPECT_EQ(problems_text(results), "lesson 2 does not compile; lesson 3 not submitted; lesson 4 timed out");
}

TEST(Gradebook, ResumeReadsBackEveryWholeRowWhateverTheNamesHoldAndDropsOneCutShort) {
  const Lesson a = lesson(1, "A");
  const std::vector<const Lesson*> lessons = {&a};
  const std::vector<LessonResult> results = {result(a, {check("x", "pass")}, "passed")};
  const std::vector<std::string> names = {"plain", "with, comma", "with \"quotes\"", "two\nlines", "=HYPERLINK(\"x\")"};
  const fs::path file = fs::temp_directory_path() / ("gradebook_test_" + std::to_string(::getpid()) + ".csv");
  const std::string header = gradebook_header(lessons);
  write_gradebook(file, header, {});
  for (const std::string& n : names) append_row(file, gradebook_row(n, results, 123456789012, 3));
  std::string text;
  {
    std::ifstream in(file);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_NE(text.find("\"'=HYPERLINK(\"\"x\"\")\""), std::string::npos) << "a formula must not reach a spreadsheet as one";
  const std::string cut = gradebook_row("killed", results, 1, 1);
  std::ofstream(file, std::ios::app) << cut.substr(0, cut.size() / 2);
  const Gradebook g = read_gradebook(file, header);
  EXPECT_EQ(g.rows.size(), names.size());
  for (const std::string& n : names) EXPECT_EQ(g.submissions.count(n), 1u) << n;
  EXPECT_EQ(g.submissions.count("killed"), 0u);
  EXPECT_EQ(g.last_seed, 123456789012u);
  // Written back (as --resume does, without the row cut short), the rows read as they were written.
  write_gradebook(file, header, g.rows);
  std::string rewritten;
  {
    std::ifstream in(file);
    rewritten.assign(std::istreambuf_iterator<char>(in), {});
  }
  EXPECT_EQ(rewritten, text);
  // Another set of lessons is refused, naming the file and the fix.
  const Lesson b = lesson(2, "B");
  try {
    read_gradebook(file, gradebook_header({&a, &b}));
    ADD_FAILURE() << "a gradebook of other lessons was resumed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("grade the same lessons as before, or choose another --out"), std::string::npos)
        << e.what();
  }
  fs::remove(file);
}

TEST(ClassTable, CountsEachStatusAndNamesTheCheckFailedMostOften) {
  const Lesson a = lesson(1, "Device check"), b = lesson(2, "Moving tensors");
  const std::vector<const Lesson*> lessons = {&a, &b};
  std::vector<nlohmann::json> summaries;
  auto add = [&](const std::string& name, const std::string& sa, std::vector<CheckResult> ca, const std::string& sb,
                 std::vector<CheckResult> cb) {
    summaries.push_back(submission_summary(name, {result(a, ca, sa), result(b, cb, sb)}, 1, 1));
  };
  add("s1", "passed", {check("x", "pass"), check("y", "pass")}, "in progress", {check("p", "fail"), check("q", "pass")});
  add("s2", "in progress", {check("x", "pass"), check("y", "fail")}, "in progress", {check("p", "fail"), check("q", "fail")});
  add("s3", "not started", {check("x", "todo"), check("y", "todo")}, "does not compile", {check("p", "fail"), check("q", "fail")});
  const std::string table = class_table(lessons, summaries);
  std::string row1, row2;
  std::istringstream in(table);
  for (std::string line; std::getline(in, line);) {
    if (line.find("Device check") != std::string::npos) row1 = line;
    if (line.find("Moving tensors") != std::string::npos) row2 = line;
  }
  EXPECT_NE(row1.find("1           1           1        0  y (1)"), std::string::npos) << table;
  // s3's lesson 2 does not compile: its checks' failures say nothing about p and q.
  EXPECT_NE(row2.find("0           2           0        1  p (2)"), std::string::npos) << table;
  EXPECT_NE(table.find("the class: 3 submissions"), std::string::npos);
  // A tie goes to the check met first, not the first in the alphabet.
  const Lesson c = lesson(3, "Hang");
  const std::string tie = class_table(
      {&c}, {submission_summary("h", {result(c, {check("zeta", "fail"), check("alpha", "fail")}, "in progress")}, 1, 1)});
  EXPECT_NE(tie.find("zeta (1)"), std::string::npos) << tie;
}

TEST(ClassIndex, LinksEachReportAndEscapesEveryName) {
  const Lesson a = lesson(1, "A");
  const std::vector<nlohmann::json> summaries = {
      submission_summary("<script>alert(1)</script> & co", {result(a, {check("x", "pass")}, "passed")}, 5, 1),
      submission_summary("bob", {result(a, {check("x", "fail")}, "in progress")}, 5, 1)};
  const std::string page = class_index_html({&a}, summaries, "");
  EXPECT_EQ(page.find("<script>"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; co"), std::string::npos);
  EXPECT_NE(page.find("href=\"%3Cscript%3Ealert%281%29%3C%2Fscript%3E%20%26%20co/report.html\""), std::string::npos);
  EXPECT_NE(page.find("<a href=\"bob/report.html\">bob</a>"), std::string::npos);
}

TEST(Junit, ANamedSuiteFailureMessagesAndStubsSkippedWithTheirReason) {
  const Lesson a = lesson(1, "Device check");
  const std::vector<LessonResult> results = {result(
      a,
      {check("count_devices", "pass"), check("choose_device", "fail", "choose_device(\"cpu\") returned cuda:0\nexpected cpu"),
       check("describe_device", "todo", "lesson 1: describe the device\nsecond line"),
       check("two_gpus", "skip", "needs 2 GPUs; this machine shows 1")},
      "in progress")};
  const std::string xml = junit_xml(results, "alice", 42);
  EXPECT_NE(xml.find("<testsuites name=\"GPU Training Workbook: alice, seed 42\" tests=\"4\" failures=\"1\" errors=\"0\" "
                     "skipped=\"2\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<testsuite name=\"lesson_1 (Device check)\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<failure message=\"choose_device(&quot;cpu&quot;) returned cuda:0\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<skipped message=\"not done yet: lesson 1: describe the device\"/>"), std::string::npos) << xml;
  EXPECT_NE(xml.find("<skipped message=\"needs 2 GPUs; this machine shows 1\"/>"), std::string::npos) << xml;
}

TEST(Junit, WhateverAMessageHoldsTheDocumentStaysWellFormed) {
  const Lesson a = lesson(1, "A");
  const std::string hostile = std::string("]]></failure><x a=\"1\">&\x01\x1b[31m\xff\xfe bad \xed\xa0\x80 ok \xc3\xa9");
  const std::string xml = junit_xml({result(a, {check("x", "fail", hostile)}, "in progress")}, "e\x02vil\"<>", 1);
  EXPECT_EQ(xml.find("]]>"), std::string::npos);
  EXPECT_EQ(xml.find("<x "), std::string::npos);
  for (unsigned char c : xml) EXPECT_TRUE(c >= 0x20 || c == '\n') << "control byte " << int(c);
  EXPECT_NE(xml.find("\xc3\xa9"), std::string::npos) << "valid UTF-8 is kept";
  EXPECT_EQ(xml.find("\xff"), std::string::npos);
  EXPECT_EQ(xml.find("\xed\xa0\x80"), std::string::npos) << "a UTF-16 surrogate is not UTF-8";
}

TEST(Deadline, EachLessonGetsWhatIsLeftButAReserveForTheLessonsAfterIt) {
  EXPECT_DOUBLE_EQ(lesson_budget(600, 0), 600);
  EXPECT_DOUBLE_EQ(lesson_budget(600, 7), 600 - 7 * 30);
  EXPECT_DOUBLE_EQ(lesson_budget(300, 7), 300 - 7 * 30);
  // Little left: still a minute, enough to compile and check a lesson, or all there is.
  EXPECT_DOUBLE_EQ(lesson_budget(80, 7), 60);
  EXPECT_DOUBLE_EQ(lesson_budget(20, 7), 20);
}

TEST(Gradebook, DurationsReadAsPeopleWriteThem) {
  EXPECT_EQ(duration_text(42.4), "42s");
  EXPECT_EQ(duration_text(65), "1m05s");
  EXPECT_EQ(duration_text(7260), "2h01m");
}

}  // namespace
