#include "build.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "harness/process.h"

namespace workbook {

namespace fs = std::filesystem;

namespace {

fs::file_time_type newest(const std::vector<fs::path>& files) {
  fs::file_time_type t = fs::file_time_type::min();
  std::error_code ec;
  for (const fs::path& f : files) {
    const auto m = fs::last_write_time(f, ec);
    if (!ec && m > t) t = m;
  }
  return t;
}

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first lines that matter of a compiler's output: errors first, capped.
std::string first_errors(const std::string& log, size_t max_lines = 25) {
  std::istringstream in(log);
  std::string line, out;
  size_t n = 0;
  bool seen_error = false;
  while (std::getline(in, line) && n < max_lines) {
    if (line.find("error") != std::string::npos) seen_error = true;
    if (!seen_error && line.find("warning") != std::string::npos) continue;
    out += line + "\n";
    ++n;
  }
  return out.empty() ? log : out;
}

// How the student knows their file: relative to the current folder when it lies under it
// ("lessons/2_moving_tensors/exercise.cpp" from the repository's root).
std::string shown_path(const fs::path& file) {
  std::error_code ec;
  const fs::path here = fs::current_path(ec);
  if (ec) return file.string();
  const fs::path relative = fs::relative(file, here, ec);
  if (ec || relative.empty() || *relative.begin() == "..") return file.string();
  return relative.string();
}

}  // namespace

LessonLock::LessonLock(const fs::path& dir, const std::string& waiting) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  fd_ = open((dir / "runner.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;  // a folder we cannot write: nothing there to protect from a build of ours either
  if (flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  if (!waiting.empty()) {
    std::fprintf(stderr, "%s\n", waiting.c_str());
    std::fflush(stderr);
  }
  while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
  }
}

LessonLock::~LessonLock() {
  if (fd_ >= 0) close(fd_);  // closing releases the lock
}

std::string warnings_about(const std::string& messages, const std::string& source, size_t max_lines) {
  // A message is a line that starts in the first column, with the indented lines under it (the source line, the caret).
  std::vector<std::vector<std::string>> blocks;
  std::istringstream in(messages);
  for (std::string line; std::getline(in, line);) {
    if (blocks.empty() || (!line.empty() && line[0] != ' ')) blocks.emplace_back();
    blocks.back().push_back(line);
  }
  const std::string prefix = source + ":";
  std::vector<std::string> kept, scope;  // scope: "exercise.cpp: In function ...:", shown with the warning under it
  bool any_warning = false;
  for (const std::vector<std::string>& block : blocks) {
    const std::string& first = block.front();
    if (first.rfind(prefix, 0) != 0) {
      scope.clear();  // about another file (the workbook's headers), or "In file included from"
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(first[prefix.size()]))) {
      scope = block;  // no line number: a scope line
      continue;
    }
    any_warning = any_warning || first.find("warning:") != std::string::npos;
    kept.insert(kept.end(), scope.begin(), scope.end());
    scope.clear();
    kept.insert(kept.end(), block.begin(), block.end());
  }
  if (!any_warning) return "";
  std::string out;
  for (size_t i = 0; i < kept.size() && i < max_lines; ++i) out += kept[i] + "\n";
  if (kept.size() > max_lines) out += "(" + std::to_string(kept.size() - max_lines) + " more lines not shown)\n";
  return out;
}

BuildResult build_student(const Recipe& recipe, const Lesson& lesson, const fs::path& lessons_dir,
                          const fs::path& out_dir, const std::function<void()>& before_compiling) {
  BuildResult result;
  const fs::path source = lessons_dir / lesson.folder / "exercise.cpp";
  const fs::path dir = out_dir / lesson.folder;
  result.runner = dir / "runner";
  if (!fs::exists(source)) {
    result.log = "there is no " + source.string();
    return result;
  }
  fs::create_directories(dir);
  const fs::path header = recipe.source_dir / "lessons" / lesson.folder / "exercise.h";
  std::vector<fs::path> inputs = {source, header};
  for (const std::string& g : lesson.glue) inputs.push_back(g);
  for (const std::string& l : recipe.link) {
    if (l.rfind("-", 0) != 0) inputs.push_back(l);
  }
  std::error_code ec;
  const auto runner_time = fs::last_write_time(result.runner, ec);
  if (!ec && runner_time > newest(inputs)) {
    result.ok = true;
    return result;
  }

  if (before_compiling) before_compiling();

  // Only the exercise.cpp: a submission's own exercise.h or other files are never used.
  const fs::path copy = dir / "exercise.cpp";
  if (!fs::exists(copy) || !fs::equivalent(source, copy)) fs::copy_file(source, copy, fs::copy_options::overwrite_existing);
  const fs::path object = dir / "exercise.o", log = dir / "build.log";
  // The runner stays in place until the new one replaces it; a build that
  // fails removes it, so that no check runs the code from before.
  const fs::path linked = dir / ("runner." + std::to_string(getpid()) + ".tmp");
  auto failed = [&]() {
    fs::remove(result.runner, ec);
    fs::remove(linked, ec);
    return result;
  };

  ProcessOptions compile;
  if (!recipe.launcher.empty()) compile.argv.push_back(recipe.launcher);
  compile.argv.push_back(recipe.cxx);
  for (const std::string& f : recipe.flags) compile.argv.push_back(f);
  for (const std::string& d : recipe.defines) compile.argv.push_back("-D" + d);
  for (const std::string& i : recipe.include_dirs) compile.argv.push_back("-I" + i);
  compile.argv.push_back("-I" + (recipe.source_dir / "lessons" / lesson.folder).string());
  for (const std::string& a : {std::string("-c"), copy.string(), std::string("-o"), object.string()}) compile.argv.push_back(a);
  compile.timeout_s = 600;
  compile.log = log;
  ProcessResult p = run_process(compile);
  // The compiler saw the copy; the student knows the original.
  std::string messages = slurp(log);
  const std::string original = shown_path(source);
  for (size_t at = messages.find(copy.string()); at != std::string::npos; at = messages.find(copy.string(), at)) {
    messages.replace(at, copy.string().size(), original);
    at += original.size();
  }
  if (!p.ok()) {
    result.log = p.timed_out || p.start_failed ? "the compiler " + p.describe() : first_errors(messages);
    return failed();
  }
  ProcessOptions link;
  link.argv = {recipe.cxx, object.string()};
  for (const std::string& g : lesson.glue) link.argv.push_back(g);
  for (const std::string& l : recipe.link) link.argv.push_back(l);
  link.argv.push_back("-o");
  link.argv.push_back(linked.string());
  link.timeout_s = 300;
  link.log = log;
  p = run_process(link);
  if (!p.ok()) {
    result.log = first_errors(slurp(log));
    if (result.log.find("undefined reference") != std::string::npos) {
      result.log += "(a function of exercise.h is missing from your exercise.cpp, or its name or parameters differ)\n";
    }
    return failed();
  }
  fs::rename(linked, result.runner, ec);  // atomic: a process that starts the runner gets the old one or the new one
  if (ec) {
    result.log = "could not put the new runner in place (" + result.runner.string() + "): " + ec.message() + "\n";
    return failed();
  }
  result.ok = result.rebuilt = true;
  result.log = messages;  // warnings, if any
  result.warnings = warnings_about(messages, original);
  return result;
}

}  // namespace workbook
