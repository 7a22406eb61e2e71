/// @file checker.h
/// @brief The trusted side of a lesson's checks: builds the inputs, runs the
/// student's runner and the reference runner in child processes on the same
/// inputs, and turns the difference into a verdict a student can act on.
///
/// A lesson's checks (tests/lessons/N_name/checks.cpp) are a list of
/// WORKBOOK_CHECK functions in the order a student meets them:
/// @code
/// WORKBOOK_CHECK(count_devices, "count_devices() returns tiny::cuda::device_count()") {
///   Bundle in;
///   Run mine, ref;
///   if (auto early = ctx.both("count_devices", in, mine, ref)) return *early;
///   if (mine.out.values["count"] != ref.out.values["count"]) return Outcome::fail("...");
///   return Outcome::pass();
/// }
/// @endcode
/// The checker program (checker_main) runs them, prints one line per check,
/// writes JSON for the grader, and generates the CTest entries
/// `lesson_N.<check>` and `solution_N.<check>`.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "bundle.h"
#include "process.h"

namespace workbook {

/// @brief What a check concluded.
enum class Verdict {
  pass,   ///< right
  fail,   ///< wrong, with the reason
  todo,   ///< the stub is still there ("not done yet: ...")
  skip,   ///< a requirement is not met here (the reason says which)
  error,  ///< the workbook itself failed (the reference, the harness): not the student's fault
};

/// @brief A verdict and the words that go with it.
struct Outcome {
  Verdict verdict = Verdict::pass;  ///< what the check concluded
  std::string message;              ///< why (empty for a plain pass)
  std::string note;                 ///< an extra line shown with any verdict (e.g. timing inconclusive)
  /// @brief Right (with an optional note, e.g. the timing figures).
  static Outcome pass(std::string note = "") { return {Verdict::pass, "", std::move(note)}; }
  /// @brief Wrong, and why, in words a student can act on.
  static Outcome fail(std::string why) { return {Verdict::fail, std::move(why), ""}; }
  /// @brief The stub is still there: what is left to do.
  static Outcome todo(std::string what) { return {Verdict::todo, std::move(what), ""}; }
  /// @brief Not run here, and the requirement that is missing.
  static Outcome skip(std::string reason) { return {Verdict::skip, std::move(reason), ""}; }
  /// @brief The workbook failed (not the student's fault), and how.
  static Outcome error(std::string what) { return {Verdict::error, std::move(what), ""}; }
};

/// @brief How to run one exercise: the GPUs the emulator shows, its mode, limits.
struct RunOptions {
  int gpus = 2;                             ///< TINY_EMULATED_GPUS for the child
  std::string mode;                         ///< TINY_EMULATED_GPU_MODE ("" = threaded)
  double timeout_s = 60;                    ///< wall time for one run
  size_t memory_limit = size_t{3} << 30;    ///< bytes of host memory for the child (cgroup), 0 = none
  std::map<std::string, std::string> env;   ///< more environment for the child
  std::string call;                         ///< how failures name this run, e.g. `choose_device("cpu") with 2 GPUs`
  size_t output_limit = size_t{64} << 20;   ///< student's run: bytes any one file it writes may reach, its log included
  int process_limit = 0;                    ///< student's run: processes and threads at once, 0 = max(256, 4 per CPU)
};

/// @brief One run of an exercise in a child process.
///
/// A student's run is hostile until proven otherwise: it runs in a sandbox
/// (ProcessOptions::sandbox: its own uid as root, no network, the reference
/// and the checks hidden) in its own folder of the work folder, which is
/// root's and mode 0700, so it sees only its own inputs; only what the runner
/// sends through the channel the checker holds counts (runner.h: never a
/// values.json left on disk, nor what it prints, which goes to its log), with
/// the .npy files of its `out` folder it lists by digest; a link there is
/// refused, and so are results over the exchange limits (bundle.h), harness
/// keys of the wrong type, and a reset of the GPU counters by the code graded. A path under `work_dir` in its inputs (a file the check names
/// there, e.g. a checkpoint to write) becomes the same name in its own folder.
/// The reference's runs are trusted.
struct Run {
  std::string status;      ///< ok, todo, error (an exception), crash (the process died or hung, or its results cannot be used)
  std::string message;     ///< the exception's text, or how the process ended and its last output
  std::string error_type;  ///< with status error: the exception's type, e.g. "tiny::DeviceError"
  std::string call;        ///< RunOptions::call of the run
  Bundle out;              ///< what the runner wrote (empty unless status is ok/todo/error)
  double elapsed_ms = 0;   ///< the call itself, without the device work still queued

