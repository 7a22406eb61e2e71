// workbook-grader: the program behind ./workbook grade, check, run, hint, reset,
// next, solution, watch and list (and the maintainers' stubs): everything that
// knows the lessons. Run it with --help.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "batch.h"
#include "build.h"
#include "demo.h"
#include "grade.h"
#include "junit.h"
#include "harness/output_of.h"
#include "harness/process.h"
#include "recipe.h"
#include "report.h"
#include "shard.h"
#include "stubs.h"
#include "submission.h"
#include "text_file.h"
#include "tiny/error.h"

namespace fs = std::filesystem;
using namespace workbook;

namespace {

std::string stub_of(const Recipe& recipe, const Lesson& lesson) {
  const fs::path solution = recipe.source_dir / "solutions" / lesson.folder / "exercise.cpp";
  return make_stub(read_whole_file(solution), lesson.number, solution.string());
}

// The file as committed in git's HEAD ("" outside a git checkout or when untracked).
std::string committed_version(const Recipe& recipe, const fs::path& file) {
  const std::string relative = fs::relative(file, recipe.source_dir).string();
  // An argument vector, no shell: a quote in the checkout's path or a lesson's name is part of the name.
  const ProgramOutput git = output_of({"git", "-C", recipe.source_dir.string(), "show", "HEAD:" + relative}, true);
  return git.ok() ? git.out : std::string();
}

// Keeps a copy of `file` under a name no other backup has: FILE.<time>.bak,
// else FILE.<time>.1.bak, .2.bak, ... (two resets within a second keep both).
fs::path keep_backup(const fs::path& file) {
  const std::string text = read_whole_file(file);
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  for (int n = 0; n < 100000; ++n) {
    const fs::path backup = file.string() + "." + stamp + (n == 0 ? "" : "." + std::to_string(n)) + ".bak";
    // O_EXCL: a name taken, even by another reset at this very moment, is never overwritten.
    const int fd = ::open(backup.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) continue;
    TINY_CHECK(fd >= 0, IOError, "cannot write the backup ", backup.string(), ": ", std::strerror(errno));
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      done += static_cast<size_t>(w);
    }
    const bool ok = done == text.size() && ::close(fd) == 0;
    TINY_CHECK(ok, IOError, "cannot write the backup ", backup.string(), ": ", std::strerror(errno));
    return backup;
  }
  TINY_THROW(IOError, "cannot find a free name for a backup of ", file.string(), ": remove old .bak files beside it");
}

// ---------------------------------------------------------------- state (hints shown)

fs::path state_file(const Recipe& recipe) { return recipe.build_dir / "grader" / "state.json"; }

nlohmann::json load_state(const Recipe& recipe) {
  try {
    std::ifstream in(state_file(recipe));
    if (in.good()) return nlohmann::json::parse(in);
  } catch (const std::exception&) {
    // A damaged state file only forgets which hints were shown.
  }
  return nlohmann::json::object();
}

void save_state(const Recipe& recipe, const nlohmann::json& state) {
  std::error_code ec;
  fs::create_directories(state_file(recipe).parent_path(), ec);  // a build folder not made yet
  write_file_atomically(state_file(recipe), state.dump(1) + "\n");
}

// ---------------------------------------------------------------- grading

std::vector<const Lesson*> pick(const Recipe& recipe, const std::vector<int>& numbers) {
  std::vector<const Lesson*> out;
  if (numbers.empty()) {
    for (const Lesson& l : recipe.lessons) out.push_back(&l);
  } else {
    for (int n : numbers) out.push_back(&recipe.lesson(n));
  }
  return out;
}

// A work folder of this grader's own; first the ones graders and checkers
// killed outright (SIGKILL) left behind are removed (only those, proven theirs).
std::string work_root() {
  sweep_stale_temp_folders();
  return make_temp_folder("grade").string();
}

// Why the grader refuses to grade others' work here, and what the instructor
// can do: which protections the sandbox lacks and the likely cause.
std::string sandbox_refusal(const Isolation& isolation) {
  std::string text = "refusing to grade others' work (--batch or --require-sandbox) in a sandbox that lacks " +
                     isolation.missing() + ". ";
  if (!isolation.own_user) {
    text += "The grader is not running as root, so no run can have a uid of its own: run it as root. ";
  }
  if (!isolation.no_network || !isolation.paths_hidden || !isolation.own_pids) {
    text += geteuid() == 0
                ? "The grader runs as root but could not make namespaces: the container lacks the CAP_SYS_ADMIN "
                  "capability (Docker's default, and Gradescope's), or a seccomp or AppArmor profile forbids them. "
                : "No namespace could be made (unprivileged user namespaces are off here). ";
  }
  return text + "Grant it (docker run --cap-add SYS_ADMIN --cap-add NET_ADMIN --security-opt apparmor=unconfined ...; "
                "NET_ADMIN brings up each run's own loopback, where lesson 6's ranks meet), or where the "
                "platform cannot, delete solutions/, tests/ and .git from the image after building and grade with "
                "--unsafe in place of --require-sandbox (grader/gradescope/run_autograder; grader/README.md, "
                "\"A submission is hostile\")";
}

