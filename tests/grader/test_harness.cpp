// What checker and runner exchange, the comparison messages, and timing verdicts.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <unistd.h>

#include "harness/bundle.h"
#include "harness/checker.h"
#include "harness/compare.h"
#include "harness/runner.h"
#include "tiny/cuda_grading.h"
#include "tiny/parallel.h"

namespace fs = std::filesystem;
using workbook::Bundle;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("workbook-harness-test-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(d);
  return d;
}

// A checker reads a run's results with const operator[]; results a student's
// code forged may lack the key. grader/harness/json_assert.h makes that throw
// (the check then reports an error) instead of aborting or reading past the end.
TEST(Bundle, AMissingKeyInResultsThrowsInsteadOfCrashing) {
  const nlohmann::json forged = nlohmann::json::parse(R"({"ms": 1.0})");
  const nlohmann::json& values = forged;  // const, as a checker holds a Run's values
  EXPECT_THROW((void)values["device"], std::out_of_range);
  EXPECT_DOUBLE_EQ(values["ms"].get<double>(), 1.0);
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
    // A graded run sends its results through the descriptor the checker names (runner.h).
    std::ofstream(runner) << "#!/bin/sh\nmkdir -p out && printf '{\"_status\": \"ok\", \"force\": \"%s\", "
                             "\"gpus\": \"%s\", \"extra\": \"%s\"}' \"$TINY_FORCE_EMULATED_GPU\" "
                             "\"$TINY_EMULATED_GPUS\" \"$EXTRA\" >&\"$WORKBOOK_RESULTS_FD\"\n";
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
// WORKBOOK_TEST_RUNNER_VALUES, it sends those values as its results through
// the checker's pipe, as a graded runner does (runner.h: RUNNER EXERCISE in
// out), and exits before any test runs. With WORKBOOK_TEST_RUNNER_ON_DISK it
// writes them to out/values.json instead; with WORKBOOK_TEST_RUNNER_PAD=N it
// sends {"_status": "ok", "pad": "xxx..."} with N x's.
const bool kStartedAsFakeRunner = [] {
  const char* values = std::getenv("WORKBOOK_TEST_RUNNER_VALUES");
  if (values == nullptr) return false;
  std::string text = values;
  // WORKBOOK_TEST_RUNNER_STUDENT_VALUES: what the student's runs send instead (a run's folder names its side).
  const char* student = std::getenv("WORKBOOK_TEST_RUNNER_STUDENT_VALUES");
  if (student != nullptr && fs::current_path().filename().string().find("-student-") != std::string::npos) {
    text = student;
  }
  // WORKBOOK_TEST_RUNNER_SLEEP=S: every run, the reference's too, takes S seconds first (a long exercise).
  if (const char* sleep = std::getenv("WORKBOOK_TEST_RUNNER_SLEEP")) {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(sleep)));
  }
  // WORKBOOK_TEST_RUNNER_STUDENT_SLEEP=S: the student's runs take S seconds first (a hang, for the time limits).
  if (const char* sleep = std::getenv("WORKBOOK_TEST_RUNNER_STUDENT_SLEEP");
      sleep != nullptr && fs::current_path().filename().string().find("-student-") != std::string::npos) {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(sleep)));
  }
  if (const char* pad = std::getenv("WORKBOOK_TEST_RUNNER_PAD")) {
    text = "{\"_status\": \"ok\", \"pad\": \"" + std::string(std::stoull(pad), 'x') + "\"}";
  }
  std::error_code ec;
  fs::create_directories("out", ec);
  const char* fd = std::getenv(workbook::kResultsFdVariable);
  if (std::getenv("WORKBOOK_TEST_RUNNER_ON_DISK") != nullptr || fd == nullptr) {
    std::ofstream("out/values.json") << text;
  } else {
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(std::atoi(fd), text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
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
  // As checker_main does: libtiny.so shared where a sandbox's own uid can load it,
  // for a build in a folder only its owner can enter (a private clone).
  ctx.library_dir = dir / "lib";
  fs::create_directories(ctx.library_dir);
  fs::permissions(ctx.library_dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                        fs::perms::others_read | fs::perms::others_exec);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&tiny::get_num_threads), &info) != 0 && info.dli_fname != nullptr) {
    ctx.share(info.dli_fname);
  }
  return ctx;
}

