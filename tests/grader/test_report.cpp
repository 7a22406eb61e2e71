// The HTML report: escaping, the scoreboard, and the plots drawn from the checks' details.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "report.h"

namespace {

using nlohmann::json;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

std::string between(const std::string& text, const std::string& from, const std::string& to) {
  const size_t a = text.find(from);
  if (a == std::string::npos) return "";
  const size_t b = text.find(to, a);
  return text.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

workbook::CheckResult check(const std::string& name, const std::string& verdict, const std::string& message,
                            json details = json::object()) {
  workbook::CheckResult c;
  c.name = name;
  c.summary = "does " + name;
  c.verdict = verdict;
  c.message = message;
  c.seconds = 0.5;
  c.details = std::move(details);
  return c;
}

struct Sample {
  workbook::Lesson lesson1, lesson2;
  std::vector<workbook::LessonResult> results;

  Sample() {
    lesson1.number = 3;
    lesson1.title = "Moving <data> & timing";
    lesson2.number = 4;
    lesson2.title = "Does not compile";
    workbook::LessonResult r;
    r.lesson = &lesson1;
    r.status = "in progress";
    r.checks.push_back(check("escapes", "fail", "got <script>alert(1)</script> & \"x\" instead of 'y'"));
    workbook::CheckResult timed = check("fast_enough", "pass", "time: yours 1.5 ms, reference 1.0 ms");
    timed.timed = true;
    timed.details["timing"] = {{"yours_ms", {1.4, 1.5, 1.6}}, {"reference_ms", {1.0, 1.0, 1.1}},
                               {"ratio", 1.5}, {"ratio_low", 1.4}, {"ratio_high", 1.6}};
    r.checks.push_back(timed);
    json device = {{"synchronizations", 4}, {"kernel_launches", 31}, {"bytes_host_to_device_pageable", 4096},
                   {"memory_allocated", 1 << 20}};
    json more = device;
    more["synchronizations"] = 9;
    json details;
    details["counters"] = {{"yours", {{"cuda:0", more}, {"cuda:1", device}}},
                           {"reference", {{"cuda:0", device}, {"cuda:1", device}}}};
    details["curves"]["loss per step"] = {{"yours", {2.3, 1.9, 1.2, 0.8}}, {"reference", {2.3, 1.8, 1.1, 0.7}}};
    details["memory"] = {{"yours", {{{"t", 0}, {"allocated", 0}, {"reserved", 0}},
                                    {{"t", 5}, {"allocated", 1 << 20}, {"reserved", 2 << 20}, {"marker", "step <1>"}},
                                    {{"t", 9}, {"allocated", 1 << 19}, {"reserved", 2 << 20}}}},
                         {"reference", {{{"t", 0}, {"allocated", 0}, {"reserved", 0}},
                                        {{"t", 8}, {"allocated", 1 << 20}, {"reserved", 1 << 20}}}}};
    r.checks.push_back(check("trains", "pass", "", details));
    r.checks.push_back(check("todo", "todo", "lesson 3: fill in copy()"));
    r.devices = json::array({{{"device", "cuda:0"}, {"name", "tiny EMULATED GPU <0>"}, {"total_memory", 1 << 30},
                              {"compute_capability", "8.0"}, {"emulated", true}},
                             {{"device", "cuda:1"}, {"name", "tiny EMULATED GPU <1>"}, {"total_memory", 1 << 30},
                              {"compute_capability", "8.0"}, {"emulated", true}}});
    r.passed = 2;
    r.total = 4;
    r.todo = 1;
    r.seconds = 3.25;
    workbook::assign_points(r);  // as grade_lesson does
    results.push_back(r);

    workbook::LessonResult broken;
    broken.lesson = &lesson2;
    broken.status = "does not compile";
    broken.problem = "exercise.cpp:3: error: expected ';' before '}' token";
    broken.checks.push_back(check("a", "fail", broken.status + ":\n" + broken.problem));
    broken.total = 1;
    workbook::assign_points(broken);
    results.push_back(broken);
  }
};

TEST(Report, EscapesEverythingFromTheResults) {
  const Sample s;
  const std::string html = workbook::html_report(s.results, 42, "Report <for> \"ada\"");
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;x&quot; instead of &#39;y&#39;"),
            std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("Moving &lt;data&gt; &amp; timing"), std::string::npos);
  EXPECT_EQ(html.find("<data>"), std::string::npos);
  EXPECT_NE(html.find("Report &lt;for&gt; &quot;ada&quot;"), std::string::npos);
  EXPECT_NE(html.find("step &lt;1&gt;"), std::string::npos);
}

TEST(Report, HeaderAndOneScoreboardRowPerLesson) {
  const Sample s;
  const std::string html = workbook::html_report(s.results, 123456789, "Results");
  EXPECT_NE(html.find("123456789"), std::string::npos);
  EXPECT_NE(html.find("Timed checks on the emulated GPU use its modelled clock"), std::string::npos);
  const std::string board = between(html, "<table class=\"scoreboard\">", "</table>");
  ASSERT_FALSE(board.empty());
  EXPECT_EQ(count(board, "<tr"), 1 + s.results.size());  // the header row, then one per lesson
  EXPECT_NE(board.find("2/4"), std::string::npos);
  EXPECT_NE(board.find("50%"), std::string::npos);
  EXPECT_NE(html.find("id=\"lesson-3\""), std::string::npos);
  EXPECT_NE(html.find("id=\"lesson-4\""), std::string::npos);
  // The compiler's log appears once, not once per check.
  EXPECT_EQ(count(html, "expected &#39;;&#39; before"), 1u);
}

TEST(Report, PlotsTheDetailsThatAreThere) {
  const Sample s;
  const std::string html = workbook::html_report(s.results, 1, "Results");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("<title>timing: yours vs reference</title>"), std::string::npos);
  EXPECT_NE(html.find("1.50x the reference (rounds from 1.40x to 1.60x)"), std::string::npos);
  EXPECT_NE(html.find("<title>loss per step</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>GPU memory over time</title>"), std::string::npos);
  EXPECT_GE(count(html, "<polyline"), 2u + 4u);  // the curve's two lines and memory's four
  EXPECT_EQ(count(html, "<svg"), 3u);
  // Titled axes: "loss per step" plots loss against step; memory against time.
  EXPECT_NE(html.find("font-weight=\"600\">step</text>"), std::string::npos);
  EXPECT_NE(html.find("rotate(-90)\" text-anchor=\"middle\" font-weight=\"600\">loss</text>"), std::string::npos);
  EXPECT_NE(html.find("font-weight=\"600\">time (ms)</text>"), std::string::npos);
  // Counters summed over devices; only synchronizations differ (13 vs 8): the one row shown. The
  // rows that agree fold into a <details>, and those at zero in both are only counted.
  const std::string table = between(html, "<table class=\"counters\">", "</table>");
  EXPECT_NE(table.find("<tr class=\"diff\"><td>synchronizations</td><td>13</td><td>8</td></tr>"), std::string::npos);
  EXPECT_EQ(count(table, "<tr"), 2u);  // the header and the one difference
  const std::string folded = between(html, "<details class=\"counters\">", "</details>");
  EXPECT_NE(folded.find("<summary>3 equal, 7 at zero in both</summary>"), std::string::npos) << folded;
  EXPECT_NE(folded.find("<tr><td>kernel_launches</td><td>62</td><td>62</td></tr>"), std::string::npos);
  EXPECT_EQ(folded.find("bytes_device_to_device"), std::string::npos);  // zero in both: not a row
  // Scripts and external resources never appear.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);

