#include "intake.h"

#include <algorithm>
#include <map>

namespace workbook {

namespace fs = std::filesystem;

namespace {

bool has_part(const fs::path& relative, const std::string& name) {
  return std::any_of(relative.begin(), relative.end(), [&](const fs::path& p) { return p == name; });
}

// Every exercise.cpp under `root` (symbolic links not followed, bounded), sorted to each lesson or to not_taken.
void search(const fs::path& root, const std::string& prefix, const std::vector<const Lesson*>& lessons,
            std::map<int, std::vector<std::string>>& found, std::map<int, fs::path>& dirs, SubmissionLayout& layout) {
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    layout.notes.push_back(prefix + " cannot be searched: " + ec.message());
    return;
  }
  size_t seen = 0;
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++seen > kMaxSearchEntries) {
      layout.notes.push_back("the search stopped after " + std::to_string(kMaxSearchEntries) +
                             " entries: submit only the lessons folder");
      return;
    }
    if (it.depth() >= kMaxSearchDepth) it.disable_recursion_pending();
    const fs::path& path = it->path();
    if (path.filename() != "exercise.cpp") continue;
    const fs::path relative = path.lexically_relative(root);
    const std::string shown = prefix + relative.string();
    if (has_part(relative, "solutions")) {
      layout.not_taken.push_back(shown + " (under solutions/: the workbook's reference, not your work)");
      continue;
    }
    const std::string folder = relative.parent_path().filename().string();
    const auto lesson = std::find_if(lessons.begin(), lessons.end(), [&](const Lesson* l) { return l->folder == folder; });
    if (lesson == lessons.end()) {
      layout.not_taken.push_back(shown + " (its folder \"" + folder + "\" is not a lesson graded here)");
      continue;
    }
    found[(*lesson)->number].push_back(shown);
    dirs[(*lesson)->number] = path.parent_path().parent_path();
  }
  if (ec) layout.notes.push_back("the search of " + prefix + " stopped at an entry that cannot be read: " + ec.message());
}

// The archives at the top of a folder (Gradescope keeps an uploaded .tar.gz as the one file of the submission).
std::vector<fs::path> top_archives(const fs::path& dir) {
  std::vector<fs::path> archives;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (is_archive_name(it->path().filename().string()) && it->is_regular_file(ec) && !it->is_symlink(ec)) {
      archives.push_back(it->path());
    }
  }
  std::sort(archives.begin(), archives.end());
  return archives;
}

}  // namespace

fs::path SubmissionLayout::lessons_dir_of(const Lesson& lesson) const {
  for (const FoundLesson& f : lessons) {
    if (f.lesson == &lesson || (f.lesson != nullptr && f.lesson->number == lesson.number)) return f.lessons_dir;
  }
  return {};
}

std::string SubmissionLayout::problem_of(const Lesson& lesson) const {
  if (!problem.empty()) return problem;
  for (const FoundLesson& f : lessons) {
    if (f.lesson != nullptr && f.lesson->number == lesson.number) {
      if (!f.problem.empty()) return f.problem;
      if (f.lessons_dir.empty()) {
        return "no " + lesson.folder + "/exercise.cpp anywhere in " + name + " (see \"submission layout\")";
      }
    }
  }
  return "";
}

bool SubmissionLayout::complete() const {
  return problem.empty() && std::all_of(lessons.begin(), lessons.end(), [](const FoundLesson& f) {
           return !f.lessons_dir.empty() && f.problem.empty();
         });
}

std::string SubmissionLayout::text() const {
  size_t ok = 0;
  for (const FoundLesson& f : lessons) ok += !f.lessons_dir.empty() && f.problem.empty();
  std::string t = "submission layout of " + name + ": " + std::to_string(ok) + " of " + std::to_string(lessons.size()) +
                  " lesson" + (lessons.size() == 1 ? "" : "s") + " found\n";
  if (!problem.empty()) t += "  not taken: " + problem + "\n";
  for (const FoundLesson& f : lessons) {
    t += "  lesson " + std::to_string(f.lesson->number) + " (" + f.lesson->folder + "/exercise.cpp): ";
    if (!f.problem.empty()) {
      t += "not graded: " + f.problem + "\n";
    } else if (f.lessons_dir.empty()) {
      t += "not submitted\n";
    } else {
      t += "found at " + f.shown + "\n";
    }
  }
  for (const std::string& n : not_taken) t += "  not taken: " + n + "\n";
  for (const std::string& n : notes) t += "  note: " + n + "\n";
  if (ok < lessons.size()) {
    t += "expected: a folder N_name/ holding exercise.cpp for each lesson, at any depth of the submission (a copy of "
         "the lessons folder, zipped or not, is right: lessons/1_device_check/exercise.cpp ...)\n";
  }
  return t;
}