// Issue 20: a hang costs the reference's time x 20 (here with a floor of 0.05 s
// instead of 10), not the check's minute, and the lesson's other runs then fail at once.
TEST(RunLimit, AStudentsRunGetsTwentyTimesTheReferencesTimeThenTheLessonStopsAtOnce) {
  const fs::path dir = fresh_dir("run-limit");
  workbook::Context ctx = context_in(dir);
  ctx.run_limit_floor_s = 0.05;  // under any reference run x 20 (a sandboxed start alone takes more than 2.5 ms)
  ctx.current_check = "spins";
  workbook::RunOptions hangs = runner_writes(R"({"_status": "ok"})");
  hangs.env["WORKBOOK_TEST_RUNNER_STUDENT_SLEEP"] = "60";
  hangs.call = "spin()";
  const auto t0 = std::chrono::steady_clock::now();
  workbook::Run mine, ref;
  const std::optional<workbook::Outcome> o = ctx.both("spin", Bundle{}, mine, ref, hangs);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->verdict, workbook::Verdict::fail);
  EXPECT_NE(o->message.find("did not finish within the time limit"), std::string::npos) << o->message;
  EXPECT_NE(o->message.find("x the reference's own"), std::string::npos) << o->message;
  EXPECT_LT(seconds, 20) << "the check's own limit (60 s) was used, not the reference's time";
  EXPECT_NE(ctx.timed_out().find("spin() in check spins"), std::string::npos) << ctx.timed_out();
  // The next run of the student's code is not even started.
  const auto t1 = std::chrono::steady_clock::now();
  const workbook::Run next = ctx.student("other", Bundle{}, hangs);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), 1.0);
  EXPECT_EQ(next.status, "crash");
  EXPECT_NE(next.message.find("was not run: an earlier run of your code in this lesson did not finish in time (spin() "
                              "in check spins"), std::string::npos) << next.message;
  fs::remove_all(dir);
}

// A quick exercise's reference time never limits another exercise: a correct run
// of a long exercise gets 20x that exercise's own reference time, which student()
// learns by running the reference first (a quick one's 20x would stop it).
TEST(RunLimit, AnotherExercisesReferenceTimeDoesNotLimitARun) {
  const fs::path dir = fresh_dir("run-limit-other");
  workbook::Context ctx = context_in(dir);
  ctx.run_limit_floor_s = 0.05;
  ASSERT_TRUE(ctx.reference("quick", Bundle{}, runner_writes(R"({"_status": "ok"})")).ok());
  workbook::RunOptions takes_a_while = runner_writes(R"({"_status": "ok"})");
  takes_a_while.env["WORKBOOK_TEST_RUNNER_SLEEP"] = "0.5";          // the reference's run too: a limit of 10 s
  takes_a_while.env["WORKBOOK_TEST_RUNNER_STUDENT_SLEEP"] = "1.5";  // the student's 2 s, 20x the quick one's
  const workbook::Run mine = ctx.student("long", Bundle{}, takes_a_while);
  EXPECT_TRUE(mine.ok()) << mine.message;
  EXPECT_TRUE(ctx.timed_out().empty());
  EXPECT_EQ(ctx.reference_runs(), 2);
  fs::remove_all(dir);
}