// Said plainly wherever a grade is shown when the sources could not be hidden:
// nothing can hide a file from its own owner without namespaces.
std::string unproctored() {
  const std::string why = geteuid() == 0 ? "the grader runs as root without CAP_SYS_ADMIN"
                                         : "unprivileged user namespaces are off on this system";
  return "unproctored: the compiler and the runs could read the workbook's own solutions/ and tests/ here (no mount "
         "namespace: " + why + "), so this grade cannot show the work is the student's own: an exercise.cpp that "
         "#includes the reference would score full marks. Grade it again as root where namespaces can be made "
         "(grader/README.md, \"A submission is hostile\").\n";
}

// Checks one lesson of the student's own tree in a scratch folder that is removed afterwards.
LessonResult check_own(const Recipe& recipe, const Lesson& lesson, const GradeOptions& options) {
  const fs::path work = work_root();
  LessonResult r = grade_lesson(recipe, lesson, recipe.source_dir / "lessons", recipe.student_dir, work, options);
  std::error_code ec;
  fs::remove_all(work, ec);
  return r;
}

// ---------------------------------------------------------------- watch

// How many hints of lesson `number` ./workbook hint has shown.
int hints_seen(const Recipe& recipe, int number) {
  const nlohmann::json state = load_state(recipe);
  if (!state.contains("hints_shown") || !state["hints_shown"].is_object()) return 0;
  const nlohmann::json& shown = state["hints_shown"];
  const auto it = shown.find(std::to_string(number));
  return it != shown.end() && it->is_number_integer() ? it->get<int>() : 0;
}

// A fresh screen for each report on a terminal (as rustlings does); a rule between reports in a pipe or a log.
void start_report() {
  if (isatty(1)) {
    std::printf("\033[H\033[2J\033[3J");
  } else {
    std::printf("\n----------------------------------------------------------------------\n");
  }
  std::fflush(stdout);
}

// Runs until Ctrl-C, which (exit_cleanly_on_interrupt, as for grade and check)
// stops the check under way at once, with its runs, removes their folders and
// cgroups, and exits 130.
int watch(const Recipe& recipe, GradeOptions options) {
  std::map<std::string, fs::file_time_type> seen;
  const fs::path lessons_dir = recipe.source_dir / "lessons";
  for (const Lesson& l : recipe.lessons) {
    std::error_code ec;
    seen[l.folder] = fs::last_write_time(lessons_dir / l.folder / "exercise.cpp", ec);
  }
  const char* banner = "watching lessons/*/exercise.cpp: save a file to check its lesson (Ctrl-C stops)\n";
  std::printf("%s", banner);
  std::fflush(stdout);
  options.timing = false;
  options.progress = true;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    for (const Lesson& l : recipe.lessons) {
      std::error_code ec;
      const auto t = fs::last_write_time(lessons_dir / l.folder / "exercise.cpp", ec);
      if (ec || t == seen[l.folder]) continue;
      seen[l.folder] = t;
      start_report();
      options.seed = fresh_seed();
      const LessonResult r = check_own(recipe, l, options);
      std::time_t now = std::time(nullptr);
      char when[16];
      std::strftime(when, sizeof when, "%H:%M:%S", std::localtime(&now));
      std::ostringstream report;
      print_watch_report(report, r, hints_seen(recipe, l.number), when);
      std::printf("%s\n%s", report.str().c_str(), banner);
      std::fflush(stdout);
    }
  }
}

// ---------------------------------------------------------------- the subcommands, one function each

// build [N...]: compiles the student's exercise of each lesson; 1 when one does not compile.
int build_lessons(const Recipe& recipe, const std::vector<int>& numbers) {
  const fs::path own_lessons = recipe.source_dir / "lessons";
  int failed = 0;
  for (const Lesson* l : pick(recipe, numbers)) {
    const LessonLock lock(recipe.student_dir / l->folder,
                          "waiting for another check of lesson " + std::to_string(l->number) + " to finish");
    BuildResult b;
    try {
      b = build_student(recipe, *l, own_lessons, recipe.student_dir, [&]() {
        std::fprintf(stderr, "building lesson %d with your exercise.cpp ...\n", l->number);
        std::fflush(stderr);
      });
    } catch (const std::exception& e) {  // e.g. exercise.cpp is a folder: this lesson only
      b.ok = false;
      b.log = std::string(e.what()) + "\n";
    }
    if (!b.ok) {
      ++failed;
      std::printf("lesson %d does not compile (lessons/%s/exercise.cpp):\n%s", l->number, l->folder.c_str(), b.log.c_str());
    } else {
      std::printf("lesson %d: %s\n%s", l->number, b.rebuilt ? "built" : "up to date", b.log.c_str());
    }
  }
  return failed == 0 ? 0 : 1;
}

// check N: builds lesson N and runs its checks, one line each; 0 when it passes.
int check_lesson(const Recipe& recipe, int number, GradeOptions options) {
  const Lesson& l = recipe.lesson(number);
  options.verbose = true;
  const LessonResult r = check_own(recipe, l, options);
  if (r.status == "does not compile") {
    std::printf("lesson %d does not compile (lessons/%s/exercise.cpp):\n%s", l.number, l.folder.c_str(), r.problem.c_str());
    return 1;
  }
  if (r.status == "error") {
    std::printf("%s", r.problem.c_str());
    return 1;
  }
  if (r.status == "passed") {
    std::printf("lesson %d passes. Compare with the reference: ./workbook solution %d; then ./workbook next\n", l.number, l.number);
    return 0;
  }
  std::printf("stuck? ./workbook hint %d\n", l.number);
  std::fflush(stdout);
  return 1;
}

