// Bad inputs stop only the lesson they belong to (issue 19): a damaged
// lesson.json, an exercise.cpp that is a folder, a FIFO or a link, each with a
// message naming the file and what is wrong.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "grade.h"
#include "recipe.h"

namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("workbook-bad-inputs-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A recipe.json for lessons `folders` (numbered 1, 2, ...) in `root`, each with the lesson.json given.
fs::path write_recipe(const fs::path& root, const std::vector<std::pair<std::string, std::string>>& lessons) {
  nlohmann::json list = nlohmann::json::array();
  int number = 0;
  for (const auto& [folder, meta] : lessons) {
    fs::create_directories(root / "lessons" / folder);
    std::ofstream(root / "lessons" / folder / "lesson.json") << meta;
    list.push_back({{"number", ++number}, {"folder", folder}, {"glue", nlohmann::json::array()},
                    {"reference", (root / "no-reference").string()}, {"checks", (root / "no-checks").string()},
                    {"demo_target", "demo"}});
  }
  const nlohmann::json recipe = {{"source_dir", root.string()}, {"build_dir", (root / "build").string()},
                                 {"student_dir", (root / "student").string()}, {"launcher", ""}, {"cxx", "c++"},
                                 {"flags", nlohmann::json::array()}, {"defines", nlohmann::json::array()},
                                 {"include_dirs", nlohmann::json::array()}, {"link", nlohmann::json::array()},
                                 {"lessons", list}};
  std::ofstream(root / "recipe.json") << recipe.dump();
  return root / "recipe.json";
}

const char* kGoodMeta = R"({"title": "Device check", "minutes": 20, "hints": ["one", "two"]})";

// One malformed lesson.json used to make Recipe::load throw: every command of every lesson failed.
TEST(Recipe, ADamagedLessonJsonStopsOnlyItsLesson) {
  const fs::path root = fresh_dir("recipe");
  const fs::path recipe_file = write_recipe(root, {{"1_good", kGoodMeta},
                                                   {"2_title", R"({"title": 42})"},
                                                   {"3_broken", "{ not json"},
                                                   {"4_hints", R"({"title": "x", "hints": ["a", 3]})"},
                                                   {"5_gpus", R"({"title": "x", "requires": {"gpus": 1.5}})"}});
  workbook::Recipe r;
  ASSERT_NO_THROW(r = workbook::Recipe::load(recipe_file));
  ASSERT_EQ(r.lessons.size(), 5u);
  EXPECT_EQ(r.lessons[0].problem, "");
  EXPECT_EQ(r.lessons[0].title, "Device check");
  EXPECT_EQ(r.lessons[0].hints.size(), 2u);
  const std::string lessons = (root / "lessons").string();
  EXPECT_EQ(r.lessons[1].problem, lessons + "/2_title/lesson.json: 'title' must be a string, got 42");
  EXPECT_EQ(r.lessons[1].title, "2_title");
  EXPECT_NE(r.lessons[2].problem.find(lessons + "/3_broken/lesson.json is not valid JSON"), std::string::npos)
      << r.lessons[2].problem;
  EXPECT_EQ(r.lessons[3].problem, lessons + "/4_hints/lesson.json: 'hints' must be a list of strings, but item 2 is 3");
  EXPECT_EQ(r.lessons[4].problem, lessons + "/5_gpus/lesson.json: 'gpus' must be an integer, got 1.5");

  // Grading that lesson fails it alone, with the same words; the others are graded as ever.
  workbook::GradeOptions options;
  const workbook::LessonResult damaged =
      workbook::grade_lesson(r, r.lessons[1], root / "lessons", root / "student", root / "work", options);
  EXPECT_EQ(damaged.status, "error");
  EXPECT_EQ(damaged.problem, r.lessons[1].problem);
  fs::remove_all(root);
}

// An exercise.cpp that is not a plain file: that lesson fails, with what it
// is; grade_lesson never throws (a raw "filesystem error" stopped the whole grade).
TEST(GradeLesson, AnExerciseThatIsNotAFileFailsOnlyItsLesson) {
  const fs::path root = fresh_dir("exercise");
  const workbook::Recipe r = workbook::Recipe::load(write_recipe(root, {{"1_good", kGoodMeta}}));
  const workbook::Lesson& lesson = r.lessons[0];
  workbook::GradeOptions options;
  auto graded = [&](const fs::path& lessons_dir) {
    workbook::LessonResult result;
    EXPECT_NO_THROW(result = workbook::grade_lesson(r, lesson, lessons_dir, root / "student", root / "work", options));
    return result;
  };

  // A folder, in the student's own tree.
  const fs::path own = root / "lessons" / "1_good" / "exercise.cpp";
  fs::create_directories(own);
  workbook::LessonResult result = graded(root / "lessons");
  EXPECT_EQ(result.status, "not submitted");
  EXPECT_EQ(result.problem, own.string() + " is a folder, not a file of C++ source: exercise.cpp must be a plain file");

  // A FIFO in a submission (reading it would wait forever).
  const fs::path submission = root / "submission";
  fs::create_directories(submission / "1_good");
  ASSERT_EQ(mkfifo((submission / "1_good" / "exercise.cpp").c_str(), 0600), 0);
  result = graded(submission);
  EXPECT_EQ(result.status, "not submitted");
  EXPECT_NE(result.problem.find("exercise.cpp is a FIFO (a named pipe), not a file of C++ source"), std::string::npos)
      << result.problem;

  // A link in a submission: the grader (root) would read what it points to.
  fs::remove(submission / "1_good" / "exercise.cpp");
  fs::create_symlink("/etc/passwd", submission / "1_good" / "exercise.cpp");
  result = graded(submission);
  EXPECT_EQ(result.status, "not submitted");
  EXPECT_NE(result.problem.find("exercise.cpp is a symbolic link: submit the file itself"), std::string::npos)
      << result.problem;
  fs::remove_all(root);
}

}  // namespace