// Issue 20 item 2, a check that runs the student's code first (lesson 3's
// predict): the reference runs first all the same, so a hang costs 20x its
// time (here a floor of 1 s), not the check's minute; the check's own call of
// the reference on those inputs then reads that run back instead of running it again.
TEST(RunLimit, AStudentFirstCheckIsLimitedByTheReferenceRunFirstAndReadBack) {
  const fs::path dir = fresh_dir("run-limit-student-first");
  workbook::Context ctx = context_in(dir);
  ctx.reference_cache = dir / "cache";
  ctx.run_limit_floor_s = 1;
  ctx.current_check = "predict";
  Bundle in;
  in.values["x"] = 3;
  const workbook::RunOptions ok = runner_writes(R"({"_status": "ok", "y": 6})");
  // A right answer: the reference ran once, for the student's run and the check's call alike.
  const workbook::Run mine = ctx.student("predict", in, ok);
  ASSERT_TRUE(mine.ok()) << mine.message;
  EXPECT_EQ(ctx.reference_runs(), 1);
  const workbook::Run ref = ctx.reference("predict", in, ok);
  ASSERT_TRUE(ref.ok()) << ref.message;
  EXPECT_EQ(ref.out.values["y"], 6);
  EXPECT_EQ(ctx.reference_runs(), 1) << "the check's reference call ran the reference again";
  EXPECT_EQ(ctx.reference_cache_hits(), 0) << "reading back its own run ahead is not a hit of the class's cache";
  // Other inputs: the reference's time is known, so no run ahead; the check's call runs it.
  in.values["x"] = 4;
  ASSERT_TRUE(ctx.student("predict", in, ok).ok());
  EXPECT_EQ(ctx.reference_runs(), 1);
  ASSERT_TRUE(ctx.reference("predict", in, ok).ok());
  EXPECT_EQ(ctx.reference_runs(), 2);

  // A hang of another exercise, first in its check: stopped after the floor, saying why.
  workbook::RunOptions hangs = runner_writes(R"({"_status": "ok"})");
  hangs.env["WORKBOOK_TEST_RUNNER_STUDENT_SLEEP"] = "60";
  hangs.call = "predict(model on cuda:0)";
  const auto t0 = std::chrono::steady_clock::now();
  const workbook::Run hung = ctx.student("spin", in, hangs);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30)
      << "the check's own limit (60 s) was used, not the reference's time";
  EXPECT_EQ(hung.status, "crash");
  EXPECT_NE(hung.message.find("did not finish within the time limit"), std::string::npos) << hung.message;
  // The floor, or 20x the reference's time where a loaded machine started it slowly.
  EXPECT_TRUE(hung.message.find("after 1.0 s (its limit: at least 1 s, the reference needing only ") != std::string::npos ||
              hung.message.find("x the reference's own ") != std::string::npos)
      << hung.message;
  EXPECT_EQ(ctx.reference_runs(), 3);
  fs::remove_all(dir);
}

// A stub is TODO at once: the reference's run ahead of it is its only cost.
TEST(RunLimit, AStubInAStudentFirstCheckIsTodo) {
  const fs::path dir = fresh_dir("run-limit-stub");
  workbook::Context ctx = context_in(dir);
  workbook::RunOptions stub = runner_writes(R"({"_status": "ok"})");
  stub.env["WORKBOOK_TEST_RUNNER_STUDENT_VALUES"] = R"({"_status": "todo", "_message": "not done yet: predict"})";
  const auto t0 = std::chrono::steady_clock::now();
  const workbook::Run mine = ctx.student("predict", Bundle{}, stub);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5);
  EXPECT_EQ(mine.status, "todo");
  EXPECT_EQ(ctx.reference_runs(), 1);
  fs::remove_all(dir);
}

