// Grading whole submissions: one submission's lessons within a deadline, and a
// class (--batch) into a gradebook that grows as each submission finishes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "grade.h"
#include "shard.h"

namespace workbook {

// The seconds lesson k may take when `left` seconds remain for it and the
// `later` lessons after it: all that is left but a reserve for each later lesson
// (30 s, or an equal share when less is left), so that one slow lesson cannot
// leave the next ones ungraded; but at least a minute, or all that is left (a
// lesson given seconds could not even compile). Its compile and its checks'
// runs are cut to it (GradeOptions::lesson_budget_s).
double lesson_budget(double left, size_t later);

// Grades `lessons` one after another, all within `deadline_s` seconds (0: no
// deadline); a lesson reached with no time left is "out of time". Each lesson's
// exercise.cpp is where `layout` found it (intake.h), or in `lessons_dir` when
// `layout` is null (the student's own tree). `after_each` (if set) gets the
// results so far after each lesson.
std::vector<LessonResult> grade_submission(const Recipe& recipe, const std::vector<const Lesson*>& lessons,
                                           const std::filesystem::path& lessons_dir, const SubmissionLayout* layout,
                                           const std::filesystem::path& build_dir, const std::filesystem::path& work,
                                           const GradeOptions& options, double deadline_s,
                                           const std::function<void(const std::vector<LessonResult>&)>& after_each = {});

// The name a submission is graded under: its folder's name, or its archive's without the extension.
std::string submission_name(const std::filesystem::path& submission);

// The submissions of a --batch folder, by name: its folders and its .zip, .tar.gz and .tgz files. What is
// not one (another file, a link, a hidden entry, a second "alice" beside alice/, an unreadable entry) is
// appended to `skipped` with the reason.
std::vector<std::filesystem::path> find_submissions(const std::filesystem::path& batch,
                                                    std::vector<std::string>& skipped);

struct BatchOptions {
  std::filesystem::path batch, out_dir, work;
  int jobs = 1;
  bool resume = false;     // go on with out_dir/gradebook.csv: its submissions are not graded again
  bool seed_given = false;  // --seed was given (else --resume takes the gradebook's)
  double deadline_s = 600;
  Shard shard;  // the part of the class this run grades (shard.h; 0/1: all of it)
  // The reference's results kept in work/reference-cache and shared by the submissions (GradeOptions::
  // reference_cache): only where a student's run cannot write there (its own uid, or the folder hidden).
  bool share_reference = true;
  std::string sandbox_warning;  // on top of every results.json, scoreboard, report and index.html
  std::vector<std::string> skipped;  // filled by grade_batch: what of the batch folder is no submission, and why
};

// Grades every submission folder of options.batch (of its shard: options.shard) into options.out_dir:
// gradebook.csv (a row appended as each submission finishes), NAME/results.json,
// scoreboard.txt, report.html and junit.xml (rewritten after each lesson), and
// index.html, and shard.json (what this run is to grade, for grade merge); prints progress on stderr and the
// class table at the end. Within the batch the reference's runs are made once per input and shared
// (GradeOptions::reference_cache), and it says how many were shared.
int grade_batch(const Recipe& recipe, const std::vector<const Lesson*>& lessons, BatchOptions batch,
                GradeOptions options);

}  // namespace workbook