  /// @brief The exercise returned normally.
  bool ok() const { return status == "ok"; }
  /// @brief A device's counters read right after the call (an empty object if absent).
  nlohmann::json counters(int device = 0) const;
};

/// @brief Thrown by every run of a Context whose runner could not be started at
/// all (missing, or being rebuilt by another check): nothing of the student's
/// ran, so the check is an ERROR, the workbook's fault, never a failure of theirs
/// (checker_main turns it into Outcome::error with this message).
struct RunnerNotStarted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// @brief Student-versus-reference timing: alternating runs, the ratio of the medians and the spread.
struct Timing {
  std::vector<double> student_ms;    ///< per round: median of the repeats
  std::vector<double> reference_ms;  ///< per round
  /// @brief The median of student_ms over the median of reference_ms: the very
  /// figures a report shows beside it, so "yours 1.38 ms, reference 1.12 ms" reads 1.23x.
  double ratio = 0;
  double ratio_low = 0;              ///< smallest round's student/reference
  double ratio_high = 0;             ///< largest round's student/reference
  /// @brief Set when a run did not return normally, so nothing was timed: what
  /// to report instead (a stub stays TODO, a crash of the student's code is a
  /// FAIL, a broken reference is an ERROR).
  std::optional<Outcome> stopped;
  /// @brief The GPU whose modelled clock timed both ("H100 SXM"): then the
  /// figures are modelled time, the same on every run, and one round decides;
  /// empty when they are the host's clock (a real GPU), noisy between runs.
  std::string modelled_gpu;

  /// @brief The timing of these rounds (one figure per round each, the same length): medians, ratio, spread.
  static Timing of_rounds(std::vector<double> student_ms, std::vector<double> reference_ms);
};

/// @brief What a check function is given.
class Context {
 public:
  /// @brief The seed of this checker run (fresh unless --seed); make every random input from it.
  uint64_t seed = 0;

  /// @brief A generator seeded from `seed` and `stream` (different inputs get different streams).
  tiny::Generator generator(uint64_t stream = 0) const;

  /// @brief Runs the exercise with the student's code. Until the reference has run the exercise here, the
  /// reference runs first on the same inputs (kept in reference_cache, for the check's own reference call to read
  /// back), so the student's run is limited by the reference's time (run_limit_factor), not the check's.
  Run student(const std::string& exercise, const Bundle& in, const RunOptions& options = {});
  /// @brief Runs the exercise with the reference solution.
  Run reference(const std::string& exercise, const Bundle& in, const RunOptions& options = {});
  /// @brief Runs the student's code, then the reference; returns the outcome
  /// when the comparison cannot go on (a stub, a crash, an exception, a broken reference).
  std::optional<Outcome> both(const std::string& exercise, const Bundle& in, Run& student_run, Run& reference_run,
                              const RunOptions& options = {});
  /// @brief The outcome for a student's run that did not return normally (nullopt when it did).
  std::optional<Outcome> unless_ok(const Run& student_run) const;

  /// @brief Times student and reference alternately (`rounds` each, `repeat` calls per process):
  /// on the emulated GPU by its modelled clock (one round, since it gives the same times every run),
  /// on a real GPU by the host's clock.
  Timing time(const std::string& exercise, const Bundle& in, const RunOptions& options = {}, int rounds = 5,
              int repeat = 3);
  /// @brief The verdict on a Timing: fail when the student is slower than `limit`x (modelled time),
  /// or clearly so in every round (host time).
  static Outcome judge(const Timing& timing, double limit = 3.0);

  /// @brief Facts to show with the result (counters, timings) in the JSON and the report.
  nlohmann::json details = nlohmann::json::object();
  /// @brief Every device the reference's runs saw (name, memory, emulated, the GPU
  /// an emulated one's clock models), each as it was in its run, for the report's
  /// Machine table; taken from trusted runs only, so a submission cannot pose as a GPU.
  nlohmann::json devices = nlohmann::json::array();