// --deadline: a run gets what is left of it, then no run starts, and the lesson says so.
TEST(RunLimit, TheDeadlineCutsARunThenNoneStarts) {
  const fs::path dir = fresh_dir("deadline");
  workbook::Context ctx = context_in(dir);
  ctx.deadline_s = 3;
  workbook::RunOptions slow = runner_writes(R"({"_status": "ok"})");
  slow.env["WORKBOOK_TEST_RUNNER_STUDENT_SLEEP"] = "60";
  const auto t0 = std::chrono::steady_clock::now();
  const workbook::Run cut = ctx.student("slow", Bundle{}, slow);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10);
  EXPECT_NE(cut.message.find("(its limit: what was left of the time for grading this submission (--deadline))"),
            std::string::npos) << cut.message;
  EXPECT_TRUE(ctx.deadline_hit());
  const workbook::Run none = ctx.reference("slow", Bundle{}, slow);
  EXPECT_NE(none.message.find("was not run: the time for grading this submission ran out"), std::string::npos)
      << none.message;
  fs::remove_all(dir);
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

// Timed by the emulated GPU's modelled clock, student and reference, on the
// inputs of `student` and `reference` (runner results as JSON).
workbook::Timing timed(const std::string& test, const std::string& student, const std::string& reference,
                       nlohmann::json* details = nullptr) {
  const fs::path dir = fresh_dir(test);
  workbook::Context ctx = context_in(dir);
  workbook::RunOptions o = runner_writes(reference);
  o.env["WORKBOOK_TEST_RUNNER_STUDENT_VALUES"] = student;
  const workbook::Timing t = ctx.time("train_one_epoch", Bundle{}, o);
  if (details != nullptr) *details = ctx.details;
  fs::remove_all(dir);
  return t;
}

// The same code graded 0.76x, 1.39x and 1.01x by the host's clock in three
// runs (issue 16): on the emulated GPU the modelled clock decides, the same
// every run, so one round is enough and the host's figures are only shown.
TEST(Timing, OnTheEmulatedGpuTheModelledClockDecidesInOneRound) {
  nlohmann::json details;
  const workbook::Timing t =
      timed("modelled-one-round",
            R"({"_status": "ok", "_times_ms": [50, 50, 50], "_modelled_ms": [2.0, 2.0, 2.0], "_modelled_gpu": "H100 SXM"})",
            R"({"_status": "ok", "_times_ms": [1, 1, 1], "_modelled_ms": [2.0, 2.0, 2.0], "_modelled_gpu": "H100 SXM"})",
            &details);
  ASSERT_FALSE(t.stopped) << t.stopped->message;
  EXPECT_EQ(t.modelled_gpu, "H100 SXM");
  EXPECT_EQ(t.student_ms, std::vector<double>{2.0});
  EXPECT_DOUBLE_EQ(t.ratio, 1.0);
  EXPECT_EQ(details["timing"]["clock"], "modelled H100 SXM");
  EXPECT_EQ(details["timing"]["host_yours_ms"], nlohmann::json::array({50.0}));
  const workbook::Outcome o = workbook::Context::judge(t);
  EXPECT_EQ(o.verdict, workbook::Verdict::pass) << o.message;
  EXPECT_NE(o.note.find("yours 2.000 ms, reference 2.000 ms on the modelled H100 SXM: 1.00x"), std::string::npos)
      << o.note;
}

