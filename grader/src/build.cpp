#include "build.h"

#include <fstream>
#include <sstream>

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

}  // namespace

BuildResult build_student(const Recipe& recipe, const Lesson& lesson, const fs::path& lessons_dir,
                          const fs::path& out_dir) {
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

  // Only the exercise.cpp: a submission's own exercise.h or other files are never used.
  const fs::path copy = dir / "exercise.cpp";
  if (!fs::exists(copy) || !fs::equivalent(source, copy)) fs::copy_file(source, copy, fs::copy_options::overwrite_existing);
  const fs::path object = dir / "exercise.o", log = dir / "build.log";
  fs::remove(result.runner, ec);

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
  for (size_t at = messages.find(copy.string()); at != std::string::npos; at = messages.find(copy.string(), at)) {
    messages.replace(at, copy.string().size(), source.string());
  }
  if (!p.ok()) {
    result.log = p.timed_out ? "the compiler " + p.describe() : first_errors(messages);
    return result;
  }
  ProcessOptions link;
  link.argv = {recipe.cxx, object.string()};
  for (const std::string& g : lesson.glue) link.argv.push_back(g);
  for (const std::string& l : recipe.link) link.argv.push_back(l);
  link.argv.push_back("-o");
  link.argv.push_back(result.runner.string());
  link.timeout_s = 300;
  link.log = log;
  p = run_process(link);
  if (!p.ok()) {
    result.log = first_errors(slurp(log));
    if (result.log.find("undefined reference") != std::string::npos) {
      result.log += "(a function of exercise.h is missing from your exercise.cpp, or its name or parameters differ)\n";
    }
    return result;
  }
  result.ok = result.rebuilt = true;
  result.log = messages;  // warnings, if any
  return result;
}

}  // namespace workbook