  if (const char* path = std::getenv("WORKBOOK_REPORT_SAMPLE")) std::ofstream(path) << html;
}

// Markers read without hovering: each tagged on the plot, on rows above it that
// no line crosses, "step N" shortened to N, yours on the upper rows and the
// reference's below; and every marker listed with its time under the plot, the
// list open when some tag found no room.
TEST(Report, MarkersAreTaggedOnThePlotAndListedNotOnlyInTooltips) {
  workbook::Lesson lesson;
  lesson.number = 8;
  lesson.title = "memory";
  auto report = [&](int yours, int reference, double spacing) {
    workbook::LessonResult r;
    r.lesson = &lesson;
    r.status = "passed";
    json details;
    details["memory"] = {{"yours", json::array()}, {"reference", json::array()}};
    for (int i = 0; i < yours; ++i) {
      details["memory"]["yours"].push_back({{"t", spacing * i}, {"allocated", 1000 * i}, {"reserved", 2000 * i},
                                            {"marker", "step " + std::to_string(i)}});
    }
    for (int i = 0; i < reference; ++i) {
      details["memory"]["reference"].push_back({{"t", spacing * i + 0.5}, {"allocated", 900 * i}, {"reserved", 2000 * i},
                                                {"marker", "step " + std::to_string(i)}});
    }
    r.checks.push_back(check("peak", "pass", "", details));
    return workbook::html_report({r}, 1, "markers");
  };
  std::string html = report(20, 8, 1.0);
  std::string list = between(html, "<details class=\"marks\">", "</details>");
  EXPECT_NE(list.find("<summary>28 markers: on the plot, step N is N; yours above the reference&#39;s</summary>"),
            std::string::npos) << list;
  EXPECT_EQ(count(list, "<li>"), 28u);
  EXPECT_NE(list.find("<li>19 time (ms): yours: step 19</li>"), std::string::npos) << list;
  EXPECT_NE(list.find("<li>7.5 time (ms): reference: step 7</li>"), std::string::npos) << list;
  const std::string svg = between(html, "<title>GPU memory over time</title>", "</svg>");
  // Every mark tagged with its number in its series' colour, none with the long label.
  EXPECT_EQ(count(svg, "font-size=\"9\" fill=\"#0969da\">"), 20u) << svg;
  EXPECT_EQ(count(svg, "font-size=\"9\" fill=\"#d1790a\">"), 8u) << svg;
  EXPECT_NE(svg.find("fill=\"#0969da\">19</text>"), std::string::npos);
  EXPECT_EQ(svg.find("\">yours: step"), std::string::npos);  // (the tooltips, <title>, keep the long label)
  // Yours on rows 0-1 (y 9, 20), the reference's on rows 2-3 (y 31, 42), all above the plot's top.
  EXPECT_EQ(svg.find("y=\"31\" font-size=\"9\" fill=\"#0969da\""), std::string::npos);
  EXPECT_EQ(svg.find("y=\"9\" font-size=\"9\" fill=\"#d1790a\""), std::string::npos);
  EXPECT_NE(svg.find("y=\"31\" font-size=\"9\" fill=\"#d1790a\""), std::string::npos) << svg;

  // 200 marks on 468 px: the tags cannot all fit; the list opens and says so.
  html = report(200, 0, 1.0);
  EXPECT_NE(html.find("<details class=\"marks\" open><summary>200 markers: on the plot, step N is N; yours above the "
                      "reference&#39;s (not all fit on the plot)</summary>"), std::string::npos);
}