// Deterministic, so a slowdown over the limit fails outright: no "inconclusive".
TEST(Timing, AModelledSlowdownOverTheLimitFails) {
  const workbook::Timing t =
      timed("modelled-slow", R"({"_status": "ok", "_times_ms": [1], "_modelled_ms": [3.5], "_modelled_gpu": "T4"})",
            R"({"_status": "ok", "_times_ms": [1], "_modelled_ms": [1.0], "_modelled_gpu": "T4"})");
  const workbook::Outcome o = workbook::Context::judge(t, 3.0);
  EXPECT_EQ(o.verdict, workbook::Verdict::fail);
  EXPECT_NE(o.message.find("3.50x, over the 3.0x limit"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("the same on every run"), std::string::npos) << o.message;
  EXPECT_EQ(workbook::Context::judge(t, 4.0).verdict, workbook::Verdict::pass);
}

// The runner times both sides alike: a student's run without modelled times
// (its results rewritten) is not trusted, and the GPU's name is the reference's.
TEST(Timing, AStudentsRunCannotChooseTheClock) {
  const std::string reference =
      R"({"_status": "ok", "_times_ms": [1], "_modelled_ms": [1.0], "_modelled_gpu": "H100 SXM"})";
  const workbook::Outcome none =
      workbook::Context::judge(timed("modelled-missing", R"({"_status": "ok", "_times_ms": [0.001]})", reference));
  EXPECT_EQ(none.verdict, workbook::Verdict::fail);
  EXPECT_NE(none.message.find("sent no modelled timings"), std::string::npos) << none.message;
  const workbook::Timing named = timed(
      "modelled-name", R"({"_status": "ok", "_times_ms": [1], "_modelled_ms": [1.0], "_modelled_gpu": "<b>my GPU</b>"})",
      reference);
  EXPECT_EQ(named.modelled_gpu, "H100 SXM");
  const workbook::Outcome bad =
      workbook::Context::judge(timed("modelled-type", R"({"_status": "ok", "_times_ms": [1], "_modelled_ms": ["0"]})",
                                     reference));
  EXPECT_EQ(bad.verdict, workbook::Verdict::fail);
  EXPECT_NE(bad.message.find("_modelled_ms is not a list of numbers"), std::string::npos) << bad.message;
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

// The student's run of the fake runner, sending `values` (and more environment).
workbook::Run student_sends(const std::string& test, const std::string& values,
                            const std::map<std::string, std::string>& env = {}) {
  const fs::path dir = fresh_dir(test);
  workbook::Context ctx = context_in(dir);
  // The reference (which student() runs first) sends what a reference does; the student's run, `values`.
  workbook::RunOptions o = runner_writes(R"({"_status": "ok"})");
  o.env["WORKBOOK_TEST_RUNNER_STUDENT_VALUES"] = values;
  for (const auto& [k, v] : env) o.env[k] = v;
  workbook::Run r = ctx.student("count_devices", Bundle{}, o);
  fs::remove_all(dir);
  return r;
}

// ---------------------------------------------------------------- what a student's run sends (issue 19)

// The attack of issue 19: the results were rewritten on disk (from an atexit
// hook) after the runner wrote them. Only what comes through the checker's pipe counts.
TEST(Context, ResultsLeftOnDiskAreIgnored) {
  const workbook::Run r = student_sends("on-disk", R"({"_status": "ok", "count": 2})", {{"WORKBOOK_TEST_RUNNER_ON_DISK", "1"}});
  EXPECT_EQ(r.status, "crash");
  EXPECT_NE(r.message.find("finished without sending its results"), std::string::npos) << r.message;
  EXPECT_FALSE(r.out.values.contains("count"));
}

TEST(Context, ResultsSentThroughThePipeAreRead) {
  const workbook::Run r = student_sends("through-pipe", R"({"_status": "ok", "count": 2})");
  ASSERT_TRUE(r.ok()) << r.status << ": " << r.message;
  EXPECT_EQ(r.out.values["count"], 2);
}

// A 62 MiB values.json took the root checker to 4.6 GiB and 30 s: refused unread now.
TEST(Context, OversizedResultsAreRefusedBeforeParsing) {
  const workbook::Run r = student_sends("oversized", "{}", {{"WORKBOOK_TEST_RUNNER_PAD", std::to_string(20u << 20)}});
  EXPECT_EQ(r.status, "crash");
  EXPECT_NE(r.message.find("sent 20.0 MiB of results, more than the 16 MiB the grader reads"), std::string::npos)
      << r.message;
}

TEST(Context, DeeplyNestedResultsAreRefusedBeforeParsing) {
  const std::string deep = std::string(1000, '[') + std::string(1000, ']');
  const workbook::Run r = student_sends("deep", R"({"_status": "ok", "x": )" + deep + "}");
  EXPECT_EQ(r.status, "crash");
  EXPECT_NE(r.message.find("nests arrays and objects 1001 levels deep, more than the 64 the grader reads"),
            std::string::npos)
      << r.message;
}

TEST(Context, AStudentsLongMessageIsCut) {
  const std::string values = R"({"_status": "error", "_message": ")" + std::string(100000, 'y') +
                             R"(", "_error_type": ")" + std::string(5000, 'E') + R"("})";
  const workbook::Run r = student_sends("long-message", values);
  EXPECT_EQ(r.status, "error");
  EXPECT_LE(r.message.size(), workbook::kMaxMessageBytes + 64);
  EXPECT_NE(r.message.find("bytes cut)"), std::string::npos) << r.message;
  EXPECT_LE(r.error_type.size(), 256u + 64u);
}