  /// @brief The runner built from the student's code (set by checker_main).
  std::filesystem::path student_runner;
  /// @brief The runner built from the reference solution (set by checker_main).
  std::filesystem::path reference_runner;
  /// @brief This checker's work folder (mkdtemp: mode 0700), one folder per run inside.
  std::filesystem::path work_dir;
  /// @brief What a student's run must not read: the reference's sources and
  /// runner, the checks (hidden in its sandbox, see process.h).
  std::vector<std::filesystem::path> hidden_paths;
  /// @brief A folder open to all, beside the work folder, holding libtiny.so
  /// for a student's run (its LD_LIBRARY_PATH): as its sandbox's uid it may
  /// not reach the build tree (e.g. a clone in a mode-0700 folder), so the
  /// runner's RUNPATH would not find the library.
  std::filesystem::path library_dir;
  /// @brief Makes a program or library of the build tree reachable from a
  /// student's sandbox (linked or copied into library_dir); returns its new path,
  /// or "" when that is not possible.
  std::filesystem::path share(const std::filesystem::path& file);
  /// @brief The student's runner is the reference (the `solution_N.*` tests).
  bool student_is_reference = false;
  double timeout_cap_s = 0;  ///< --timeout: caps every run's timeout_s (0: none)
  /// @brief A student's run may take this many times the reference's own run
  /// of the same exercise (measured in this checker), at least run_limit_floor_s
  /// and never more than the check's own RunOptions::timeout_s.
  double run_limit_factor = 20;
  double run_limit_floor_s = 10;  ///< the least a student's run is given once the reference's time is known
  /// @brief --deadline: seconds this checker has for all its runs from its start
  /// (0: none). Each run is cut to what is left; once it is spent, no run starts.
  double deadline_s = 0;
  /// @brief The check under way (set by checker_main), named when a run times out.
  std::string current_check;
  /// @brief "" until a student's run times out; then which run, in which check,
  /// and its limit: every later student's run fails at once with it (a lesson
  /// that hung once would hang again, and each hang costs a whole limit).
  const std::string& timed_out() const { return timed_out_; }
  /// @brief Seconds left before --deadline (a large number without one).
  double seconds_left() const;
  /// @brief Whether --deadline stopped a run or kept one from starting: the lesson is then "out of time".
  bool deadline_hit() const { return deadline_hit_; }
  /// @brief A folder shared by the checkers of a class (--reference-cache; "" for none): a run of the
  /// reference (not a timed one) whose inputs, exercise, runner, GPUs, mode, limits and TINY_*
  /// environment (the modelled GPU) are exactly those of a run made before is read back from it
  /// instead of being run again; a run that returned normally is added to it. The whole key is
  /// stored and compared, not only its digest, and inputs naming this checker's own folder are never cached.
  /// Without --reference-cache, checker_main sets a folder of this checker's own (in work_dir, out of a
  /// student's run's reach), so the reference's run that student() makes first is read back, not made again.
  std::filesystem::path reference_cache;
  /// @brief The reference's runs started here (timed ones not counted).
  int reference_runs() const { return reference_runs_; }
  /// @brief The reference's runs answered from reference_cache instead.
  int reference_cache_hits() const { return reference_cache_hits_; }

