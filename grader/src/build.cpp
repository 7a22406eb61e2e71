#include "build.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "harness/process.h"

namespace workbook {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxSourceBytes = size_t{2} << 20;  // a lesson's exercise.cpp is a few KiB
constexpr size_t kMaxMessageLine = 1024;              // bytes of one line of the compiler's messages
constexpr size_t kMaxMessages = 8192;                 // bytes of them in all

// The newest modification time of `files`; a link is newer than anything
// (exercise.cpp made a link is built, and refused, however old its target).
fs::file_time_type newest(const std::vector<fs::path>& files) {
  fs::file_time_type t = fs::file_time_type::min();
  for (const fs::path& f : files) {
    std::error_code ec;
    if (fs::is_symlink(fs::symlink_status(f, ec))) return fs::file_time_type::max();
    const auto m = fs::last_write_time(f, ec);
    if (!ec && m > t) t = m;
  }
  return t;
}

// The first `limit` bytes of a file (the compiler's log is bounded, but need not be read whole).
std::string slurp(const fs::path& file, size_t limit = 1 << 20) {
  std::ifstream in(file, std::ios::binary);
  std::string text(limit, '\0');
  in.read(text.data(), static_cast<std::streamsize>(limit));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// The compiler quotes the student's lines: no control characters (a terminal's
// escape sequences) and no line longer than kMaxMessageLine bytes get through
// ("... (N bytes cut)", never inside a UTF-8 character).
std::string tame(const std::string& messages) {
  std::string out;
  std::istringstream in(messages);
  for (std::string line; std::getline(in, line);) {
    for (char& c : line) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) c = '?';
    }
    if (line.size() > kMaxMessageLine) {
      size_t keep = kMaxMessageLine;
      while (keep > 0 && (static_cast<unsigned char>(line[keep]) & 0xC0) == 0x80) --keep;
      const size_t cut = line.size() - keep;
      line = line.substr(0, keep) + "... (" + std::to_string(cut) + " bytes cut)";
    }
    out += line + "\n";
  }
  return out;
}

// At most kMaxMessages bytes, cut at a line's end.
std::string capped(const std::string& text) {
  if (text.size() <= kMaxMessages) return text;
  const size_t end = text.rfind('\n', kMaxMessages);
  const size_t keep = end == std::string::npos ? 0 : end + 1;
  return text.substr(0, keep) + "... (" + std::to_string(text.size() - keep) + " bytes cut)\n";
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
  return capped(out.empty() ? log : out);
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

// The compiler names the copy "exercise.cpp" (it works in its own folder); the student knows `original`.
std::string as_the_student_knows_it(const std::string& messages, const std::string& original) {
  std::istringstream in(messages);
  std::string out;
  const std::string copy = "exercise.cpp:";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(copy, 0) == 0) line = original + line.substr(copy.size() - 1);
    const std::string from = "from " + copy;
    if (const size_t at = line.find(from); at != std::string::npos && line.find_first_not_of(' ') == at) {
      line.replace(at + 5, copy.size() - 1, original);
    } else if (line.rfind("In file included from " + copy, 0) == 0) {
      line.replace(22, copy.size() - 1, original);
    }
    out += line + "\n";
  }
  return out;
}

// The grader's own source tree (this file is <source>/grader/src/build.cpp), if still there.
fs::path own_source_tree() {
  const fs::path here = __FILE__;
  if (!here.is_absolute()) return {};
  return here.parent_path().parent_path().parent_path();
}

// What the compiler (and the linker) must not read: the reference's sources,
// the checks and the committed mistakes, the git history (of the recipe's
// tree and of the tree the grader was built from), the build folders that
// hold the reference runners, the mistakes and their objects, and compiler
// caches (which hold the reference's objects). WORKBOOK_SANDBOX_HIDE (a batch
// of submissions) is added by run_process.
std::vector<fs::path> hidden_from_compiler(const Recipe& recipe) {
  std::vector<fs::path> out;
  for (const fs::path& root : {recipe.source_dir, own_source_tree()}) {
    if (root.empty()) continue;
    for (const char* sub : {"solutions", "tests", ".git"}) out.push_back(root / sub);
  }
  for (const char* sub : {"tests", "docs", "Testing"}) out.push_back(recipe.build_dir / sub);
  for (const Lesson& l : recipe.lessons) {
    out.push_back(l.reference.parent_path());
    out.push_back(l.checks.parent_path());
  }
  const char* home = std::getenv("HOME");
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* ccache = std::getenv("CCACHE_DIR");
  if (ccache != nullptr && *ccache != '\0') out.push_back(ccache);
  if (cache != nullptr && *cache != '\0') out.push_back(fs::path(cache) / "ccache");
  if (home != nullptr && *home != '\0') {
    out.push_back(fs::path(home) / ".cache" / "ccache");
    out.push_back(fs::path(home) / ".ccache");
  }
  return out;
}