// The harness's keys of the wrong type would stop a check on a type error (an ERROR, the workbook's fault).
TEST(Context, HarnessKeysOfTheWrongTypeAreNotTrusted) {
  workbook::Run r = student_sends("status-type", R"({"_status": 5})");
  EXPECT_EQ(r.status, "crash");
  EXPECT_NE(r.message.find("sent results that are not to be trusted: its _status is 5, not ok, todo or error"),
            std::string::npos)
      << r.message;
  r = student_sends("times-type", R"({"_status": "ok", "_times_ms": ["fast"]})");
  EXPECT_EQ(r.status, "crash");
  EXPECT_NE(r.message.find("its _times_ms is not a list of numbers"), std::string::npos) << r.message;
}

// Counters go into the report: only devices' numbers are kept.
TEST(Context, CountersKeepOnlyNumbersPerDevice) {
  const std::string values = R"({"_status": "ok", "_counters": {"cuda:0": {"kernel_launches": 3, "junk": ")" +
                             std::string(1000, 'j') + R"("}, "evil": {"x": 1}, "cuda:1": "text"}})";
  const workbook::Run r = student_sends("counters", values);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.counters(0), (nlohmann::json{{"kernel_launches", 3}}));
  EXPECT_FALSE(r.out.values["_counters"].contains("evil"));
  EXPECT_FALSE(r.out.values["_counters"].contains("cuda:1"));
}

// The runner sends the resets it refused (tiny::cuda::grading): the run fails, saying why.
TEST(Context, AResetOfTheCountersByTheStudentsCodeFailsTheRun) {
  const workbook::Run r = student_sends(
      "resets", R"({"_status": "ok", "_refused_resets": {"reset_device_counters": 1, "reset_peak_memory_stats": 0}})");
  EXPECT_EQ(r.status, "crash");
  EXPECT_EQ(r.message,
            "reset the GPU counters (tiny::cuda::reset_device_counters) during a graded run: the checks count the work "
            "your code does, so they cannot be reset; take the reset out of your exercise.cpp");
  workbook::Context ctx;
  EXPECT_EQ(ctx.unless_ok(r)->message.rfind("your code reset the GPU counters", 0), 0u);
}

// In a graded run tiny refuses resets of the counters and counts them; the
// grader's own code still resets. Process-wide and for good: in a child, whose exit code says.
int refused_resets_child() {
  namespace cuda = tiny::cuda;
  const tiny::Tensor x = tiny::ones({64}).to("cuda:0");
  const tiny::Tensor y = x + x;
  cuda::synchronize(0);
  const uint64_t launches = cuda::device_counters(0).kernel_launches;
  const size_t peak = cuda::max_memory_allocated(0);
  cuda::grading::refuse_counter_resets();
  cuda::reset_device_counters(0);
  cuda::reset_device_counters(1);
  cuda::reset_peak_memory_stats(0);
  const cuda::grading::RefusedResets refused = cuda::grading::refused_counter_resets();
  bool ok = y.defined() && launches > 0 && cuda::device_counters(0).kernel_launches == launches &&
            cuda::max_memory_allocated(0) == peak && refused.reset_device_counters == 2 &&
            refused.reset_peak_memory_stats == 1;
  cuda::grading::reset_device_counters(0);
  ok = ok && cuda::device_counters(0).kernel_launches == 0;
  std::fprintf(stderr, ok ? "counters kept\n" : "counters NOT kept\n");
  return ok ? 0 : 1;
}