// What `grade` was asked (its options, as CLI11 read them).
struct GradeArgs {
  std::vector<int> numbers;
  std::string submission, batch, json_file, html_file, junit_file, out_dir = "gradebook", expect;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  double run_timeout = 0;
  std::optional<double> deadline;
  bool resume = false, no_reference_cache = false, unsafe = false, require_sandbox = false;
  std::string shard_text;
  std::optional<int> shard_count;
  bool seed_given = false;  // --seed (a batch then grades every submission with it)
};

// The options that belong to one submission or to a batch, and the limits, checked before anything runs.
void check_grade_args(const GradeArgs& a) {
  if (!a.batch.empty()) {
    // One submission's files name one submission: a batch writes them per submission, never ignores them.
    const std::pair<const std::string*, const char*> single[] = {
        {&a.json_file, "--json"}, {&a.html_file, "--html"}, {&a.junit_file, "--junit"}, {&a.expect, "--expect"}};
    for (const auto& entry : single) {
      TINY_CHECK(entry.first->empty(), ValueError, entry.second, " ", *entry.first, " names one submission's file, and "
                 "--batch grades many: each submission's results.json, report.html and junit.xml are written to ",
                 a.out_dir, "/<submission>/, the class's index.html and gradebook.csv to ", a.out_dir,
                 "/ (choose that folder with --out): drop ", entry.second);
    }
  } else {
    TINY_CHECK(!a.resume, ValueError, "--resume goes on with a --batch's gradebook.csv: add --batch FOLDER (and the "
               "same --out), or drop --resume");
    TINY_CHECK(a.shard_text.empty() && !a.shard_count, ValueError, "--shard and --shard-count split a --batch's class: "
               "add --batch FOLDER, or drop them");
  }
  if (a.deadline) {
    TINY_CHECK(*a.deadline >= 10 && *a.deadline <= 86400, ValueError, "--deadline ", *a.deadline, " is not a time a "
               "submission can be graded in: give seconds from 10 to 86400 (default 600, Gradescope's own limit "
               "is 40 minutes; leave room for its setup)");
  }
  TINY_CHECK(a.run_timeout == 0 || (a.run_timeout >= 1 && a.run_timeout <= 3600), ValueError, "--timeout ",
             a.run_timeout, " is not a time a run of an exercise can take: give seconds from 1 to 3600, or leave it "
             "out (each run then gets 20x the reference's own time, at least 10 s)");
}

// Which part of the class a --batch grades: --shard, else a SLURM array task's or an indexed Job's, else all.
Shard shard_of(const GradeArgs& a) {
  Shard shard;
  shard.source = "the whole class";
  if (a.batch.empty()) return shard;
  if (!a.shard_text.empty()) {
    shard = parse_shard(a.shard_text);
    TINY_CHECK(!a.shard_count || *a.shard_count == shard.count, ValueError, "--shard-count ", *a.shard_count,
               " and --shard ", a.shard_text, " disagree: drop --shard-count (--shard says how many parts)");
  } else if (const std::optional<Shard> s = shard_from_environment([](const char* v) { return std::getenv(v); },
                                                                   a.shard_count)) {
    shard = *s;
  } else {
    TINY_CHECK(!a.shard_count, ValueError, "--shard-count ", *a.shard_count, " needs the part's index: give --shard "
               "INDEX/COUNT, or run it where JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID is set");
  }
  return shard;
}

// What grade says of the sandbox, in the scoreboard, results.json and the
// report: for others' work, every protection in force or a warning naming
// what it lacked on this machine (or a refusal, thrown); for any grade,
// whether the sources were out of the code's reach. Printed on stderr.
std::string sandbox_warning(const GradeArgs& a, const Isolation& isolation) {
  std::string warning;
  if (!a.batch.empty() || !a.submission.empty() || a.require_sandbox) {
    if (!isolation.complete()) {
      if (!a.unsafe && (!a.batch.empty() || a.require_sandbox)) {
        const std::string why = sandbox_refusal(isolation);
        if (!a.json_file.empty()) {
          // What the student sees on Gradescope: their work was not graded, and why, for the instructor.
          nlohmann::json doc = {{"score", 0}, {"tests", nlohmann::json::array()},
                                {"output", "Your work was not graded: this autograder is not set up to grade "
                                           "safely. This is not a problem with your code; please tell your "
                                           "instructor.\n\nFor the instructor: " + why + "\n"}};
          write_file_atomically(a.json_file, results_json_text(doc));
        }
        TINY_CHECK(false, ValueError, why);
      }
      warning = "warning: the sandbox lacked " + isolation.missing() + " (" + isolation.describe() + ")\n";
    } else {
      // An instructor's grade says what protected it, not only what was missing.
      warning = "sandbox: every protection in force (" + isolation.describe() + ")\n";
    }
  }
  if (!isolation.paths_hidden) warning += unproctored();
  std::fprintf(stderr, "%s", warning.c_str());
  return warning;
}