// True when anyone may read `path` (every folder above it passable by others):
// what the sandbox's own uid can reach without a copy.
bool readable_by_anyone(const fs::path& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || (st.st_mode & S_IROTH) == 0) return false;
  if (S_ISDIR(st.st_mode) && (st.st_mode & S_IXOTH) == 0) return false;
  for (fs::path p = path.parent_path(); !p.empty(); p = p.parent_path()) {
    if (stat(p.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0) return false;
    if (p == p.root_path()) break;
  }
  return true;
}

// `path` as the sandboxed compiler can read it: itself when anyone may, else
// a copy in its folder (`scratch`, under the name `name`), given as relative to it.
std::string reachable(const fs::path& path, const fs::path& scratch, const std::string& name) {
  if (geteuid() != 0 || readable_by_anyone(path)) return path.string();
  std::error_code ec;
  fs::copy(path, scratch / name, fs::copy_options::recursive | fs::copy_options::overwrite_existing, ec);
  return ec ? path.string() : name;
}

// Reads a submission's exercise.cpp: a regular file of at most
// kMaxSourceBytes, never through a link, and none of the workbook's own files
// (a submission folder, or its lessons folder, may be a link into our tree).
// On failure `problem` says why, in the student's words.
bool read_submitted(const fs::path& lessons_dir, const std::string& folder, const std::vector<fs::path>& forbidden,
                    std::string& text, std::string& problem) {
  const std::string name = folder + "/exercise.cpp";
  const int dir = open(lessons_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  const int lesson = dir < 0 ? -1 : openat(dir, folder.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  const int lesson_errno = errno;
  const int fd = lesson < 0 ? -1 : openat(lesson, "exercise.cpp", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  const int file_errno = errno;
  if (dir >= 0) close(dir);
  if (lesson >= 0) close(lesson);
  if (dir < 0 || lesson < 0) {
    problem = lesson_errno == ENOTDIR || lesson_errno == ELOOP
                  ? folder + " is a link, not a folder: only a folder holding exercise.cpp is taken"
                  : "the folder " + folder + " cannot be read (" + std::strerror(lesson_errno) + ")";
    return false;
  }
  if (fd < 0) {
    problem = file_errno == ELOOP ? name + " is a symbolic link: only a regular file is taken (a link could point at "
                                           "any file of the grading machine)"
                                  : name + " cannot be read (" + std::strerror(file_errno) + ")";
    return false;
  }
  struct stat st {};
  char where[4096] = {};
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(self.c_str(), where, sizeof where - 1);
  bool ok = fstat(fd, &st) == 0;
  if (!ok || !S_ISREG(st.st_mode)) {
    problem = name + " is not a regular file (a folder, a device or a pipe): only a regular file is taken";
  } else if (static_cast<size_t>(st.st_size) > kMaxSourceBytes) {
    problem = name + " is " + std::to_string(st.st_size) + " bytes: at most " + std::to_string(kMaxSourceBytes >> 20) +
              " MiB is taken (a lesson's exercise.cpp is a few KiB)";
  }
  // A file of the workbook is taken only when asked for by its own name
  // (`grade --submission solutions`, the maintainers' check), never through a link.
  const std::string real = n > 0 ? std::string(where, static_cast<size_t>(n)) : std::string();
  std::error_code ec;
  const fs::path asked = fs::absolute(lessons_dir, ec).lexically_normal();
  auto under = [](const fs::path& path, const fs::path& root) {
    const std::string p = path.string(), r = root.string();
    return !r.empty() && (p == r || p.rfind(r + (r.back() == '/' ? "" : "/"), 0) == 0);
  };
  for (const fs::path& root : forbidden) {
    const fs::path canonical = fs::weakly_canonical(root, ec);
    if (problem.empty() && under(real, canonical) && !under(asked, root) && !under(asked, canonical)) {
      problem = name + " is, through a link, a file of the workbook itself (" + real + "): not taken";
    }
  }
  if (problem.empty()) {
    text.assign(static_cast<size_t>(st.st_size) + 1, '\0');
    size_t got = 0;
    for (ssize_t r; got < text.size() && (r = read(fd, text.data() + got, text.size() - got)) != 0;) {
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) break;
      got += static_cast<size_t>(r);
    }
    text.resize(got);
    if (got > static_cast<size_t>(st.st_size)) problem = name + " grew while it was being read: not taken";
  }
  close(fd);
  return problem.empty();
}

// Writes `text` into a new file (it must not exist: the scratch folder is fresh).
bool write_new(const fs::path& file, const std::string& text) {
  const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

// The time limit of compiling (and of linking) when the grader's deadline does not cut it.
constexpr double timeout_s_default() { return 300; }

// The limits of compiling and linking one exercise.cpp, in the sandbox of a student's run.
ProcessOptions sandboxed(const Recipe& recipe, const fs::path& scratch, const fs::path& log) {
  ProcessOptions p;
  p.sandbox = true;
  p.hidden = hidden_from_compiler(recipe);
  p.cwd = scratch;
  p.log = log;
  p.timeout_s = timeout_s_default();
  p.cpu_limit_s = 600;
  p.memory_limit = size_t{3} << 30;
  p.address_space_limit = size_t{4} << 30;  // where no memory cgroup can be made: cc1plus maps under 2 GiB here
  p.process_limit = 64;
  p.output_limit = size_t{256} << 20;  // its messages, and its folder: the object, the runner, the compiler's temporary files
  p.env["TMPDIR"] = ".";               // everything else is read-only to it
  return p;
}

// "the compiler ran out of memory ..." when it was stopped; "" when it only found errors.
std::string stopped_compiler(const std::string& who, const ProcessResult& p) {
  if (!(p.start_failed || p.timed_out || p.out_of_memory || p.output_limit_hit || p.cpu_limit_hit ||
        p.process_limit_hit || p.signal != 0)) {
    return "";
  }
  std::string why = who + " " + p.describe() + "\n";
  for (const std::string& check : {std::string("the limit of this check"), std::string("this check")}) {
    for (size_t at = why.find(check); at != std::string::npos; at = why.find(check)) why.replace(at, check.size(), "the limit for compiling");
  }
  if (!p.start_failed) why += "(is something #included that is not a source file, such as a device?)\n";
  return why;
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

namespace {

// What the runner is built from: when none is newer than it, it is up to date.
std::vector<fs::path> build_inputs(const Recipe& recipe, const Lesson& lesson, const fs::path& source) {
  const fs::path header = recipe.source_dir / "lessons" / lesson.folder / "exercise.h";
  std::vector<fs::path> inputs = {source, header};
  for (const std::string& g : lesson.glue) inputs.push_back(g);
  for (const std::string& l : recipe.link) {
    if (l.rfind("-", 0) != 0) inputs.push_back(l);
  }
  return inputs;
}

// Where a submission's exercise.cpp may not lead: the reference, the checks, the mistakes.
std::vector<fs::path> forbidden_folders(const Recipe& recipe) {
  std::vector<fs::path> forbidden;
  for (const fs::path& root : {recipe.source_dir, own_source_tree()}) {
    for (const char* sub : {"solutions", "tests", ".git"}) {
      if (!root.empty()) forbidden.push_back(root / sub);
    }
  }
  for (const Lesson& l : recipe.lessons) forbidden.push_back(l.reference.parent_path());
  return forbidden;
}

// Compiled in the sandbox of a student's run, as the reference was (the
// recipe's compiler and flags, no cache); `staged` numbers what is made
// reachable in `scratch`.
ProcessOptions compile_command(const Recipe& recipe, const Lesson& lesson, const fs::path& scratch,
                               const fs::path& log, int& staged) {
  ProcessOptions compile = sandboxed(recipe, scratch, log);
  compile.argv.push_back(recipe.cxx);
  for (const std::string& f : recipe.flags) compile.argv.push_back(f);
  compile.argv.push_back(recipe.cxx.find("clang") != std::string::npos ? "-ferror-limit=20" : "-fmax-errors=20");
  for (const std::string& d : recipe.defines) compile.argv.push_back("-D" + d);
  for (const std::string& i : recipe.include_dirs) {
    compile.argv.push_back("-I" + reachable(i, scratch, "include-" + std::to_string(staged++)));
  }
  compile.argv.push_back("-I" + reachable(recipe.source_dir / "lessons" / lesson.folder, scratch, "lesson"));
  for (const char* a : {"-c", "exercise.cpp", "-o", "exercise.o"}) compile.argv.push_back(a);
  return compile;
}

// Linked in the same sandbox: the object is the student's work too. The
// lesson's glue lies beside the reference runner (hidden): it is copied in.
ProcessOptions link_command(const Recipe& recipe, const Lesson& lesson, const fs::path& scratch, const fs::path& log,
                            int& staged) {
  ProcessOptions link = sandboxed(recipe, scratch, log);
  link.argv = {recipe.cxx, "exercise.o"};
  std::error_code ec;
  for (const std::string& g : lesson.glue) {
    const std::string name = "glue-" + std::to_string(staged++) + ".o";
    fs::copy_file(g, scratch / name, ec);
    link.argv.push_back(ec ? g : name);
  }
  for (const std::string& l : recipe.link) {
    link.argv.push_back(l.rfind("-", 0) == 0 ? l : reachable(l, scratch, "lib-" + std::to_string(staged++) + "-" + fs::path(l).filename().string()));
  }
  for (const char* a : {"-o", "runner"}) link.argv.push_back(a);
  return link;
}

// Compiles and links the exercise.cpp in `scratch` into scratch/runner within
// time_left() each; false, with result.log saying why, when either failed.
bool compile_and_link(const Recipe& recipe, const Lesson& lesson, const fs::path& scratch, const fs::path& log,
                      const std::string& original, const std::function<double()>& time_left, BuildResult& result,
                      std::string& messages) {
  int staged = 0;
  ProcessOptions compile = compile_command(recipe, lesson, scratch, log, staged);
  compile.timeout_s = std::min(compile.timeout_s, time_left());
  ProcessResult p = run_process(compile);
  result.isolation = p.isolation;
  messages = as_the_student_knows_it(tame(slurp(log)), original);
  if (!p.ok()) {
    result.out_of_time = p.timed_out && compile.timeout_s < timeout_s_default();
    const std::string stopped = stopped_compiler("the compiler", p);
    result.log = stopped.empty() ? first_errors(messages) : stopped + first_errors(messages);
    return false;
  }
  ProcessOptions link = link_command(recipe, lesson, scratch, log, staged);
  link.timeout_s = std::min(link.timeout_s, time_left());
  p = run_process(link);
  if (!p.ok()) {
    result.out_of_time = p.timed_out && link.timeout_s < timeout_s_default();
    const std::string stopped = stopped_compiler("the linker", p);
    result.log = stopped + first_errors(tame(slurp(log)));
    if (result.log.find("undefined reference") != std::string::npos) {
      result.log += "(a function of exercise.h is missing from your exercise.cpp, or its name or parameters differ)\n";
    }
    return false;
  }
  return true;
}

}  // namespace

BuildResult build_student(const Recipe& recipe, const Lesson& lesson, const fs::path& lessons_dir,
                          const fs::path& out_dir, const std::function<void()>& before_compiling, double timeout_s) {
  const auto started = std::chrono::steady_clock::now();
  // The compile and the link share timeout_s.
  auto time_left = [&]() {
    return std::max(1.0, timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  };
  BuildResult result;
  const fs::path source = lessons_dir / lesson.folder / "exercise.cpp";
  const fs::path dir = out_dir / lesson.folder;
  result.runner = dir / "runner";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(source, ec))) {
    result.log = "there is no " + source.string();
    return result;
  }
  fs::create_directories(dir);
  const auto runner_time = fs::last_write_time(result.runner, ec);
  if (!ec && runner_time > newest(build_inputs(recipe, lesson, source))) {
    result.ok = true;
    return result;
  }

  if (before_compiling) before_compiling();

  // The runner stays in place until the new one replaces it; a build that
  // fails removes it, so that no check runs the code from before.
  auto failed = [&]() {
    fs::remove(result.runner, ec);
    return result;
  };
  // Only the exercise.cpp, copied alone into a fresh folder: a submission's
  // own exercise.h or other files are never used, and a link is never followed.
  std::string text, problem;
  if (!read_submitted(lessons_dir, lesson.folder, forbidden_folders(recipe), text, problem)) {
    result.log = problem + "\n";
    return failed();
  }
  static std::atomic<unsigned> builds{0};
  const fs::path scratch = dir / (".build-" + std::to_string(getpid()) + "-" + std::to_string(builds++));
  fs::remove_all(scratch, ec);
  fs::create_directory(scratch, ec);
  remove_on_interrupt(scratch);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(dir, e);
    }
  } cleanup{scratch};
  if (ec || !write_new(scratch / "exercise.cpp", text)) {
    result.log = "could not copy " + source.string() + " into " + scratch.string() + "\n";
    return failed();
  }
  const fs::path log = dir / "build.log";
  const std::string original = shown_path(source);

  std::string messages;  // the compiler's, as the student knows the file
  if (!compile_and_link(recipe, lesson, scratch, log, original, time_left, result, messages)) return failed();
  // A regular file of ours (copied back by run_process), renamed into place
  // (atomic: a process that starts the runner gets the old one or the new one).
  struct stat st {};
  if (lstat((scratch / "runner").c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    result.log = "the linker left no runner in " + scratch.string() + "\n";
    return failed();
  }
  fs::rename(scratch / "runner", result.runner, ec);
  if (ec) {
    result.log = "could not put the new runner in place (" + result.runner.string() + "): " + ec.message() + "\n";
    return failed();
  }
  result.ok = result.rebuilt = true;
  result.log = capped(messages);  // warnings, if any
  result.warnings = warnings_about(messages, original);
  return result;
}

}  // namespace workbook
