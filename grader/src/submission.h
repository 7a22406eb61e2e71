// What the grader reads of a submission folder (`grade --submission DIR`, each folder of `--batch DIR`)
// besides the exercise.cpp files build.cpp compiles: where its lessons are and its quiz.txt. The folder is
// untrusted: these never throw and never follow it out of itself (symlinks, FIFOs, devices, huge files).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace workbook {

// The most of quiz.txt that goes into results.json; the rest is cut with a note.
inline constexpr size_t kMaxQuizBytes = 64 * 1024;

// DIR/lessons when that is a folder (a copy of the whole repository), otherwise DIR (a copy of lessons/).
std::filesystem::path submission_lessons_dir(const std::filesystem::path& dir);

// The text of LESSONS_DIR/quiz.txt ("" when there is none). Only a regular file that is not a symlink is
// read, at most kMaxQuizBytes of it; anything else gives a one-line note saying why it was not read.
std::string read_quiz(const std::filesystem::path& lessons_dir);

// results.json's text: `doc` indented by 2, with bytes that are not UTF-8 (a student's quiz, a compiler
// quoting their source) replaced by U+FFFD instead of throwing.
std::string results_json_text(const nlohmann::json& doc);

}  // namespace workbook