// grade --batch: every submission of the folder into a gradebook.
int grade_class(const Recipe& recipe, const std::vector<const Lesson*>& lessons, const GradeArgs& a, const Shard& shard,
                const GradeOptions& options, const Isolation& isolation, const std::string& warning, double deadline_s) {
  TINY_CHECK(fs::is_directory(a.batch), ValueError, "--batch ", a.batch, " is not a folder");
  TINY_CHECK(a.jobs >= 1 && a.jobs <= 256, ValueError, "--jobs ", a.jobs, " is not a number of submissions to grade "
             "at once: give 1 to 256 (about one per two cores)");
  BatchOptions b;
  b.batch = a.batch;
  b.out_dir = a.out_dir;
  b.work = work_root();
  b.jobs = a.jobs;
  b.resume = a.resume;
  b.seed_given = a.seed_given;
  b.deadline_s = deadline_s;
  b.shard = shard;
  // Shared reference results only where no student's run could have written them.
  b.share_reference = (isolation.own_user || isolation.paths_hidden) && !a.no_reference_cache;
  b.sandbox_warning = warning;
  // Removed however grade_batch ends (a refusal throws).
  struct RemovedAfter {
    fs::path folder;
    ~RemovedAfter() {
      std::error_code ec;
      fs::remove_all(folder, ec);
    }
  } work_folder{b.work};
  return grade_batch(recipe, lessons, b, options);
}

// The scoreboard of one submission's grade (a single lesson's checks first), and where its files went.
void print_grade(const std::vector<LessonResult>& results, const GradeArgs& a, const SubmissionLayout* found,
                 uint64_t seed, const std::string& warning) {
  if (results.size() == 1) {
    std::cout << "\nlesson " << results[0].lesson->number << ": " << results[0].status << "\n";
    if (results[0].checks.empty() || results[0].status == "does not compile" || results[0].status == "not submitted") {
      std::cout << results[0].problem;
    } else {
      print_checks(std::cout, results[0], use_color());
    }
  }
  if (found) std::cout << "\n" << found->text();
  print_scoreboard(std::cout, results, seed, use_color());
  std::cout << warning;
  if (!a.json_file.empty()) std::cout << "results.json written to " << a.json_file << "\n";
  if (!a.html_file.empty()) std::cout << "HTML report written to " << a.html_file << "\n";
  if (!a.junit_file.empty()) std::cout << "JUnit XML written to " << a.junit_file << "\n";
}

// grade [--submission S]: the student's own lessons, or one submission (a
// folder or an archive, its lessons found at any depth); 0 unless --expect
// was given and not met.
int grade_one(const Recipe& recipe, const std::vector<const Lesson*>& lessons, const GradeArgs& a,
              const GradeOptions& options, const std::string& warning, double deadline_s) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path lessons_dir = recipe.source_dir / "lessons";
  fs::path build_dir = recipe.student_dir;
  const fs::path work = work_root();
  std::optional<SubmissionLayout> layout;
  if (!a.submission.empty()) {
    std::error_code ec;
    TINY_CHECK(fs::exists(fs::symlink_status(a.submission, ec)), ValueError, "--submission ", a.submission,
               " does not exist: give a folder holding the lessons, or a .zip or .tar.gz of it");
    layout = take_in(a.submission, lessons, work / "intake");  // an archive is unpacked into our scratch
    build_dir = work / "build";
  }
  const std::string quiz = !layout ? read_quiz(lessons_dir)
                           : layout->quiz_dir.empty() ? std::string() : read_quiz(layout->quiz_dir);
  const SubmissionLayout* found = layout ? &*layout : nullptr;
  // The files asked for, from the lessons graded so far: rewritten after each, so a kill keeps them.
  auto write_files = [&](const std::vector<LessonResult>& so_far) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!a.json_file.empty()) {
      nlohmann::json doc = gradescope_results(so_far, seconds, options.seed, quiz, found);
      if (!warning.empty()) doc["output"] = warning + doc["output"].get<std::string>();
      write_file_atomically(a.json_file, results_json_text(doc));
    }
    if (!a.html_file.empty()) {
      write_file_atomically(a.html_file, html_report(so_far, options.seed, "GPU Training Workbook", warning,
                                                     found ? found->text() : ""));
    }
    if (!a.junit_file.empty()) {
      const std::string name = a.submission.empty() ? "your lessons" : fs::path(a.submission).filename().string();
      write_file_atomically(a.junit_file, junit_xml(so_far, name, options.seed, found));
    }
  };
  const std::vector<LessonResult> results =
      grade_submission(recipe, lessons, lessons_dir, found, build_dir, work / "checks", options, deadline_s, write_files);
  std::error_code ec;
  fs::remove_all(work, ec);
  write_files(results);  // with the whole time taken
  print_grade(results, a, found, options.seed, warning);
  if (a.expect.empty()) return 0;
  const std::string want = a.expect == "full" ? "passed" : "not started";
  const bool all = std::all_of(results.begin(), results.end(), [&](const LessonResult& r) { return r.status == want; });
  std::cout << (all ? "as expected, every lesson is " : "NOT as expected: not every lesson is ") << want << "\n";
  return all ? 0 : 1;
}