// A stub's lesson is a list of what is left: each TODO or SKIP check with nothing
// to plot is one row of a table, not a box of its own; a failing check keeps its box.
TEST(Report, ChecksLeftToDoAreOneRowEach) {
  workbook::Lesson lesson;
  lesson.number = 7;
  lesson.title = "stub";
  workbook::LessonResult r;
  r.lesson = &lesson;
  r.status = "in progress";
  r.checks.push_back(check("first", "todo", "not done yet: lesson 7: fill in <first>"));
  r.checks.push_back(check("second", "skip", "timing checks are off (--no-timing)"));
  r.checks.push_back(check("broken", "fail", "wrong"));
  r.checks.push_back(check("third", "todo", "not done yet: lesson 7: fill in third"));
  const std::string html = workbook::html_report({r}, 1, "todo");
  EXPECT_EQ(count(html, "<table class=\"short\">"), 2u) << html;  // the two before the failing check, then one
  EXPECT_EQ(count(html, "<div class=\"check\">"), 1u);
  const std::string rows = between(html, "<table class=\"short\">", "</table>");
  EXPECT_NE(rows.find("<span class=\"badge todo\">TODO</span></td><td><b>first</b>: does first"), std::string::npos) << rows;
  EXPECT_NE(rows.find("<br><span class=\"dim\">not done yet: lesson 7: fill in &lt;first&gt;</span>"), std::string::npos);
  EXPECT_NE(rows.find("<b>second</b>"), std::string::npos);
  EXPECT_EQ(rows.find("broken"), std::string::npos);
}

