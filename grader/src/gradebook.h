// The class's gradebook: gradebook.csv (a row appended as each submission
// finishes, read back by --resume), each submission's summary.json, the class
// table printed at the end of a batch and the class's index.html. Every figure
// comes from the points of grade.h's assign_points, as results.json's and the
// report's do.
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grade.h"

namespace workbook {

// "lesson 2 does not compile; lesson 4 timed out; lesson 5 not submitted": the
// grader's own words for what stopped a lesson (never text of the submission's);
// "" when nothing did.
std::string problems_text(const std::vector<LessonResult>& results);

// gradebook.csv's first line for these lessons.
std::string gradebook_header(const std::vector<const Lesson*>& lessons);
// One submission's row (ending in a newline): its name, total, maximum,
// percent, seed, seconds, problems, then each lesson's points and status.
std::string gradebook_row(const std::string& submission, const std::vector<LessonResult>& results, uint64_t seed,
                          double seconds);

// The rows of gradebook.csv that are whole (a row cut short by a kill is left
// out), after checking that its header is `header`; throws tiny::ValueError
// naming the file and what differs.
struct Gradebook {
  std::vector<std::vector<std::string>> rows;
  std::set<std::string> submissions;  // their names, as the batch folder spells them
  uint64_t last_seed = 0;             // the seed of the last row (0 when none)
};
Gradebook read_gradebook(const std::filesystem::path& file, const std::string& header);
// Writes the header and `rows` as gradebook.csv (through a temporary file and a rename).
void write_gradebook(const std::filesystem::path& file, const std::string& header,
                     const std::vector<std::vector<std::string>>& rows);
// Appends one row with a single write (O_APPEND), then flushes it to disk.
void append_row(const std::filesystem::path& file, const std::string& row);

// What the class table and index.html need of one graded submission.
nlohmann::json submission_summary(const std::string& submission, const std::vector<LessonResult>& results,
                                  uint64_t seed, double seconds);
// The terminal's class table: per lesson how many passed, are in progress, not
// started or could not be graded, and the failing check met most often.
std::string class_table(const std::vector<const Lesson*>& lessons, const std::vector<nlohmann::json>& summaries);
// The class's index.html: that table, then a row per submission linking its report.html.
std::string class_index_html(const std::vector<const Lesson*>& lessons, const std::vector<nlohmann::json>& summaries,
                             const std::string& warning);

// "1m05s", "42s": a duration for progress lines.
std::string duration_text(double seconds);

}  // namespace workbook
