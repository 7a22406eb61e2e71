#include "recipe.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>

#include "tiny/error.h"

namespace workbook {

namespace fs = std::filesystem;

namespace {
// An integer field (or `fallback` when absent): a float, such as 1e300, would convert with undefined behaviour.
int int_field(const nlohmann::json& obj, const char* key, const fs::path& file, std::optional<int> fallback = {}) {
  if (fallback && obj.is_object() && !obj.contains(key)) return *fallback;
  const nlohmann::json& v = obj.at(key);
  TINY_CHECK(v.is_number_integer() && v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max(),
             IOError, file.string(), ": '", key, "' must be an integer, got ",
             v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return v.get<int>();
}

std::string shown(const nlohmann::json& v) {
  std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 80 ? text.substr(0, 80) + "..." : text;
}

// A string field; "" when absent and optional.
std::string string_field(const nlohmann::json& obj, const char* key, const fs::path& file, bool required) {
  if (!obj.contains(key)) {
    TINY_CHECK(!required, IOError, file.string(), " lacks the field '", key, "' (a string)");
    return "";
  }
  const nlohmann::json& v = obj.at(key);
  TINY_CHECK(v.is_string(), IOError, file.string(), ": '", key, "' must be a string, got ", shown(v));
  return v.get<std::string>();
}

// A list of strings; empty when absent.
std::vector<std::string> strings_field(const nlohmann::json& obj, const char* key, const fs::path& file) {
  if (!obj.contains(key)) return {};
  const nlohmann::json& v = obj.at(key);
  TINY_CHECK(v.is_array(), IOError, file.string(), ": '", key, "' must be a list of strings, got ", shown(v));
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    TINY_CHECK(v[i].is_string(), IOError, file.string(), ": '", key, "' must be a list of strings, but item ", i + 1,
               " is ", shown(v[i]));
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

nlohmann::json read_json(const fs::path& file, const std::string& what) {
  std::ifstream in(file);
  TINY_CHECK(in.good(), IOError, "cannot read ", what, " ", file.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    TINY_THROW(IOError, what, " ", file.string(), " is not valid JSON: ", e.what());
  }
}
// A number of points: finite, not negative, and not absurd (a gradebook adds them up).
double points_value(const nlohmann::json& v, const fs::path& file, const std::string& field) {
  TINY_CHECK(v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1e6, IOError, file.string(), ": '", field,
             "' must be a number of points from 0 to 1000000, got ", shown(v));
  return v.get<double>();
}

// "points" (the lesson's total) and "check_points" ({"check name": points}), both optional.
void read_points(const nlohmann::json& meta, const fs::path& file, Lesson& l) {
  if (meta.contains("points")) {
    l.points = points_value(meta["points"], file, "points");
    TINY_CHECK(l.points > 0, IOError, file.string(), ": 'points' must be more than 0 (leave the lesson out of the "
               "grade with ./workbook grade N... instead)");
  }
  if (!meta.contains("check_points")) return;
  const nlohmann::json& v = meta["check_points"];
  TINY_CHECK(v.is_object(), IOError, file.string(), ": 'check_points' must be an object {\"check name\": points}, got ",
             shown(v));
  for (const auto& [name, value] : v.items()) l.check_points[name] = points_value(value, file, "check_points." + name);
}

// A Gradescope visibility: one of the four words its results.json accepts.
std::string visibility_value(const nlohmann::json& v, const fs::path& file, const std::string& field) {
  static const char* const kWords[] = {"visible", "hidden", "after_due_date", "after_published"};
  const bool ok = v.is_string() && std::any_of(std::begin(kWords), std::end(kWords),
                                               [&](const char* w) { return v.get<std::string>() == w; });
  TINY_CHECK(ok, IOError, file.string(), ": '", field, "' must be one of Gradescope's visibilities \"visible\", "
             "\"hidden\", \"after_due_date\" or \"after_published\", got ", shown(v));
  return v.get<std::string>();
}

// "visibility", "timed_visibility" (strings) and "check_visibility" ({"check name": visibility}), all optional.
void read_visibility(const nlohmann::json& meta, const fs::path& file, Lesson& l) {
  if (meta.contains("visibility")) l.visibility = visibility_value(meta["visibility"], file, "visibility");
  if (meta.contains("timed_visibility")) {
    l.timed_visibility = visibility_value(meta["timed_visibility"], file, "timed_visibility");
  }
  if (!meta.contains("check_visibility")) return;
  const nlohmann::json& v = meta["check_visibility"];
  TINY_CHECK(v.is_object(), IOError, file.string(), ": 'check_visibility' must be an object {\"check name\": "
             "\"after_published\"}, got ", shown(v));
  for (const auto& item : v.items()) {
    l.check_visibility[item.key()] = visibility_value(item.value(), file, "check_visibility." + item.key());
  }
}

// The lesson's lesson.json into `l`; what is wrong with it goes into l.problem
// (the title is then the folder's name), so that one damaged file stops only its lesson.
void read_lesson_json(const fs::path& file, Lesson& l) {
  try {
    const nlohmann::json meta = read_json(file, "the lesson's metadata");
    TINY_CHECK(meta.is_object(), IOError, file.string(), " does not hold a JSON object");
    l.title = string_field(meta, "title", file, true);
    l.minutes = int_field(meta, "minutes", file, 0);
    const nlohmann::json requires_ = meta.value("requires", nlohmann::json::object());
    TINY_CHECK(requires_.is_object(), IOError, file.string(), ": 'requires' must be an object, got ", shown(requires_));
    l.gpus_required = int_field(requires_, "gpus", file, 0);
    l.hints = strings_field(meta, "hints", file);
    read_points(meta, file, l);
    read_visibility(meta, file, l);
  } catch (const std::exception& e) {
    l.title = l.folder;
    l.minutes = l.gpus_required = 0;
    l.hints.clear();
    l.points = 0;
    l.check_points.clear();
    l.visibility = "visible";
    l.timed_visibility.clear();
    l.check_visibility.clear();
    l.problem = e.what();
  }
}

}  // namespace

Recipe Recipe::load(const fs::path& file) {
  const nlohmann::json doc = read_json(file, "the grader's recipe (written by CMake; build the project first)");
  Recipe r;
  try {
    r.source_dir = doc.at("source_dir").get<std::string>();
    r.build_dir = doc.at("build_dir").get<std::string>();
    r.student_dir = doc.at("student_dir").get<std::string>();
    r.launcher = doc.at("launcher");
    r.cxx = doc.at("cxx");
    if (doc.contains("cmake")) r.cmake = string_field(doc, "cmake", file, true);
    r.flags = doc.at("flags").get<std::vector<std::string>>();
    r.defines = doc.at("defines").get<std::vector<std::string>>();
    r.include_dirs = doc.at("include_dirs").get<std::vector<std::string>>();
    r.link = doc.at("link").get<std::vector<std::string>>();
    for (const auto& entry : doc.at("lessons")) {
      Lesson l;
      l.number = int_field(entry, "number", file);
      l.folder = entry.at("folder");
      l.glue = entry.at("glue").get<std::vector<std::string>>();
      l.reference = entry.at("reference").get<std::string>();
      l.checks = entry.at("checks").get<std::string>();
      l.demo_target = entry.at("demo_target");
      l.demo = string_field(entry, "demo", file, false);
      read_lesson_json(r.source_dir / "lessons" / l.folder / "lesson.json", l);
      r.lessons.push_back(l);
    }
  } catch (const nlohmann::json::exception& e) {
    TINY_THROW(IOError, file.string(), " lacks a field: ", e.what());
  }
  std::sort(r.lessons.begin(), r.lessons.end(), [](const Lesson& a, const Lesson& b) { return a.number < b.number; });
  return r;
}

const Lesson& Recipe::lesson(int number) const {
  std::string list;
  for (const Lesson& l : lessons) {
    if (l.number == number) return l;
    list += (list.empty() ? "" : ", ") + std::to_string(l.number);
  }
  TINY_THROW(ValueError, "there is no lesson ", number, ": the lessons are ", list, " (./workbook list names them)");
}

}  // namespace workbook