// grade: checks the options, says what protected the grade, then grades a class or one submission.
int grade(const Recipe& recipe, const GradeArgs& a, const GradeOptions& options) {
  check_grade_args(a);
  const Shard shard = shard_of(a);  // a bad --shard is refused before the sandbox is probed
  const double deadline_s = a.deadline ? *a.deadline : (!a.batch.empty() || !a.submission.empty()) ? 600.0 : 0.0;
  const std::vector<const Lesson*> lessons = pick(recipe, a.numbers);
  if (!a.batch.empty()) {  // no submission may read another (nor the grades)
    hide_in_every_sandbox(a.batch);
    hide_in_every_sandbox(a.out_dir);
  }
  const Isolation isolation = probe_sandbox();
  const std::string warning = sandbox_warning(a, isolation);
  if (!a.batch.empty()) return grade_class(recipe, lessons, a, shard, options, isolation, warning, deadline_s);
  return grade_one(recipe, lessons, a, options, warning, deadline_s);
}

// hint N [--all]: the next hint of lesson N (or all of them), remembered in the state file.
int show_hint(const Recipe& recipe, int number, bool all_hints) {
  const Lesson& l = recipe.lesson(number);
  TINY_CHECK(l.problem.empty(), IOError, "lesson ", number, "'s hints cannot be read: ", l.problem);
  TINY_CHECK(!l.hints.empty(), ValueError, "lesson ", number, " has no hints: its README.md explains each step");
  nlohmann::json state = load_state(recipe);
  const std::string key = std::to_string(number);
  if (!state.contains("hints_shown") || !state["hints_shown"].is_object()) state["hints_shown"] = nlohmann::json::object();
  const int shown = state["hints_shown"].value(key, 0);
  if (all_hints) {
    for (size_t i = 0; i < l.hints.size(); ++i) std::printf("hint %zu of %zu: %s\n", i + 1, l.hints.size(), l.hints[i].c_str());
    return 0;
  }
  const int index = std::min<int>(shown, static_cast<int>(l.hints.size()) - 1);
  std::printf("lesson %d, hint %d of %zu: %s\n", number, index + 1, l.hints.size(), l.hints[index].c_str());
  if (index + 1 < static_cast<int>(l.hints.size())) {
    std::printf("(run ./workbook hint %d again for the next one)\n", number);
  } else {
    std::printf("(that was the last hint; ./workbook hint %d --all shows them all again)\n", number);
  }
  state["hints_shown"][key] = index + 1;
  save_state(recipe, state);
  return 0;
}

// reset N: lesson N's exercise.cpp back to its stubs, the student's version kept as a .bak file.
int reset_lesson(const Recipe& recipe, int number) {
  const Lesson& l = recipe.lesson(number);
  const fs::path file = recipe.source_dir / "lessons" / l.folder / "exercise.cpp";
  const std::string stub = stub_of(recipe, l);
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(file, ec);
  TINY_CHECK(!fs::exists(st) || fs::is_regular_file(st), IOError, "lessons/", l.folder,
             "/exercise.cpp is not a plain file (a folder, a link or a FIFO): move it away, then run ./workbook "
             "reset ", number, " again");
  if (fs::exists(st)) {
    if (read_whole_file(file) == stub) {
      std::printf("lessons/%s/exercise.cpp is already the untouched stubs\n", l.folder.c_str());
      return 0;
    }
    const fs::path backup = keep_backup(file);
    std::printf("your version is kept as %s (to undo: cp %s %s)\n", fs::relative(backup, recipe.source_dir).c_str(),
                fs::relative(backup, recipe.source_dir).c_str(), fs::relative(file, recipe.source_dir).c_str());
  }
  write_file_atomically(file, stub);
  std::printf("lessons/%s/exercise.cpp is back to its stubs\n", l.folder.c_str());
  return 0;
}

// next: the first lesson that does not pass yet, and its first open check.
int next_lesson(const Recipe& recipe, GradeOptions options) {
  options.timing = false;
  int passed = 0;
  for (const Lesson& l : recipe.lessons) {
    const LessonResult r = check_own(recipe, l, options);
    passed += r.status == "passed";
    if (r.status == "passed" || r.status == "skipped") continue;
    print_next(std::cout, r);
    return 0;
  }
  if (passed == 0) {
    std::printf("No check of any lesson ran here: every check was skipped (./workbook check N says why).\n");
    return 0;
  }
  std::printf("Every lesson passes: nothing left to do here. Well done.\n");
  return 0;
}

// solution N: lesson N's reference solution, once the student's lesson N passes.
int show_solution(const Recipe& recipe, int number, const GradeOptions& options) {
  const Lesson& l = recipe.lesson(number);
  // With the timed checks, as the scoreboard counts (modelled time makes them quick): "0 of 6" beside its "0/7" confused.
  const LessonResult r = check_own(recipe, l, options);
  if (r.status != "passed") {
    std::printf("The solution of lesson %d opens once your lesson passes: now %s, %d of %d checks pass.\n"
                "Keep going: ./workbook check %d shows what is left, ./workbook hint %d helps.\n",
                number, r.status.c_str(), r.passed, r.total, number, number);
    return 1;
  }
  const fs::path file = recipe.source_dir / "solutions" / l.folder / "exercise.cpp";
  std::printf("// %s: the reference solution of lesson %d\n%s", fs::relative(file, recipe.source_dir).c_str(), number,
              read_whole_file(file).c_str());
  return 0;
}

