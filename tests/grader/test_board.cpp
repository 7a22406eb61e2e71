// What a student reads in the terminal: the scoreboard, `list`, `watch`'s
// report, and the compiler's warnings about their own file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "build.h"
#include "grade.h"

namespace {

using nlohmann::json;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string line_with(const std::string& text, const std::string& what) {
  for (const std::string& line : lines_of(text)) {
    if (line.find(what) != std::string::npos) return line;
  }
  return "";
}

workbook::Lesson lesson(int number, const std::string& title, int gpus = 0) {
  workbook::Lesson l;
  l.number = number;
  l.title = title;
  l.folder = std::to_string(number) + "_lesson";
  l.minutes = 45;
  l.gpus_required = gpus;
  l.hints = {"first hint text", "second hint text", "third hint text"};
  return l;
}

// A lesson's row on the scoreboard: its own line and the GPU work line under it.
std::string row_of(const std::string& text, const std::string& title) {
  std::string row;
  bool in_row = false;
  for (const std::string& line : lines_of(text)) {
    if (in_row && line.rfind("     GPU work: ", 0) != 0 && line.rfind("       ", 0) != 0) break;
    if (line.find(title) != std::string::npos) in_row = true;
    if (in_row) row += line + "\n";
  }
  return row;
}

// A passed lesson whose one check counted yours and the reference's GPU work on two devices.
workbook::LessonResult counted(const workbook::Lesson& l, std::vector<std::string> shown) {
  workbook::LessonResult r;
  r.lesson = &l;
  r.status = "passed";
  workbook::CheckResult c;
  c.name = "trains";
  c.verdict = "pass";
  const json device = {{"synchronizations", 3}, {"kernel_launches", 40}, {"bytes_host_to_device_pageable", 1024},
                       {"bytes_host_to_device_pinned", 2048}, {"max_memory_allocated", 4096}};
  c.details["counters"] = {{"yours", {{"cuda:0", device}, {"cuda:1", device}}},
                           {"reference", {{"cuda:0", device}, {"cuda:1", device}}}};
  r.checks.push_back(c);
  r.passed = r.total = 1;
  r.counters_shown = std::move(shown);
  return r;
}

TEST(Scoreboard, NeverCutsATitleAndKeepsTheColumnsAligned) {
  const workbook::Lesson a = lesson(1, "Device check");
  const workbook::Lesson b = lesson(7, "Mixed precision: autocast and GradScaler, and then some more");
  std::ostringstream out;
  workbook::print_scoreboard(out, {counted(a, {}), counted(b, {})}, 42, false);
  const std::string text = out.str();
  EXPECT_NE(text.find("Mixed precision: autocast and GradScaler, and then some more"), std::string::npos) << text;
  const size_t column = line_with(text, "status").find("status");
  EXPECT_EQ(line_with(text, "Device check").find("passed"), column) << text;
  EXPECT_EQ(line_with(text, "GradScaler").find("passed"), column) << text;
}

TEST(Scoreboard, ShowsOnlyTheCountersTheLessonIsAbout) {
  const workbook::Lesson a = lesson(4, "The full training loop");
  const workbook::Lesson b = lesson(6, "One process per GPU: DDP");
  const workbook::Lesson c = lesson(8, "GPU memory pitfalls");
  std::ostringstream out;
  workbook::print_scoreboard(out,
                             {counted(a, {"synchronizations", "bytes_host_to_device_pinned"}), counted(b, {}),
                              counted(c, {"max_memory_allocated", "bytes_host_to_device"})},
                             42, false);
  const std::string text = out.str();
  const std::string four = row_of(text, "The full training loop");
  EXPECT_NE(four.find("syncs 6 (ref 6), pinned to GPU 4 KiB (ref 4 KiB)"), std::string::npos) << text;
  EXPECT_EQ(four.find("launches"), std::string::npos) << text;
  // Lesson 6's ranks are processes of their own: no counters, not "syncs 0".
  const std::string six = row_of(text, "DDP");
  EXPECT_EQ(six.find("syncs"), std::string::npos) << text;
  EXPECT_EQ(six.find("GPU work"), std::string::npos) << text;
  // A peak is the largest of the checks, summed over the devices; copies to the GPU, pageable and pinned together.
  EXPECT_NE(row_of(text, "GPU memory pitfalls").find("peak memory 8 KiB (ref 8 KiB), to GPU 6 KiB (ref 6 KiB)"),
            std::string::npos)
      << text;
}

TEST(Scoreboard, SpeedIsTheRatioOfTheTimesShown) {
  const workbook::Lesson l = lesson(4, "The full training loop");
  workbook::LessonResult r = counted(l, {});
  workbook::CheckResult timed;
  timed.name = "epoch_speed";
  timed.verdict = "pass";
  timed.timed = true;
  // The ratio of the medians shown (1.38 ms / 1.00 ms), whatever else a checker wrote beside them.
  timed.details["timing"] = {{"yours_ms", {1.0, 2.0, 1.38}}, {"reference_ms", {1.12, 1.0, 0.5}}, {"ratio", 2.0}};
  r.checks.push_back(timed);
  std::ostringstream out;
  workbook::print_scoreboard(out, {r}, 42, false);
  EXPECT_NE(line_with(out.str(), "The full training loop").find("1.38x"), std::string::npos) << out.str();
}

// Lesson 9's fixed_program is judged on modelled speed but is not a timed
// check (--no-timing must keep it): its ratio still fills the column, not "-".
TEST(Scoreboard, SpeedOfAnUntimedCheckJudgedOnModelledTimeIsShown) {
  const workbook::Lesson l = lesson(9, "Find the bottleneck");
  workbook::LessonResult r = counted(l, {});
  workbook::CheckResult program;
  program.name = "fixed_program";
  program.verdict = "pass";
  program.timed = false;
  program.details["timing"] = {{"yours_ms", {1.2}}, {"reference_ms", {1.0}}, {"clock", "modelled L4"}};
  r.checks.push_back(program);
  std::ostringstream out;
  workbook::print_scoreboard(out, {r}, 42, false);
  EXPECT_NE(line_with(out.str(), "Find the bottleneck").find("1.20x"), std::string::npos) << out.str();
}

// A newcomer's terminal showed a 124-column table and a 152-column "Next" line,
// and a "speed vs ref" column of '-' nobody explained.
TEST(Scoreboard, FitsAHundredColumnsAndSaysWhatTheTimeColumnMeans) {
  const workbook::Lesson a = lesson(2, "Moving tensors");
  const workbook::Lesson b = lesson(7, "Mixed precision: autocast and GradScaler");
  workbook::LessonResult todo = counted(b, {});
  todo.status = "in progress";
  todo.checks[0].verdict = "todo";
  todo.checks[0].message = "not done yet: lesson 7: scale the loss with the GradScaler before backward\n"
                           "a second line of the message";
  todo.passed = 0;
  std::ostringstream out;
  workbook::print_scoreboard(out,
                             {counted(a, {"synchronizations", "bytes_host_to_device_pinned", "bytes_host_to_device",
                                          "max_memory_allocated", "kernel_launches"}),
                              todo},
                             484945355128ull, false);
  const std::string text = out.str();
  // The header, the legend and the Next lines fit 80 columns, a row with its time 82 (84 with a title of 42),
  // a GPU work line (broken between counters) 100.
  for (const std::string& line : lines_of(text)) {
    const bool work = line.find("GPU work:") == 5 || line.rfind("       ", 0) == 0;
    const bool row = line.find("passed") != std::string::npos || line.find("in progress") != std::string::npos;
    EXPECT_LE(line.size(), work ? 100u : row ? 82u : 80u) << line << "\n" << text;
  }
  // Nothing was dropped to fit: the counters and the whole message are still there, and the message's own lines.
  EXPECT_NE(row_of(text, "Moving tensors").find("peak memory 8 KiB (ref 8 KiB)"), std::string::npos) << text;
  // A check's message is never broken inside (it names paths a student copies): it gets lines of its own.
  EXPECT_NE(text.find("  to do: trains:\n    not done yet: lesson 7: scale the loss with the GradScaler before backward\n"
                      "    a second line of the message"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("time: your timed check's time over the reference's"), std::string::npos) << text;
  EXPECT_NE(text.find("-: no timed check"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU work: what your code made the GPU do in all the lesson's checks"), std::string::npos) << text;
  EXPECT_NE(text.find("--seed 484945355128"), std::string::npos) << text;
}

// The scoreboard's header is the longest title plus 40 columns (titles are
// never cut): every lesson's own title must keep it within 80.
TEST(Scoreboard, EveryLessonsTitleKeepsTheHeaderWithinEightyColumns) {
  int lessons = 0;
  for (const auto& entry : std::filesystem::directory_iterator(WORKBOOK_LESSONS_DIR)) {
    const std::filesystem::path file = entry.path() / "lesson.json";
    if (!std::filesystem::exists(file)) continue;
    const json doc = json::parse(std::ifstream(file));
    const std::string title = doc.at("title").get<std::string>();
    const workbook::Lesson l = lesson(std::stoi(entry.path().filename().string()), title);  // "7_amp" -> 7
    std::ostringstream out;
    workbook::print_scoreboard(out, {counted(l, {})}, 1, false);
    std::string header;
    for (const std::string& line : lines_of(out.str())) {
      if (line.rfind("  #", 0) == 0) header = line;
    }
    ASSERT_NE(header.find("lesson"), std::string::npos) << out.str();
    EXPECT_LE(header.size(), 80u) << file << ": the title \"" << title << "\" (" << title.size()
                                  << " characters) makes the scoreboard " << header.size() << " columns wide";
    ++lessons;
  }
  EXPECT_GE(lessons, 9);
}

// "Well done" over zero checks (a grade that stopped early, every check
// skipped) praised work nobody checked.
TEST(Scoreboard, NeverSaysWellDoneWhenNoCheckRan) {
  const workbook::Lesson a = lesson(1, "Device check");
  workbook::LessonResult skipped;
  skipped.lesson = &a;
  skipped.status = "skipped";
  std::ostringstream none, all_skipped;
  workbook::print_scoreboard(none, {}, 42, false);
  workbook::print_scoreboard(all_skipped, {skipped}, 42, false);
  EXPECT_EQ(none.str().find("Well done"), std::string::npos) << none.str();
  EXPECT_NE(none.str().find("No lesson was graded."), std::string::npos) << none.str();
  EXPECT_EQ(all_skipped.str().find("Well done"), std::string::npos) << all_skipped.str();
  EXPECT_NE(all_skipped.str().find("No check ran here"), std::string::npos) << all_skipped.str();
  std::ostringstream passed;
  workbook::print_scoreboard(passed, {counted(a, {})}, 42, false);
  EXPECT_NE(passed.str().find("This lesson passes. Well done."), std::string::npos) << passed.str();
}

TEST(LessonList, SaysWhatALessonNeedsAndAlignsEveryColumn) {
  const std::vector<workbook::Lesson> lessons = {lesson(1, "Device check"), lesson(5, "Data parallelism", 2),
                                                 lesson(7, "Mixed precision: autocast and GradScaler", 1),
                                                 lesson(8, "GPU memory pitfalls", 1)};
  std::ostringstream out;
  workbook::print_lesson_list(out, lessons);
  const std::vector<std::string> lines = lines_of(out.str());
  ASSERT_EQ(lines.size(), 4u) << out.str();
  EXPECT_NE(lines[1].find("needs 2 GPUs"), std::string::npos) << out.str();
  EXPECT_NE(lines[2].find("needs a GPU"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("1 GPUs"), std::string::npos) << out.str();
  EXPECT_NE(lines[2].find("Mixed precision: autocast and GradScaler"), std::string::npos) << out.str();
  for (const char* column : {"about", "lessons/"}) {
    for (const std::string& line : lines) EXPECT_EQ(line.find(column), lines[0].find(column)) << column << "\n" << out.str();
  }
  EXPECT_EQ(workbook::gpus_needed(0), "");
  EXPECT_EQ(workbook::gpus_needed(1), "needs a GPU (the emulated one will do)");
  EXPECT_EQ(workbook::gpus_needed(2), "needs 2 GPUs (the emulated ones will do)");
}

workbook::LessonResult failing(const workbook::Lesson& l) {
  workbook::LessonResult r;
  r.lesson = &l;
  r.status = "in progress";
  workbook::CheckResult pass, fail;
  pass.name = "make_on_device";
  pass.verdict = "pass";
  fail.name = "to_device";
  fail.summary = "to_device() moves every tensor";
  fail.verdict = "fail";
  fail.message = "tensor 0 is on cpu, expected cuda:0";
  r.checks = {pass, fail};
  r.passed = 1;
  r.total = 2;
  return r;
}

TEST(WatchReport, ShowsNoHintUnaskedButSaysWhichComesNext) {
  const workbook::Lesson l = lesson(2, "Moving tensors");
  std::ostringstream out;
  workbook::print_watch_report(out, failing(l), 0, "12:00:00");
  const std::string text = out.str();
  EXPECT_NE(text.find("[12:00:00] lesson 2: in progress, 1 of 2 checks pass"), std::string::npos) << text;
  EXPECT_NE(text.find("first problem: to_device: to_device() moves every tensor"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor 0 is on cpu, expected cuda:0"), std::string::npos) << text;
  EXPECT_EQ(text.find("first hint text"), std::string::npos) << text;
  EXPECT_NE(text.find("stuck? ./workbook hint 2 shows hint 1 of 3"), std::string::npos) << text;
}

TEST(WatchReport, ShowsTheHintTheStudentReached) {
  const workbook::Lesson l = lesson(2, "Moving tensors");
  std::ostringstream out;
  workbook::print_watch_report(out, failing(l), 2, "12:00:00");
  EXPECT_NE(out.str().find("hint 2 of 3 (the last you asked for): second hint text"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("first hint text"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("./workbook hint 2 shows hint 3 of 3"), std::string::npos) << out.str();
  std::ostringstream last;
  workbook::print_watch_report(last, failing(l), 3, "12:00:00");
  EXPECT_NE(last.str().find("third hint text"), std::string::npos) << last.str();
  EXPECT_NE(last.str().find("./workbook hint 2 --all"), std::string::npos) << last.str();
}

TEST(WatchReport, ShowsTheWarningsAndAWorkbookFaultAsSuch) {
  const workbook::Lesson l = lesson(3, "Move a model");
  workbook::LessonResult r = failing(l);
  r.warnings = "exercise.cpp:18:17: warning: ignoring return value\n";
  r.status = "error";
  r.checks[1].verdict = "error";
  r.checks[1].message = "the grader could not start lesson 3's program (execve failed)";
  r.problem = "1 check of lesson 3 could not be run by the workbook\n";
  std::ostringstream out;
  workbook::print_watch_report(out, r, 0, "12:00:00");
  const std::string text = out.str();
  EXPECT_NE(text.find("the compiler warns about your code:\n    exercise.cpp:18:17: warning"), std::string::npos) << text;
  EXPECT_NE(text.find("ERROR to_device:\n    the grader could not start"), std::string::npos) << text;
  EXPECT_EQ(text.find("first problem"), std::string::npos) << text;
}

// GCC's words for lesson 2's bare `t.to(device);`: the warning is in the
// student's file, the note that goes with it in the workbook's header.
const char* kGccOutput =
    "/s/lessons/2/exercise.cpp: In function 'std::vector<tiny::Tensor> lesson2::to_device(...)':\n"
    "/s/lessons/2/exercise.cpp:18:17: warning: ignoring return value of 'tiny::Tensor tiny::Tensor::to(...) const', "
    "declared with attribute 'nodiscard' [-Wunused-result]\n"
    "   18 |     t.to(device);\n"
    "      |                 ^\n"
    "In file included from /w/framework/include/tiny/state_dict.h:10,\n"
    "                 from /s/lessons/2/exercise.cpp:2:\n"
    "/w/framework/include/tiny/tensor.h:135:24: note: declared here\n"
    "  135 |   [[nodiscard]] Tensor to(const Device& device, bool non_blocking = false) const;\n"
    "      |                        ^~\n";

TEST(Warnings, OnlyThoseAboutTheStudentsFileWithTheirContext) {
  const std::string w = workbook::warnings_about(kGccOutput, "/s/lessons/2/exercise.cpp");
  EXPECT_EQ(w,
            "/s/lessons/2/exercise.cpp: In function 'std::vector<tiny::Tensor> lesson2::to_device(...)':\n"
            "/s/lessons/2/exercise.cpp:18:17: warning: ignoring return value of 'tiny::Tensor tiny::Tensor::to(...) "
            "const', declared with attribute 'nodiscard' [-Wunused-result]\n"
            "   18 |     t.to(device);\n"
            "      |                 ^\n");
  EXPECT_EQ(workbook::warnings_about(kGccOutput, "/other/exercise.cpp"), "");
  EXPECT_EQ(workbook::warnings_about("", "/s/lessons/2/exercise.cpp"), "");
}

TEST(Warnings, AreCappedWithACount) {
  std::string many;
  for (int i = 1; i <= 20; ++i) many += "/s/e.cpp:" + std::to_string(i) + ":1: warning: unused variable 'x'\n   | x\n";
  const std::string w = workbook::warnings_about(many, "/s/e.cpp", 10);
  EXPECT_EQ(lines_of(w).size(), 11u) << w;
  EXPECT_NE(w.find("(30 more lines not shown)"), std::string::npos) << w;
}

}  // namespace