namespace {

// Each lesson's exercise.cpp, where the search found exactly one; a problem
// naming them all where it found several.
void place_lessons(SubmissionLayout& layout, const std::map<int, std::vector<std::string>>& found,
                   std::map<int, fs::path>& dirs) {
  for (FoundLesson& f : layout.lessons) {
    const auto it = found.find(f.lesson->number);
    if (it == found.end()) continue;
    std::vector<std::string> paths = it->second;
    std::sort(paths.begin(), paths.end());  // the same message whatever order the folder lists them in
    if (paths.size() == 1) {
      f.lessons_dir = dirs[f.lesson->number];
      f.shown = paths[0];
      continue;
    }
    std::string list;
    for (size_t i = 0; i < paths.size(); ++i) list += (i == 0 ? "" : i + 1 == paths.size() ? " and " : ", ") + paths[i];
    f.problem = std::to_string(paths.size()) + " files are " + f.lesson->folder + "/exercise.cpp: " + list +
                "; the grader cannot tell which is your answer: keep one and submit again";
  }
}

// quiz.txt beside the lessons found, else at the top (of the folder or of the archive's contents).
void find_quiz(SubmissionLayout& layout) {
  std::error_code ec;
  for (const FoundLesson& f : layout.lessons) {
    if (!f.lessons_dir.empty() && fs::exists(fs::symlink_status(f.lessons_dir / "quiz.txt", ec))) {
      layout.quiz_dir = f.lessons_dir;
      break;
    }
  }
  if (!layout.quiz_dir.empty() && !fs::exists(fs::symlink_status(layout.quiz_dir / "quiz.txt", ec)) &&
      fs::is_directory(layout.quiz_dir / "lessons", ec)) {
    layout.quiz_dir /= "lessons";
  }
}

}  // namespace

SubmissionLayout take_in(const fs::path& submission, const std::vector<const Lesson*>& lessons, const fs::path& scratch,
                         const ArchiveLimits& limits) {
  SubmissionLayout layout;
  for (const Lesson* l : lessons) layout.lessons.push_back({l, {}, "", ""});
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(submission, ec);
  const std::string base = submission.filename().string();
  layout.name = fs::is_directory(st) ? base + "/" : base;
  layout.quiz_dir = fs::is_directory(st) ? submission : fs::path();

  fs::path root = submission;
  std::string prefix;
  auto unpack = [&](const fs::path& archive) {
    const fs::path dest = scratch / "unpacked";
    prefix = archive.filename().string() + ": ";
    try {
      std::error_code made;
      fs::create_directories(scratch, made);
      unpack_archive(archive, dest, limits);
      root = dest;
      layout.quiz_dir = dest;
      return true;
    } catch (const std::exception& e) {
      layout.problem = e.what();
      return false;
    }
  };
  if (fs::is_symlink(st)) {
    layout.problem = base + " is a symbolic link: submit the folder or the archive itself";
    return layout;
  }
  if (fs::is_regular_file(st) && is_archive_name(base)) {
    if (!unpack(submission)) return layout;
  } else if (!fs::is_directory(st)) {
    layout.problem = base + " is neither a folder nor a .zip or .tar.gz file";
    return layout;
  }

  std::map<int, std::vector<std::string>> found;
  std::map<int, fs::path> dirs;
  search(root, prefix, lessons, found, dirs, layout);
  if (found.empty() && layout.not_taken.empty() && root == submission) {
    const std::vector<fs::path> archives = top_archives(submission);
    if (archives.size() == 1) {
      if (!unpack(archives[0])) return layout;
      search(root, prefix, lessons, found, dirs, layout);
    } else if (archives.size() > 1) {
      std::string names;
      for (const fs::path& a : archives) names += (names.empty() ? "" : ", ") + a.filename().string();
      layout.notes.push_back(base + " holds " + std::to_string(archives.size()) + " archives (" + names +
                             ") and no exercise.cpp: none was unpacked; submit one archive");
    }
  }
  place_lessons(layout, found, dirs);
  std::sort(layout.not_taken.begin(), layout.not_taken.end());
  find_quiz(layout);
  return layout;
}

}  // namespace workbook