// stubs [--check] [--out D] [--force]: (maintainers) every lesson's exercise.cpp from its solution.
int write_stubs(const Recipe& recipe, bool check_only, const std::string& out_dir, bool force) {
  int differ = 0;
  for (const Lesson& l : recipe.lessons) {
    const std::string stub = stub_of(recipe, l);
    const fs::path base = out_dir.empty() ? recipe.source_dir / "lessons" : fs::path(out_dir);
    const fs::path file = base / l.folder / "exercise.cpp";
    if (check_only) {
      // A student's edits are not the maintainers' concern: the committed stub is what must match.
      const bool matches = (fs::exists(file) && read_whole_file(file) == stub) || committed_version(recipe, file) == stub;
      if (!matches) {
        ++differ;
        std::printf("(maintainers) %s, as committed, differs from the stub generated from solutions/%s/exercise.cpp: "
                    "run build/default/grader/workbook-grader stubs and commit the result\n",
                    file.c_str(), l.folder.c_str());
      }
      continue;
    }
    fs::create_directories(file.parent_path());
    if (out_dir.empty() && fs::exists(file) && read_whole_file(file) != stub && !committed_version(recipe, file).empty() &&
        read_whole_file(file) != committed_version(recipe, file) && !force) {
      std::printf("left %s alone: it has changes that are not committed (a student's work?); --force overwrites it\n",
                  file.c_str());
      continue;
    }
    write_file_atomically(file, stub);
    std::printf("wrote %s\n", file.c_str());
  }
  if (check_only && differ == 0) std::printf("all %zu lessons' stubs match their solutions\n", recipe.lessons.size());
  return differ == 0 ? 0 : 1;
}

// ---------------------------------------------------------------- the command line

// grade's options (and its merge subcommand's).
CLI::App* add_grade_command(CLI::App& app, GradeArgs& a, std::optional<uint64_t>& seed, bool& no_timing) {
  auto* grade = app.add_subcommand("grade", "grade lessons N... (all when none) and print the scoreboard");
  grade->add_option("lessons", a.numbers, "lesson numbers");
  grade->add_option("--submission", a.submission, "grade another copy of the lessons folder (only exercise.cpp and quiz.txt are taken)");
  grade->add_option("--batch", a.batch, "grade every submission folder inside this folder into a gradebook");
  grade->add_option("--out", a.out_dir, "where --batch writes gradebook.csv, index.html (the class) and a folder per submission")->capture_default_str();
  grade->add_option("--jobs", a.jobs, "submissions graded at once with --batch (timed checks still run one at a time)")->capture_default_str();
  grade->add_option("--seed", seed, "seed of the random inputs (default: fresh)");
  grade->add_option("--json", a.json_file, "also write Gradescope's results.json here (rewritten after each lesson)");
  grade->add_option("--html", a.html_file, "also write an HTML report here (checks, timing bars, GPU work, loss curves)");
  grade->add_option("--junit", a.junit_file, "also write JUnit XML here, for CI (a suite per lesson, a case per check)");
  grade->add_flag("--no-timing", no_timing, "skip the timing checks");
  grade->add_option("--timeout", a.run_timeout, "stop any one run of a student's exercise after this many seconds (default: 20x the reference's own time for it, at least 10 s, at most the check's limit)");
  grade->add_option("--deadline", a.deadline, "seconds each submission may take in all (default 600 with --submission and --batch, "
                                              "none for your own lessons); lessons left when it is spent are \"out of time\"");
  grade->add_flag("--resume", a.resume, "with --batch: go on with OUT/gradebook.csv, grading only the submissions without a row");
  grade->add_option("--expect", a.expect, "(maintainers) exit 0 only when every lesson is: passed (full) or not started (zero)")
      ->check(CLI::IsMember({"full", "zero"}))->group("");
  grade->add_option("--shard", a.shard_text, "with --batch: grade only part INDEX of COUNT of the class, counted from 0 "
                                             "(default: from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX when set); "
                                             "then grade merge the parts");
  grade->add_option("--shard-count", a.shard_count, "with --batch: the number of parts when the index comes from "
                                                     "JOB_COMPLETION_INDEX (Kubernetes does not say how many)");
  grade->add_flag("--no-reference-cache", a.no_reference_cache, "(maintainers) with --batch: run the reference for "
                  "every submission instead of once per input (to measure what sharing it saves)")->group("");
  grade->get_option("--batch")->excludes(grade->get_option("--submission"));
  grade->add_flag("--require-sandbox", a.require_sandbox,
                  "refuse to grade unless the sandbox has every protection here (Gradescope's run_autograder; --batch always does)");
  grade->add_flag("--unsafe", a.unsafe, "grade others' work even where the sandbox lacks some of its protections (it says which)");
  return grade;
}

// A lesson number as typed: digits only, so that "abc" or "1.5" gets a plain answer (the recipe then says
// whether that lesson exists, naming the ones that do).
const CLI::Validator kLessonNumber(
    [](std::string& text) {
      const bool digits = !text.empty() && text.size() <= 9 &&
                          text.find_first_not_of("0123456789") == std::string::npos;
      return digits ? std::string() : "'" + text + "' is not a lesson number, e.g. 1";
    },
    "N");

