// The fuzz target bodies for the grader's readers: the runner/checker exchange (Bundle), the recipe and
// lesson.json, and what `grade --submission/--batch` reads of a submission folder.
#include <string>
#include <vector>

#include "common.h"
#include "grade.h"
#include "intake.h"
#include "harness/bundle.h"
#include "recipe.h"
#include "report.h"
#include "submission.h"
#include "targets.h"
#include "unpack.h"

namespace tiny_fuzz {

namespace fs = std::filesystem;

namespace {

// The folder Bundle::load reads: values.json is the input, beside a few .npy files it may name.
const fs::path& bundle_dir() {
  static const fs::path dir = [] {
    const fs::path d = scratch_dir() / "bundle";
    fs::create_directories(d);
    tiny::io::save_npy((d / "t0.npy").string(), tiny::arange(6, tiny::kFloat32).view({2, 3}));
    tiny::io::save_npy((d / "t1.npy").string(), tiny::arange(4, tiny::kInt64));
    tiny::io::save_npy((d / "t2.npy").string(), tiny::arange(4, tiny::kInt64).view({2, 2}).to(tiny::kBool));
    write_file(d / "bad.npy", "not an npy file", 15);
    fs::create_directories(d / "folder.npy");
    return d;
  }();
  return dir;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// A relative path that stays inside the folder: no empty, "." or ".." parts, not absolute.
bool safe_relative(const std::string& p) {
  if (p.empty() || p[0] == '/' || p.size() > 200) return false;
  size_t start = 0;
  for (;;) {
    const size_t end = p.find('/', start);
    const std::string part = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (end == std::string::npos) return true;
    start = end + 1;
  }
}

}  // namespace

void bundle(const uint8_t* data, size_t size) {
  const fs::path& dir = bundle_dir();
  write_file(dir / "values.json", data, size);
  const workbook::Bundle b = workbook::Bundle::load(dir);
  require(!b.values.contains("_tensors"), "Bundle::load kept the harness's _tensors key among the values");
  for (const std::string& name : b.tensor_names()) {
    const workbook::TensorInfo& info = b.info(name);
    if (!info.defined) continue;
    const tiny::Tensor t = b.tensor(name);
    require(t.sizes() == info.shape, "Bundle::load returned '" + name + "' with another shape than it recorded");
  }
  (void)b.state("model");
  (void)b.values.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void recipe(const uint8_t* data, size_t size) {
  const fs::path src = scratch_dir() / "recipe_src";
  const fs::path lesson_dir = src / "lessons" / "1_a";
  fs::create_directories(lesson_dir);
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  std::string recipe_text = input.substr(0, nul);
  replace_all(recipe_text, "@SRC@", src.string());
  write_file(src / "recipe.json", recipe_text.data(), recipe_text.size());
  std::error_code ec;
  fs::remove(lesson_dir / "lesson.json", ec);
  if (nul != std::string::npos) write_file(lesson_dir / "lesson.json", input.data() + nul + 1, size - nul - 1);
  const workbook::Recipe r = workbook::Recipe::load(src / "recipe.json");
  for (const workbook::Lesson& l : r.lessons) {
    require(r.lesson(l.number).number == l.number, "Recipe::lesson found another lesson");
    // A damaged lesson.json fails its lesson alone (Lesson::problem, naming the file): rejected all the same.
    if (!l.problem.empty()) {
      require(l.problem.find("lesson.json") != std::string::npos, "Lesson::problem does not name the file: " + l.problem);
      TINY_THROW(IOError, l.problem);
    }
  }
}

// The input describes a tree, one entry per "=== " line:
//   === PATH          a file; its content is every byte up to the next "\n=== " (or the end)
//   === PATH/         a folder
//   === PATH -> DEST  a symlink (made after every file, so nothing is ever written through one)
// Entries whose PATH leaves the folder are skipped. Then the grader's readers run over it.
void submission(const uint8_t* data, size_t size) {
  const fs::path root = scratch_dir() / "submission";
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root);
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> links;
  size_t at = input.rfind("=== ", 0) == 0 ? 0 : input.find("\n=== ");
  if (at != std::string::npos && at != 0) ++at;
  int entries = 0;
  while (at != std::string::npos && at < input.size() && entries++ < 32) {
    const size_t line_end = input.find('\n', at);
    const std::string head = input.substr(at + 4, (line_end == std::string::npos ? input.size() : line_end) - at - 4);
    size_t next = line_end == std::string::npos ? std::string::npos : input.find("\n=== ", line_end);
    const size_t body_begin = line_end == std::string::npos ? input.size() : line_end + 1;
    const size_t body_end = next == std::string::npos ? input.size() : next;
    if (next != std::string::npos) ++next;
    at = next;
    const size_t arrow = head.find(" -> ");
    if (arrow != std::string::npos) {
      if (safe_relative(head.substr(0, arrow))) links.emplace_back(head.substr(0, arrow), head.substr(arrow + 4));
    } else if (!head.empty() && head.back() == '/') {
      if (safe_relative(head.substr(0, head.size() - 1))) fs::create_directories(root / head, ec);
    } else if (safe_relative(head)) {
      fs::create_directories((root / head).parent_path(), ec);
      std::ofstream out(root / head, std::ios::binary);
      out.write(input.data() + body_begin, static_cast<std::streamsize>(body_end > body_begin ? body_end - body_begin : 0));
    }
  }
  for (const auto& [path, dest] : links) {
    fs::create_directories((root / path).parent_path(), ec);
    fs::create_symlink(dest, root / path, ec);
  }

  // What grade --submission/--batch does with the folder before and after compiling (grader/src/main.cpp).
  static const workbook::Lesson lesson = [] {
    workbook::Lesson l;
    l.number = 1;
    l.folder = "1_a";
    l.title = "fuzz";
    return l;
  }();
  const fs::path scratch = scratch_dir() / "submission_scratch";
  fs::remove_all(scratch, ec);
  const workbook::SubmissionLayout layout = workbook::take_in(root, {&lesson}, scratch);
  const fs::path lessons = layout.lessons_dir_of(lesson);
  require(lessons.empty() || fs::exists(lessons / lesson.folder / "exercise.cpp", ec),
          "take_in found lesson 1 where it is not: " + lessons.string());
  const std::string quiz = layout.quiz_dir.empty() ? std::string() : workbook::read_quiz(layout.quiz_dir);
  require(quiz.size() <= workbook::kMaxQuizBytes + 64, "read_quiz returned more than its cap");
  workbook::LessonResult r;
  r.lesson = &lesson;
  r.status = lessons.empty() ? "not submitted" : "in progress";
  r.problem = quiz;  // a compiler quoting the student's source: bytes that need not be UTF-8
  workbook::CheckResult c;
  c.name = "quiz";
  c.summary = "fuzz";
  c.verdict = "fail";
  c.message = quiz;
  r.checks.push_back(c);
  r.total = 1;
  const std::string json = workbook::results_json_text(workbook::gradescope_results({r}, 1.0, 7, quiz, &layout));
  require(nlohmann::json::accept(json), "results.json is not valid JSON");
  (void)workbook::html_report({r}, 7, "fuzz " + quiz.substr(0, 64), "", layout.text());
  fs::remove_all(root, ec);
  fs::remove_all(scratch, ec);
}

void archive(const uint8_t* data, size_t size) {
  workbook::ArchiveLimits limits;  // small, so that a bomb the fuzzer builds is caught quickly
  limits.max_total_bytes = 4u << 20;
  limits.max_entries = 200;
  limits.ratio_floor_bytes = 64u << 10;
  const std::vector<workbook::ArchiveEntry> entries = workbook::read_archive(data, size, "fuzz.zip", limits);
  uint64_t total = 0;
  for (const workbook::ArchiveEntry& e : entries) {
    require(safe_relative(e.path) || e.path.size() > 200, "read_archive accepted the path \"" + e.path + "\"");
    total += e.size;
  }
  require(entries.size() <= limits.max_entries && total <= limits.max_total_bytes, "read_archive passed its limits");
  // The same bytes as a submission on disk: unpacked into a fresh scratch folder, only files and folders.
  const fs::path file = scratch_dir() / "fuzz.zip", dest = scratch_dir() / "unpacked";
  std::error_code ec;
  fs::remove_all(dest, ec);
  write_file(file, data, size);
  workbook::unpack_archive(file, dest, limits);
  size_t seen = 0;
  for (fs::recursive_directory_iterator it(dest, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::file_type type = it->symlink_status(ec).type();
    require(type == fs::file_type::regular || type == fs::file_type::directory,
            "unpack_archive made something that is not a file or a folder: " + it->path().string());
    ++seen;
  }
  require(seen <= entries.size() * 64 + 1, "unpack_archive made more than the archive holds");
  fs::remove_all(dest, ec);
}

}  // namespace tiny_fuzz