TEST(Report, NoResultsStillMakeAPage) {
  const std::string html = workbook::html_report({}, 7, "Nothing yet");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  EXPECT_NE(html.find("<h1>Nothing yet</h1>"), std::string::npos);
  const std::string board = between(html, "<table class=\"scoreboard\">", "</table>");
  EXPECT_EQ(count(board, "<tr"), 1u);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
}

TEST(Report, OddDetailsDoNotBreakThePage) {
  workbook::Lesson lesson;
  lesson.number = 1;
  lesson.title = "odd";
  workbook::LessonResult r;
  r.lesson = &lesson;
  r.status = "error";
  json details;
  details["timing"] = {{"yours_ms", json::array()}, {"reference_ms", json::array()}};
  details["curves"] = {{"empty", {{"yours", json::array()}}}, {"one", {{"yours", {1.0, nullptr}}}},
                       {"not a curve", 3}};
  details["counters"] = {{"yours", {{"cuda:0", {{"kernel_launches", 2}}}}}, {"reference", nullptr}};
  details["memory"] = {{"yours", {{{"t", "late"}}}}};
  r.checks.push_back(check("weird", "error", "\033[31mred\033[0m text\r\n", details));
  r.checks.push_back(check("plain", "skip", "", nullptr));
  const std::string html = workbook::html_report({r}, 1, "odd");
  EXPECT_NE(html.find("<pre>red text\n</pre>"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"diff\"><td>kernel_launches</td><td>2</td><td>0</td></tr>"), std::string::npos);
  EXPECT_NE(html.find("no data"), std::string::npos);
  EXPECT_NE(html.find("<circle"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
}

}  // namespace

// The Machine table has a row for each lesson, naming the devices its checks ran
// on as the checker recorded them: emulated or real, memory, the GPU modelled.
TEST(Report, MachineTableListsTheDevicesEachLessonRanOn) {
  Sample s;
  auto emulated = [](int index, double gib, const std::string& modelled) {
    return json{{"device", "cuda:" + std::to_string(index)}, {"name", "tiny EMULATED GPU <" + std::to_string(index) + ">"},
                {"total_memory", gib * (1 << 30)}, {"compute_capability", "8.0"}, {"emulated", true},
                {"modelled_gpu", modelled}};
  };
  // Lesson 3 ran one check on 1 GPU (4 GiB) and the others on 2 (2 GiB each), one of them modelling an L4.
  s.results[0].devices = json::array({emulated(0, 4, "H100 SXM"), emulated(0, 2, "H100 SXM"),
                                      emulated(1, 2, "H100 SXM"), emulated(0, 4, "L4")});
  workbook::Lesson real_lesson;
  real_lesson.number = 9;
  real_lesson.title = "real";
  workbook::LessonResult real;
  real.lesson = &real_lesson;
  real.status = "passed";
  real.checks.push_back(check("fast", "pass", ""));
  real.devices = json::array({{{"device", "cuda:0"}, {"name", "NVIDIA H100 <SXM>"}, {"total_memory", 80.0 * (1 << 30)},
                               {"compute_capability", "9.0"}, {"emulated", false}, {"modelled_gpu", ""}}});
  s.results.push_back(real);
  const std::string html = workbook::html_report(s.results, 1, "Results");
  const std::string machine = between(html, "<h2>Machine</h2>", "</table>");
  ASSERT_FALSE(machine.empty());
  EXPECT_NE(machine.find("cores</td></tr>"), std::string::npos) << machine;
  // Lesson 3: three rows (three kinds of device), under one header cell.
  const std::string lesson3 = between(machine, "<th rowspan=\"3\">lesson 3</th>", "lesson 4");
  ASSERT_FALSE(lesson3.empty()) << machine;
  EXPECT_NE(lesson3.find("<td>cuda:0</td><td><b>emulated</b> on the host's CPU</td><td>4 GiB</td><td>H100 SXM</td>"),
            std::string::npos) << lesson3;
  EXPECT_NE(lesson3.find("<td>cuda:0, cuda:1</td><td><b>emulated</b> on the host's CPU</td><td>2 GiB each</td>"
                         "<td>H100 SXM</td>"), std::string::npos) << lesson3;
  EXPECT_NE(lesson3.find("<td>4 GiB</td><td>L4</td>"), std::string::npos) << lesson3;
  // Lesson 4 did not compile: nothing ran, and the table says so rather than guess a GPU.
  EXPECT_NE(machine.find("<th>lesson 4</th><td colspan=\"4\" class=\"dim\">no check ran (does not compile)</td>"),
            std::string::npos) << machine;
  // Lesson 9 ran on a real GPU: its name (escaped) and compute capability, not called emulated.
  const std::string lesson9 = between(machine, "lesson 9</th>", "</tr>");
  EXPECT_NE(lesson9.find("NVIDIA H100 &lt;SXM&gt;, compute capability 9.0</td><td>80 GiB</td>"), std::string::npos)
      << lesson9;
  EXPECT_EQ(lesson9.find("emulated"), std::string::npos);
  EXPECT_NE(machine.find("<th rowspan=\"1\">lesson 9</th>"), std::string::npos);
  // The lesson's own section says the same in a line.
  EXPECT_NE(html.find("ran on cuda:0: emulated, 4 GiB, its clock modelled on the H100 SXM; cuda:0, cuda:1: "
                      "emulated, 2 GiB each, its clock modelled on the H100 SXM; cuda:0: emulated, 4 GiB, its clock "
                      "modelled on the L4."), std::string::npos);

  // No lesson recorded a device: each row says why, none invents one.
  for (auto& r : s.results) r.devices = json::array();
  const std::string none = between(workbook::html_report(s.results, 1, "Results"), "<h2>Machine</h2>", "</table>");
  EXPECT_NE(none.find("<th>lesson 3</th><td colspan=\"4\" class=\"dim\">no GPU recorded"), std::string::npos) << none;
  EXPECT_EQ(none.find("cuda:"), std::string::npos);
}

// A training check records its loss series, yours and the reference's (or
// GradScaler's), whatever its verdict: a failing one is drawn with both lines.
TEST(Report, AFailingTrainingCheckDrawsBothLossSeries) {
  workbook::Lesson lesson;
  lesson.number = 4;
  lesson.title = "loop";
  workbook::LessonResult r;
  r.lesson = &lesson;
  r.status = "in progress";
  json details;
  details["curves"]["training loss per step"] = {{"yours", {2.3, 2.1, 2.4, 2.9}}, {"reference", {2.3, 1.9, 1.6, 1.4}}};
  r.checks.push_back(check("train_step", "fail", "the gradients were not cleared", details));
  json scaler;
  scaler["curves"]["the scale after each step (an inf at step 2)"] = {{"yours", {1024, 1024, 512}},
                                                                       {"GradScaler", {1024, 512, 512}}};
  r.checks.push_back(check("scaled_step", "fail", "the scale differs", scaler));
  json same;
  same["curves"]["bfloat16 training loss per step"] = {{"yours", {2.3, 2.2}}, {"reference", {2.3, 2.2}}};
  r.checks.push_back(check("bf16_step", "pass", "", same));
  const std::string html = workbook::html_report({r}, 1, "curves");
  // A failing check's curve is drawn tall (170 px of plot), a passing one's, a glance, shorter (90 px).
  EXPECT_NE(between(html, "<b>train_step</b>", "</svg>").find("height=\"230\""), std::string::npos);
  EXPECT_NE(between(html, "<b>bf16_step</b>", "</svg>").find("height=\"150\""), std::string::npos);
  const std::string loss = between(html, "<title>training loss per step</title>", "</svg>");
  ASSERT_FALSE(loss.empty()) << html;
  EXPECT_EQ(count(loss, "<polyline"), 2u) << loss;  // yours and the reference's, 4 points each
  EXPECT_NE(loss.find(">yours</text>"), std::string::npos);
  EXPECT_NE(loss.find(">reference</text>"), std::string::npos);
  EXPECT_NE(loss.find("font-weight=\"600\">step</text>"), std::string::npos);  // titled axes
  EXPECT_NE(loss.find("font-weight=\"600\">training loss</text>"), std::string::npos);
  // A series under another name than "reference" is drawn and named in the legend.
  const std::string scale = between(html, "<title>the scale after each step (an inf at step 2)</title>", "</svg>");
  EXPECT_EQ(count(scale, "<polyline"), 2u) << scale;
  EXPECT_NE(scale.find(">GradScaler</text>"), std::string::npos) << scale;
  EXPECT_NE(scale.find("font-weight=\"600\">step</text>"), std::string::npos) << scale;
  EXPECT_NE(scale.find("font-weight=\"600\">the scale</text>"), std::string::npos) << scale;
}

// A check's details may carry the GPU timelines of the student's run and the
// reference's (issue 18): drawn one above the other, on one time scale.
TEST(Report, DrawsTheGpuTimelinesOnOneScale) {
  auto trace = [](double kernel_us) {
    return json{{"traceEvents",
                 {{{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 0}, {"tid", 0},
                   {"ts", 0}, {"dur", 5}},
                  {{"ph", "X"}, {"cat", "kernel"}, {"name", "gemm"}, {"pid", 1}, {"tid", 0}, {"ts", 5},
                   {"dur", kernel_us}}}}};
  };
  workbook::Lesson lesson;
  lesson.number = 4;
  lesson.title = "loop";
  workbook::LessonResult r;
  r.lesson = &lesson;
  r.status = "passed";
  json details;
  details["timelines"] = {{"yours", trace(400)}, {"reference", trace(100).dump()}};  // an object or its text
  r.checks.push_back(check("overlaps", "pass", "", details));
  json broken;
  broken["timelines"] = {{"yours", "{not json"}};
  r.checks.push_back(check("broken", "pass", "", broken));
  const std::string html = workbook::html_report({r}, 1, "timelines");
  EXPECT_EQ(count(html, "<svg class=\"timeline\""), 2u) << html;
  EXPECT_LT(html.find("yours: GPU timeline"), html.find("reference: GPU timeline"));
  // One scale: the reference's 100 us kernel is a quarter as wide as yours' 400 us one.
  auto kernel_width = [&](const std::string& who) {
    const std::string svg = between(html, who + ": GPU timeline</title>", "</svg>");
    const std::string slice = between(svg, "<title>gemm", "/>");
    const std::string width = between(slice, "width=\"", "\" height");
    return width.size() > 7 ? std::stod(width.substr(7)) : 0.0;
  };
  const double yours = kernel_width("yours"), reference = kernel_width("reference");
  EXPECT_GT(yours, 0.0);
  EXPECT_NEAR(reference / yours, 0.25, 0.02) << yours << " px and " << reference << " px";
  EXPECT_NE(html.find("timeline not drawn: timeline: the trace is not valid JSON"), std::string::npos) << html;
  EXPECT_NE(html.find("</html>"), std::string::npos);
}
