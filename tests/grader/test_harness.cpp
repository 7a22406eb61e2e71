// What checker and runner exchange, the comparison messages, and timing verdicts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "harness/bundle.h"
#include "harness/checker.h"
#include "harness/compare.h"

namespace fs = std::filesystem;
using workbook::Bundle;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("workbook-harness-test-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(d);
  return d;
}

TEST(Bundle, RoundTripKeepsValuesAndTheFactsOfEachTensor) {
  const fs::path dir = fresh_dir("roundtrip");
  Bundle b;
  b.values["lr"] = 0.5;
  const tiny::Tensor x = tiny::arange(6, tiny::TensorOptions().dtype(tiny::Dtype::Float32)).reshape({2, 3});
  b.put("x", x.to("cuda:1"));
  b.put("w", x.detach().requires_grad_(true));
  b.put("nothing", tiny::Tensor());
  tiny::StateDict state;
  state.insert("fc.weight", x);
  b.put_state("model", state);
  b.save(dir);

  const Bundle c = Bundle::load(dir);
  EXPECT_EQ(c.values["lr"], 0.5);
  EXPECT_EQ(c.info("x").device, "cuda:1");
  EXPECT_EQ(c.info("x").dtype, "float32");
  EXPECT_EQ(c.info("x").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(c.tensor("x").device().is_cpu());
  EXPECT_TRUE(tiny::equal(c.tensor("x"), x));
  EXPECT_TRUE(c.info("w").requires_grad);
  EXPECT_FALSE(c.info("nothing").defined);
  EXPECT_TRUE(tiny::equal(c.state("model").at("fc.weight"), x));
  EXPECT_THROW(c.tensor("missing"), tiny::IndexError);
  fs::remove_all(dir);
}

// A student's exception message (or printed output) need not be UTF-8: it is
// saved with the bad bytes replaced, never an exception that loses the results.
TEST(Bundle, TextThatIsNotUtf8IsSavedWithTheBadBytesReplaced) {
  const fs::path dir = fresh_dir("utf8");
  Bundle b;
  b.values["_message"] = std::string("bad byte \xff here");
  ASSERT_NO_THROW(b.save(dir));
  const Bundle c = Bundle::load(dir);
  EXPECT_EQ(c.values["_message"].get<std::string>(), "bad byte \xef\xbf\xbd here");  // U+FFFD
  fs::remove_all(dir);
}

TEST(Bundle, MissingOrDamagedFolderIsAnIOError) {
  const fs::path dir = fresh_dir("damaged");
  EXPECT_THROW(Bundle::load(dir), tiny::IOError);
  fs::create_directories(dir);
  { std::ofstream(dir / "values.json") << "{ not json"; }
  try {
    Bundle::load(dir);
    FAIL() << "no error";
  } catch (const tiny::IOError& e) {
    EXPECT_NE(std::string(e.what()).find("is not valid JSON"), std::string::npos);
  }
  fs::remove_all(dir);
}

// A runner's environment: the emulated GPUs the check asked for, on the
// emulator even where an NVIDIA GPU is present (checks grade by its counters,
// and lessons 5 and 6 need two devices), and the check's own variables.
TEST(Context, RunnersSeeTheEmulatedGpusEvenOnAMachineWithARealOne) {
  const fs::path dir = fresh_dir("environment");
  fs::create_directories(dir / "work");
  fs::permissions(dir / "work", fs::perms::owner_all);
  const fs::path runner = dir / "runner.sh";
  {
    std::ofstream(runner) << "#!/bin/sh\nmkdir -p out && printf '{\"_status\": \"ok\", \"force\": \"%s\", "
                             "\"gpus\": \"%s\", \"extra\": \"%s\"}' \"$TINY_FORCE_EMULATED_GPU\" "
                             "\"$TINY_EMULATED_GPUS\" \"$EXTRA\" > out/values.json\n";
  }
  fs::permissions(runner, fs::perms::owner_all);
  workbook::Context ctx;
  ctx.reference_runner = runner;
  ctx.work_dir = dir / "work";
  workbook::RunOptions options;
  options.gpus = 3;
  options.env["EXTRA"] = "kept";
  // The grader's own environment asks for the real GPU: the runner must not inherit that.
  const char* before = std::getenv("TINY_FORCE_EMULATED_GPU");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("TINY_FORCE_EMULATED_GPU", "0", 1);
  const workbook::Run r = ctx.reference("env", Bundle{}, options);
  if (before != nullptr) ::setenv("TINY_FORCE_EMULATED_GPU", saved.c_str(), 1);
  else ::unsetenv("TINY_FORCE_EMULATED_GPU");
  ASSERT_TRUE(r.ok()) << r.status << ": " << r.message;
  EXPECT_EQ(r.out.values.value("force", ""), "1");
  EXPECT_EQ(r.out.values.value("gpus", ""), "3");
  EXPECT_EQ(r.out.values.value("extra", ""), "kept");
  fs::remove_all(dir);
}

TEST(Compare, NumbersAndListsAsChecksQuoteThem) {
  EXPECT_EQ(workbook::number_text(2.30661234, 5), "2.3066");
  EXPECT_EQ(workbook::values_text(nlohmann::json::array({2.30661234, 1, "x"})), "[2.3066, 1, \"x\"]");
  const nlohmann::json many = nlohmann::json::array({1, 2, 3, 4});
  EXPECT_EQ(workbook::values_text(many, 2), "[1, 2, ... (4 in all)]");
  EXPECT_EQ(workbook::values_text(many, 8, [](const nlohmann::json& v) { return std::to_string(v.get<int>() * 10); }),
            "[10, 20, 30, 40]");
}

TEST(Compare, MessagesSayWhatDiffers) {
  const tiny::Tensor a = tiny::tensor({1.0f, 2.0f, 3.0f});
  EXPECT_FALSE(workbook::differ("the output", a, a.clone()).has_value());
  EXPECT_EQ(*workbook::differ("the output", a.reshape({3, 1}), a), "the output has shape (3, 1) but should have shape (3,)");
  EXPECT_EQ(*workbook::differ("the output", a.to(tiny::Dtype::Float64), a),
            "the output has dtype float64 but should have dtype float32");
  const std::string values = *workbook::differ("the output", tiny::tensor({1.0f, 2.5f, 3.0f}), a);
  EXPECT_NE(values.find("1 of 3 differ, the most at flat index 1: 2.5 (yours) vs 2 (expected)"), std::string::npos)
      << values;
  const tiny::Tensor nan = tiny::tensor({std::nanf("")});
  EXPECT_FALSE(workbook::differ("x", nan, nan.clone()).has_value()) << "NaN where NaN is expected matches";
}

TEST(Compare, BundleTensorsAreComparedWithTheirDevice) {
  Bundle mine, ref;
  mine.put("y", tiny::ones({2}));
  ref.put("y", tiny::ones({2}).to("cuda:0"));
  EXPECT_EQ(*workbook::differ("the result", mine, ref, "y"), "the result is on cpu but should be on cuda:0");
}

workbook::Timing rounds(std::vector<double> student, std::vector<double> reference) {
  return workbook::Timing::of_rounds(std::move(student), std::move(reference));
}

TEST(Timing, FailsOnlyWhenClearlySlower) {
  using workbook::Context;
  using workbook::Verdict;
  EXPECT_EQ(Context::judge(rounds({10, 11, 10}, {10, 10, 10})).verdict, Verdict::pass);
  const workbook::Outcome slow = Context::judge(rounds({40, 45, 41}, {10, 10, 10}));
  EXPECT_EQ(slow.verdict, Verdict::fail);
  EXPECT_NE(slow.message.find("clearly slower"), std::string::npos);
  const workbook::Outcome noisy = Context::judge(rounds({40, 12, 41}, {10, 10, 10}));
  EXPECT_EQ(noisy.verdict, Verdict::pass);
  EXPECT_NE(noisy.note.find("inconclusive"), std::string::npos);
}

// The issue's figures: "yours 1.38 ms, reference 1.12 ms" read 1.67x (the
// median of the rounds' ratios); the ratio must be the one of the times shown.
TEST(Timing, RatioIsTheRatioOfTheMediansItShows) {
  // Rounds' ratios 1.23, 1.67, 1.67: their median is 1.67, the medians' ratio 1.23.
  const workbook::Timing t = rounds({1.38, 1.2, 2.5}, {1.12, 0.72, 1.5});
  EXPECT_DOUBLE_EQ(t.ratio, 1.38 / 1.12);
  EXPECT_DOUBLE_EQ(t.ratio_low, 1.38 / 1.12);
  EXPECT_DOUBLE_EQ(t.ratio_high, 1.2 / 0.72);
  const workbook::Outcome o = workbook::Context::judge(t);
  EXPECT_EQ(o.verdict, workbook::Verdict::pass);
  EXPECT_NE(o.note.find("yours 1.38 ms, reference 1.12 ms: 1.23x"), std::string::npos) << o.note;
}

// This test program doubles as a fake runner (an ELF file, which the sandbox
// starts by descriptor; a script could not be): started with
// WORKBOOK_TEST_RUNNER_VALUES, it writes those values as its results, the
// runner's protocol (RUNNER EXERCISE in out), and exits before any test runs.
const bool kStartedAsFakeRunner = [] {
  const char* values = std::getenv("WORKBOOK_TEST_RUNNER_VALUES");
  if (values == nullptr) return false;
  {
    std::error_code ec;
    fs::create_directories("out", ec);
    std::ofstream("out/values.json") << values;
  }
  std::_Exit(0);
}();

workbook::RunOptions runner_writes(const std::string& values) {
  workbook::RunOptions o;
  o.env["WORKBOOK_TEST_RUNNER_VALUES"] = values;
  return o;
}

workbook::Context context_in(const fs::path& dir) {
  fs::create_directories(dir / "work");
  fs::permissions(dir / "work", fs::perms::owner_all);
  workbook::Context ctx;
  ctx.work_dir = dir / "work";
  ctx.student_runner = ctx.reference_runner = fs::read_symlink("/proc/self/exe");
  return ctx;
}

// An untouched lesson reads "not started": its stub is TODO in a timed check
// too, not a FAIL "not done yet" (which made lesson 4 "in progress" on a fresh clone).
TEST(Timing, AStubIsTodoNotAFailure) {
  const fs::path dir = fresh_dir("timed-stub");
  workbook::Context ctx = context_in(dir);
  const workbook::RunOptions stub =
      runner_writes(R"({"_status": "todo", "_message": "not done yet: lesson 4: write train_one_epoch"})");
  const workbook::Outcome o = workbook::Context::judge(ctx.time("train_one_epoch", Bundle{}, stub));
  EXPECT_EQ(o.verdict, workbook::Verdict::todo) << o.message;
  EXPECT_EQ(o.message, "not done yet: lesson 4: write train_one_epoch");
  fs::remove_all(dir);
}

// A runner that cannot be started (being rebuilt by another check, or gone)
// ran none of the student's code: whatever the check does with the run, it
// becomes an ERROR, the workbook's fault (checker_main catches this), never a FAIL.
TEST(Context, ARunnerThatCannotStartIsTheWorkbooksFault) {
  const fs::path dir = fresh_dir("missing-runner");
  workbook::Context ctx = context_in(dir);
  ctx.student_runner = dir / "runner";  // not there
  const workbook::RunOptions ok = runner_writes(R"({"_status": "ok", "_times_ms": [1.0]})");
  auto message_of = [](const std::function<void()>& run) -> std::string {
    try {
      run();
    } catch (const workbook::RunnerNotStarted& e) {
      return e.what();
    }
    return "(nothing thrown)";
  };
  const std::string student = message_of([&] { ctx.student("count_devices", Bundle{}, ok); });
  EXPECT_EQ(student, "the grader could not start the lesson's program (execve failed: No such file or directory: " +
                         (dir / "runner").string() + "): this is the workbook's fault, not your code's; run the check again");
  EXPECT_NE(message_of([&] { ctx.time("count_devices", Bundle{}, ok); }).find("the workbook's fault"), std::string::npos);
  ctx.student_runner = ctx.reference_runner;
  ctx.reference_runner = dir / "reference";  // not there either
  workbook::Run mine, ref;
  EXPECT_NE(message_of([&] { ctx.both("count_devices", Bundle{}, mine, ref, ok); })
                .find("could not start the lesson's reference program"),
            std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