 private:
  /// @brief One run of `runner` (who: "student" or "reference"); `ahead`: the reference's run made by student()
  /// before the student's, whose first read back from reference_cache is not counted as a cache hit.
  Run run(const std::filesystem::path& runner, const std::string& who, const std::string& exercise, const Bundle& in,
          const RunOptions& options, int repeat = 0, bool ahead = false);
  /// @brief The time limit of a run and why it is that limit (for a timeout's message).
  double run_limit(bool hostile, const std::string& key, const RunOptions& options, std::string& why) const;
  /// @brief Whether a reference run of `exercise` was timed here (then a student's run gets its own limit).
  bool knows_reference_time(const std::string& exercise, int repeat = 0) const;
  /// @brief A reference run's place in reference_cache: its whole key ("" when its inputs name this checker's own folder) and folder.
  struct CacheEntry {
    std::string key;              ///< exercise, runner, options and inputs, compared whole
    std::filesystem::path dir;    ///< reference_cache / the key's digest
  };
  /// @brief The cache entry of a reference run whose inputs are in `dir`/in.
  CacheEntry cache_entry_for(const std::filesystem::path& runner, const std::string& exercise, const RunOptions& options,
                             const std::filesystem::path& dir) const;
  /// @brief The run kept in `entry` (nullopt: none, or damaged), its time counted as the reference's (`key`).
  std::optional<Run> cached_run(const CacheEntry& entry, const std::string& key, const RunOptions& options);
  /// @brief Keeps a reference run that returned normally in `entry` (written aside, then renamed into place).
  void keep_in_cache(const CacheEntry& entry, const std::filesystem::path& dir, const std::string& sent, double seconds);
  /// @brief How a runner is started: its arguments, environment (the emulated GPU), limits and, for a student's, its sandbox.
  ProcessOptions runner_process(const std::filesystem::path& runner, const std::string& exercise,
                                const RunOptions& options, int repeat, const std::filesystem::path& dir, double limit,
                                bool hostile) const;
  /// @brief Why a run that did not end well is a crash ("timed out after ...", its last output); notes a timeout.
  std::string failure_message(const ProcessResult& process, const std::string& exercise, const RunOptions& options,
                              double limit, const std::string& why_limit, bool hostile);
  /// @brief Reads what a run sent into `result`; "" when it can be trusted, else why it is a crash.
  std::string read_results(Run& result, const std::filesystem::path& dir, const std::string& sent, size_t sent_bytes,
                           bool hostile);
  int runs_ = 0;
  int reference_runs_ = 0, reference_cache_hits_ = 0;
  std::map<std::string, double> reference_seconds_;  ///< per exercise and repeat: the slowest reference run
  /// @brief reference_cache entries of runs student() made ahead of the student's, not yet read back by the check.
  std::set<std::string> ran_ahead_;
  std::string timed_out_;
  bool deadline_hit_ = false;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

/// @brief One check of a lesson.
struct Check {
  std::string name;                       ///< CTest's lesson_N.NAME
  std::string summary;                    ///< what a pass means, one line
  std::function<Outcome(Context&)> run;   ///< the check
  bool timed = false;                     ///< a timing check: never run beside another one
};

/// @brief Registers a check (WORKBOOK_CHECK and WORKBOOK_TIMED_CHECK make one).
struct CheckRegistrar {
  /// @brief Adds the check to this checker's list, in the order of the file.
  CheckRegistrar(const char* name, const char* summary, Outcome (*fn)(Context&), bool timed);
};

/// @brief The checker program: run `lesson_N_checks --help` for its options.
int checker_main(int argc, char** argv);

/// @brief The lesson number, title and folder the checker belongs to (set by WORKBOOK_LESSON).
struct LessonInfo {
  /// @brief Records the lesson's number and folder.
  LessonInfo(int number, const char* folder);
};

/// @brief The GPU counters a lesson is about (set by WORKBOOK_LESSON_COUNTERS).
struct LessonCounters {
  /// @brief Records the counters' names, in the order the scoreboard shows them.
  LessonCounters(std::initializer_list<const char*> names);
};

}  // namespace workbook

/// @brief Names the lesson these checks belong to (once per checks.cpp).
#define WORKBOOK_LESSON(number, folder) static const ::workbook::LessonInfo workbook_lesson_info(number, folder)

/// @brief The GPU counters the scoreboard shows for this lesson, yours beside the
/// reference's, summed over its checks: names of the runner's `_counters`
/// ("synchronizations", "kernel_launches", "bytes_host_to_device_pinned", ...,
/// "max_memory_allocated", the largest of any check), or "bytes_host_to_device"
/// and "bytes_device_to_host" (pageable and pinned together). A lesson without
/// this line shows none: its counters are not what it teaches, or are not
/// collected (lesson 6's ranks are processes of their own).
#define WORKBOOK_LESSON_COUNTERS(...) \
  static const ::workbook::LessonCounters workbook_lesson_counters({__VA_ARGS__})

/// @brief What WORKBOOK_CHECK and WORKBOOK_TIMED_CHECK expand to: declares, registers and opens the check's body.
#define WORKBOOK_CHECK_IMPL(name, summary, timed)                                                    \
  static ::workbook::Outcome workbook_check_##name(::workbook::Context& ctx);                        \
  static const ::workbook::CheckRegistrar workbook_check_registrar_##name(#name, summary,            \
                                                                          &workbook_check_##name, timed); \
  static ::workbook::Outcome workbook_check_##name([[maybe_unused]] ::workbook::Context& ctx)

/// @brief Defines a check; the body sees `ctx` and returns an Outcome.
#define WORKBOOK_CHECK(name, summary) WORKBOOK_CHECK_IMPL(name, summary, false)
/// @brief Defines a timing check (run alone, and skipped by --no-timing).
#define WORKBOOK_TIMED_CHECK(name, summary) WORKBOOK_CHECK_IMPL(name, summary, true)