// The positional lesson number of hint, reset, solution, check and run.
void add_lesson_number(CLI::App* command, int& number) {
  command->add_option("lesson", number, "lesson number (./workbook list names them)")->required()->check(kLessonNumber);
}

// `run N ARGS...`: every word after N is the demo's, --help included (CLI11 would take it as run's own), so
// they are cut off before CLI11 parses; `run --help` (no N yet) is still run's own help.
std::vector<std::string> split_demo_args(int& argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--recipe") {
      ++i;  // its value
      continue;
    }
    if (word.rfind("--recipe=", 0) == 0) continue;
    if (word != "run") return {};  // another subcommand (or an option CLI11 will refuse)
    if (i + 1 >= argc || argv[i + 1][0] == '-') return {};
    std::vector<std::string> rest(argv + i + 2, argv + argc);
    argc = i + 2;
    return rest;
  }
  return {};
}

// A path typed to ./workbook, which runs the grader from the repository's root: relative to the folder it
// was typed in (WORKBOOK_CALLER_DIR, which ./workbook sets), so "--batch subs" from ~/class means ~/class/subs,
// not the root's subs. Kept as typed where that folder is the root (or unknown: the grader run directly).
std::string as_typed(const std::string& path) {
  const char* caller = std::getenv("WORKBOOK_CALLER_DIR");
  if (path.empty() || caller == nullptr || caller[0] != '/' || fs::path(path).is_absolute()) return path;
  std::error_code ec;
  if (fs::equivalent(caller, fs::current_path(ec), ec)) return path;
  return (fs::path(caller) / path).lexically_normal().string();
}

// CLI11's "lesson is required", in words that say what to type.
bool explain_missing_lesson(const CLI::ParseError& e, const std::string& sub) {
  if (dynamic_cast<const CLI::RequiredError*>(&e) == nullptr ||
      std::string(e.what()).find("lesson") == std::string::npos) {
    return false;
  }
  std::fprintf(stderr, "workbook: '%s' needs a lesson number, e.g. ./workbook %s 1 "
               "(./workbook list names the lessons)\n", sub.c_str(), sub.c_str());
  return true;
}

// What the subcommands' options and arguments are read into, and, for each
// subcommand, the function that runs it with them: one subcommand runs.
struct CommandLine {
  std::string recipe_file = WORKBOOK_RECIPE;
  std::map<const CLI::App*, std::function<int(const Recipe&, const GradeOptions&)>> run;
  std::optional<uint64_t> seed;
  bool no_timing = false;
  int number = 0;  // the lesson of check, hint, reset, run and solution
  std::vector<int> build_numbers;
  GradeArgs grade_args;
  std::vector<std::string> merge_dirs;
  std::string merge_out;
  bool all_hints = false;
  std::vector<std::string> demo_args;  // the words after `run N`
  bool stubs_check = false, force = false;
  std::string stubs_out;
};

void add_build_and_check(CLI::App& app, CommandLine& c) {
  auto* build = app.add_subcommand("build", "compile the student's exercise of lessons N... (all when none)");
  build->add_option("lessons", c.build_numbers, "lesson numbers");
  c.run[build] = [&c](const Recipe& r, const GradeOptions&) { return build_lessons(r, c.build_numbers); };

  auto* check = app.add_subcommand("check", "build lesson N and run its checks, one line per check");
  add_lesson_number(check, c.number);
  check->add_option("--seed", c.seed, "seed of the random inputs (default: fresh)");
  check->add_flag("--no-timing", c.no_timing, "skip the timing checks");
  c.run[check] = [&c](const Recipe& r, const GradeOptions& o) { return check_lesson(r, c.number, o); };
}

void add_grade_and_merge(CLI::App& app, CommandLine& c) {
  auto* grade_cmd = add_grade_command(app, c.grade_args, c.seed, c.no_timing);
  c.run[grade_cmd] = [&c](const Recipe& r, const GradeOptions& o) { return grade(r, c.grade_args, o); };
  auto* merge = grade_cmd->add_subcommand("merge", "combine the out folders of a class graded in parts (--shard) into "
                                                   "one gradebook.csv and index.html");
  merge->add_option("folders", c.merge_dirs, "each part's --out folder")->required();
  merge->add_option("--out", c.merge_out, "where the merged gradebook.csv, index.html and submission folders go")->required();
  c.run[merge] = [&c](const Recipe& r, const GradeOptions&) {
    return merge_shards(r, std::vector<fs::path>(c.merge_dirs.begin(), c.merge_dirs.end()), c.merge_out, "");
  };
}

