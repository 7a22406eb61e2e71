// checker_main: the command line of every lesson's checker program
// (lesson_N_checks), read with CLI11; run_checker (checker.cpp) does the rest.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "checker.h"
#include "checker_options.h"

namespace workbook {

namespace {

// Seconds, more than 0 (CLI11's own PositiveNumber names a range up to 1.8e308).
const CLI::Validator kSeconds(
    [](const std::string& v) {
      double s = 0;
      const bool ok = CLI::detail::lexical_cast(v, s) && s > 0;
      return ok ? std::string() : "\"" + v + "\" is not a positive number of seconds";
    },
    "", "seconds");

// CHECK=TEXT.
const CLI::Validator kCheckEqualsText(
    [](const std::string& v) {
      return v.find('=') == std::string::npos ? "needs CHECK=TEXT, got \"" + v + "\"" : std::string();
    },
    "", "CHECK=TEXT");

// Describes every option of `app` into `o`.
void add_options(CLI::App& app, CheckerOptions& o, bool& no_timing) {
  app.add_option("--student", o.student, "the runner built from the student's exercise.cpp")->type_name("PATH");
  app.add_option("--reference", o.reference, "the runner built from the reference solution")->type_name("PATH");
  app.add_option("--check", o.only, "run only this check (may be given several times)")->type_name("NAME");
  app.add_option("--seed", o.seed, "the seed of every random input (default: a fresh one, printed)")->type_name("N");
  app.add_flag("--no-timing", no_timing, "skip the timing checks");
  app.add_option("--json", o.json_file, "also write the results as JSON (for the grader)")->type_name("FILE");
  app.add_option("--timeout", o.timeout, "stop any one run of an exercise after this many seconds (default: 20x the "
                                         "reference's own time for it, at least 10 s, at most the check's own limit)")
      ->type_name("S")->check(kSeconds);
  app.add_option("--deadline", o.deadline, "all runs together stop after this many seconds: each run gets what is "
                                           "left, and once it is spent the remaining checks fail at once")
      ->type_name("S")->check(kSeconds);
  app.add_option("--reference-cache", o.reference_cache, "keep the reference's results in this folder and read them "
                 "back for the same inputs, runner and environment (a class's checkers share it; timed runs excepted)")
      ->type_name("FOLDER");
  app.add_flag("--keep", o.keep, "keep the folder of inputs, outputs and logs");
  app.add_option("--expect-fail", o.expect_check, "(maintainers) succeed only when CHECK fails with a message "
                 "containing TEXT")
      ->type_name("CHECK=TEXT")->check(kCheckEqualsText);
  app.add_flag("--list", o.list, "print the checks as JSON and exit");
  auto* ctest = app.add_option("--write-ctest", o.write_ctest, "write the CTest entries lesson_N.<check> and "
                               "solution_N.<check> to this file")->type_name("FILE");
  auto* student_runner =
      app.add_option("--student-runner", o.student_runner, "with --write-ctest: the student's runner")->type_name("PATH");
  auto* reference_runner = app.add_option("--reference-runner", o.reference_runner,
                                          "with --write-ctest: the reference's runner")->type_name("PATH");
  ctest->needs(student_runner)->needs(reference_runner);
}

}  // namespace

int checker_main(int argc, char** argv) {
  CLI::App app{"Runs this lesson's checks: each exercise runs with the student's code and with the reference "
               "solution in separate processes, on the same inputs.", argv[0]};
  app.footer("Exit status: 0 all passed, 1 a check did not pass, 2 bad usage, 77 every check run was skipped.");
  CheckerOptions options;
  bool no_timing = false;
  add_options(app, options, no_timing);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s (see %s --help)\n", argv[0], e.what(), argv[0]);
    return 2;
  }
  options.timing = !no_timing;
  if (!options.expect_check.empty()) {  // CHECK=TEXT: CHECK alone is run
    const size_t eq = options.expect_check.find('=');
    options.expect_text = options.expect_check.substr(eq + 1);
    options.expect_check.resize(eq);
    options.only.push_back(options.expect_check);
  }
  return run_checker(options, argv[0]);
}

}  // namespace workbook