TEST(GpuCounters, AGradedRunRefusesResetsAndCountsThem) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(refused_resets_child()), testing::ExitedWithCode(0), "counters kept");
}

// ---------------------------------------------------------------- exchange limits (issue 19)

TEST(Exchange, LimitsAreCheckedBeforeParsing) {
  EXPECT_EQ(workbook::exchange_limits_problem(R"({"a": [[1], {"b": "[[[[["}]})"), "");
  EXPECT_EQ(workbook::exchange_limits_problem(std::string(17u << 20, ' ')),
            "is 17 MiB, more than the 16 MiB the grader reads");
  EXPECT_EQ(workbook::exchange_limits_problem(std::string(65, '[') + std::string(65, ']')),
            "nests arrays and objects 65 levels deep, more than the 64 the grader reads");
  const fs::path dir = fresh_dir("big-values");
  fs::create_directories(dir);
  { std::ofstream(dir / "values.json") << std::string(17u << 20, ' '); }
  try {
    Bundle::load(dir);
    FAIL() << "no error";
  } catch (const tiny::IOError& e) {
    EXPECT_NE(std::string(e.what()).find("is 17 MiB, more than the 16 MiB the grader reads"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(Exchange, AFileChangedAfterTheRunnerListedItIsRefused) {
  const fs::path dir = fresh_dir("digest");
  Bundle b;
  b.values["_status"] = "ok";
  b.put("x", tiny::ones({3}));
  const std::string text = b.save_tensors(dir);
  EXPECT_TRUE(tiny::equal(Bundle::parse(dir, text, "its results").tensor("x"), tiny::ones({3})));
  tiny::io::save_npy((dir / "t0.npy").string(), tiny::zeros({3}));  // what a leftover process could do
  try {
    Bundle::parse(dir, text, "its results");
    FAIL() << "no error";
  } catch (const tiny::IOError& e) {
    EXPECT_NE(std::string(e.what()).find("its results: t0.npy (the tensor 'x') was changed after the runner wrote it"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// One large file named a million times would be loaded a million times.
TEST(Exchange, AFileListedTwiceIsRefused) {
  const fs::path dir = fresh_dir("twice");
  Bundle b;
  b.put("x", tiny::ones({3}));
  nlohmann::json doc = nlohmann::json::parse(b.save_tensors(dir));
  nlohmann::json again = doc["_tensors"][0];
  again["name"] = "y";
  doc["_tensors"].push_back(again);
  try {
    Bundle::parse(dir, doc.dump(), "its results");
    FAIL() << "no error";
  } catch (const tiny::IOError& e) {
    EXPECT_NE(std::string(e.what()).find("lists the file 't0.npy' twice"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(Exchange, CutTextBoundsEachLineAndTheWhole) {
  EXPECT_EQ(workbook::cut_text("short\ntext\n"), "short\ntext\n");
  EXPECT_EQ(workbook::cut_text(std::string(10, 'a') + "\nb", 100, 4), "aaaa... (6 bytes cut)\nb");
  const std::string many = workbook::cut_text(std::string(50, 'z') + "\n" + std::string(50, 'z'), 60, 100);
  EXPECT_EQ(many, std::string(50, 'z') + "\n... (50 bytes cut)\n");
  // Never inside a UTF-8 character: "é" is two bytes.
  EXPECT_EQ(workbook::cut_text("\xc3\xa9\xc3\xa9", 100, 3), "\xc3\xa9... (2 bytes cut)");
}

}  // namespace