// The commands a student uses between checks: hint, reset, run, next, solution and watch.
void add_lesson_helpers(CLI::App& app, CommandLine& c) {
  auto* hint = app.add_subcommand("hint", "show the next hint of lesson N");
  add_lesson_number(hint, c.number);
  hint->add_flag("--all", c.all_hints, "show every hint");
  c.run[hint] = [&c](const Recipe& r, const GradeOptions&) { return show_hint(r, c.number, c.all_hints); };
  auto* reset = app.add_subcommand("reset", "put lesson N's exercise.cpp back to its stubs (your version is kept as a .bak file)");
  add_lesson_number(reset, c.number);
  c.run[reset] = [&c](const Recipe& r, const GradeOptions&) { return reset_lesson(r, c.number); };
  auto* run_cmd = app.add_subcommand("run", "build lesson N's demo (lessons/N_name/main.cpp) with your exercise.cpp and "
                                            "run it");
  add_lesson_number(run_cmd, c.number);
  run_cmd->footer("Every word after N goes to the demo: ./workbook run N --help shows that demo's own options.");
  c.run[run_cmd] = [&c](const Recipe& r, const GradeOptions&) { return run_demo(r, c.number, c.demo_args); };
  auto* next = app.add_subcommand("next", "say which lesson to do next, and its first open check");
  c.run[next] = [](const Recipe& r, const GradeOptions& o) { return next_lesson(r, o); };
  auto* solution = app.add_subcommand("solution", "show lesson N's reference solution, once your lesson N passes");
  add_lesson_number(solution, c.number);
  c.run[solution] = [&c](const Recipe& r, const GradeOptions& o) { return show_solution(r, c.number, o); };
  auto* watch_cmd = app.add_subcommand("watch", "check a lesson each time its exercise.cpp is saved");
  c.run[watch_cmd] = [](const Recipe& r, const GradeOptions& o) { return watch(r, o); };
}

void add_stubs_and_list(CLI::App& app, CommandLine& c) {
  auto* stubs = app.add_subcommand("stubs", "(maintainers) write lessons/*/exercise.cpp from the solutions");
  stubs->add_flag("--check", c.stubs_check, "only compare: exit 1 when a committed stub differs");
  stubs->add_option("--out", c.stubs_out, "write the stubs into this folder instead of lessons/");
  stubs->add_flag("--force", c.force, "also overwrite lesson files with uncommitted changes");
  c.run[stubs] = [&c](const Recipe& r, const GradeOptions&) {
    return write_stubs(r, c.stubs_check, c.stubs_out, c.force);
  };
  auto* list = app.add_subcommand("list", "list the lessons");
  c.run[list] = [](const Recipe& r, const GradeOptions&) {
    print_lesson_list(std::cout, r.lessons);
    return 0;
  };
}

// Parses the command line; false, with the status to exit with, when help was
// asked for (printed) or the command line is wrong (said why).
bool parse(CLI::App& app, int argc, char** argv, int& status) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    status = app.exit(e);
    return false;
  } catch (const CLI::CallForAllHelp& e) {
    status = app.exit(e);
    return false;
  } catch (const CLI::ParseError& e) {
    std::string sub;
    for (const CLI::App* s : app.get_subcommands()) sub = " " + s->get_name();
    status = 2;
    if (!sub.empty() && explain_missing_lesson(e, sub.substr(1))) return false;
    std::fprintf(stderr, "workbook: %s (see ./workbook%s --help)\n", e.what(), sub.c_str());
    return false;
  }
  return true;
}

// The paths typed, relative to the folder they were typed in (as_typed).
void resolve_typed_paths(CommandLine& c) {
  GradeArgs& a = c.grade_args;
  for (std::string* path :
       {&a.submission, &a.batch, &a.out_dir, &a.json_file, &a.html_file, &a.junit_file, &c.merge_out, &c.stubs_out}) {
    *path = as_typed(*path);
  }
  for (std::string& folder : c.merge_dirs) folder = as_typed(folder);
}

// Loads the recipe and runs the subcommand parsed; its exit status.
int run_chosen(const CLI::App& app, CommandLine& c) {
  try {
    const Recipe recipe = Recipe::load(c.recipe_file);
    GradeOptions options;
    c.grade_args.seed_given = c.seed.has_value();
    options.seed = c.seed ? *c.seed : fresh_seed();
    options.timing = !c.no_timing;
    options.run_timeout_s = c.grade_args.run_timeout;
    options.progress = true;
    // The deepest subcommand parsed (grade merge before grade) is the one to run.
    const CLI::App* chosen = app.get_subcommands().front();
    if (!chosen->get_subcommands().empty()) chosen = chosen->get_subcommands().front();
    return c.run.at(chosen)(recipe, options);
  } catch (const std::exception& e) {
    // In ./workbook's voice, as CLI11's errors above: students meet the grader only through it.
    std::fprintf(stderr, "workbook: %s\n", e.what());
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CommandLine c;
  c.demo_args = split_demo_args(argc, argv);
  CLI::App app{"workbook-grader: builds and checks the lessons (usually run through ./workbook)", "./workbook"};
  app.require_subcommand(1);
  app.add_option("--recipe", c.recipe_file, "the recipe CMake wrote")->capture_default_str();
  add_build_and_check(app, c);
  add_grade_and_merge(app, c);
  add_lesson_helpers(app, c);
  add_stubs_and_list(app, c);
  int status = 0;
  if (!parse(app, argc, argv, status)) return status;
  resolve_typed_paths(c);
  // Ctrl-C stops the checks and their runs, and removes their cgroups and folders, saying so.
  exit_cleanly_on_interrupt("every check and run was stopped, and their files removed");
  return run_chosen(app, c);
}
