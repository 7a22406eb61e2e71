// What the grader knows about the lessons: the build recipe CMake wrote
// (build/<preset>/grader/recipe.json) and each lesson's lesson.json.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace workbook {

// One lesson: where its pieces are and what its lesson.json says.
struct Lesson {
  int number = 0;
  std::string folder;                       // "1_device_check"
  std::vector<std::string> glue;            // object files of tests/lessons/N_name/runner.cpp
  std::filesystem::path reference;          // the reference runner
  std::filesystem::path checks;             // the checker program
  std::string demo_target;                  // CMake target of the student's demo (`run N` builds it)
  std::filesystem::path demo;               // the program that target makes ("" in recipes older than `run`)
  // lesson.json
  std::string title;
  int minutes = 0;
  int gpus_required = 0;
  std::vector<std::string> hints;
  // The lesson's weight in every grade (points.h): "points", its total (0: the
  // sum of its checks' points), and "check_points", a check's points (default 1).
  double points = 0;
  std::map<std::string, double> check_points;
  // Who sees each check's result on Gradescope (visible, hidden, after_due_date, after_published):
  // "visibility" for the lesson's checks (default visible), "timed_visibility" for its timed
  // (performance) checks (default: "visibility"), "check_visibility" {"check name": ...} for one check.
  std::string visibility = "visible", timed_visibility;
  std::map<std::string, std::string> check_visibility;
  // Why lesson.json could not be read, naming the file and the field ("" when it
  // could): the lesson keeps its folder as its title and fails alone when graded.
  std::string problem;
};

// How to compile a student's exercise.cpp the way the reference was compiled.
struct Recipe {
  std::filesystem::path source_dir, build_dir, student_dir;
  std::string launcher, cxx;
  std::string cmake = "cmake";              // the cmake that configured the build (`run N` builds with it)
  std::vector<std::string> flags, defines, include_dirs, link;
  std::vector<Lesson> lessons;

  // Reads the recipe and every lesson.json; throws tiny::IOError naming what is
  // missing from the recipe. A damaged lesson.json only sets that lesson's `problem`.
  static Recipe load(const std::filesystem::path& file);
  // The lesson numbered `number`; throws tiny::ValueError listing the lessons there are.
  const Lesson& lesson(int number) const;
};

}  // namespace workbook
