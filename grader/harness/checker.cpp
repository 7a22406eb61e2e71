#include "checker.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "checker_options.h"
#include "runner.h"
#include "tiny/cuda_grading.h"

extern char** environ;  // the TINY_* variables a run inherits are part of a cached reference run's key

namespace workbook {

namespace fs = std::filesystem;

namespace {

// Adds to `devices` each device of one run (`seen`, the runner's "_devices") not
// recorded yet: a lesson whose checks run on 1 GPU and on 2, or model another
// GPU in one check, lists every device it ran on, as it was in each run.
void note_devices(nlohmann::json& devices, const nlohmann::json& seen) {
  if (!seen.is_array() || !devices.is_array()) return;
  for (const nlohmann::json& d : seen) {
    if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  }
}

struct Registry {
  std::vector<Check> checks;
  int lesson = 0;
  std::string folder;
  std::vector<std::string> counters;  // WORKBOOK_LESSON_COUNTERS
};

Registry& registry() {
  static Registry r;
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string fixed(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::pass: return "pass";
    case Verdict::fail: return "fail";
    case Verdict::todo: return "todo";
    case Verdict::skip: return "skip";
    case Verdict::error: return "error";
  }
  return "error";
}

// Holds an exclusive lock on a file for as long as it lives: timing checks of
// every checker on this machine take turns (ctest -j, the grader's batches).
class TimingLock {
 public:
  TimingLock() {
    const char* env = std::getenv("WORKBOOK_TIMING_LOCK");
    const std::string path = env != nullptr && *env != '\0' ? env : (fs::temp_directory_path() / "workbook-timing.lock").string();
    fd_ = open(path.c_str(), O_RDWR | O_CREAT, 0666);
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~TimingLock() {
    if (fd_ >= 0) close(fd_);  // closing releases the lock
  }
  TimingLock(const TimingLock&) = delete;
  TimingLock& operator=(const TimingLock&) = delete;

 private:
  int fd_ = -1;
};

std::string indent(const std::string& text, const std::string& pad) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out += pad + line + "\n";
  return out;
}

// Processes and threads a student's run may have at once: tiny's thread pool
// (one per CPU) and the emulated GPUs' workers, with room to spare.
int default_process_limit() {
  return static_cast<int>(std::max(256u, 4 * std::thread::hardware_concurrency()));
}

// Every string of `values` that starts with `prefix` (the work folder and a
// slash) loses it: a path relative to the run's own folder.
void relative_to_own_folder(nlohmann::json& values, const std::string& prefix) {
  if (values.is_string()) {
    const std::string& text = values.get_ref<const std::string&>();
    if (text.size() > prefix.size() && text.compare(0, prefix.size(), prefix) == 0) values = text.substr(prefix.size());
  } else if (values.is_structured()) {
    for (auto& item : values) relative_to_own_folder(item, prefix);
  }
}

// "" when `dir` (a student's results) holds only plain files and folders; else
// what is wrong: a link could make us read, as root, what the student cannot.
std::string not_plain_results(const fs::path& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return "";  // no results: Bundle::load says so
  if (!S_ISDIR(st.st_mode)) return dir.filename().string() + " is not a plain folder";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (lstat(it->path().c_str(), &st) != 0) continue;
    const std::string name = fs::relative(it->path(), dir.parent_path()).string();
    if (S_ISLNK(st.st_mode)) return name + " is a link (results must be plain files)";
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) return name + " is not a plain file";
    if (S_ISREG(st.st_mode) && st.st_nlink > 1) return name + " is a hard link to another file";
  }
  return ec ? "its results folder cannot be read (" + ec.message() + ")" : "";
}

// The channel a runner sends its results through (runner.h): a pipe with no
// name anywhere, whose write end the runner inherits as its descriptor 3 (and
// nothing else does); we read it with a thread while the runner runs (a pipe
// holds only 64 KiB), at most kMaxExchangeBytes kept and the rest counted,
// never stored. What a graded run leaves on disk as values.json is never read.
class ResultsChannel {
 public:
  ResultsChannel() {
    int ends[2] = {-1, -1};
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(ends, O_CLOEXEC) != 0) return;
    fd_ = ends[0];
    write_end_ = ends[1];
    fcntl(fd_, F_SETFL, O_NONBLOCK);
    reader_ = std::thread([this] { read_until_stopped(); });
  }
  ~ResultsChannel() {
    stop();
    for (int fd : {wake_[0], wake_[1], write_end_}) {
      if (fd >= 0) ::close(fd);
    }
  }
  ResultsChannel(const ResultsChannel&) = delete;
  ResultsChannel& operator=(const ResultsChannel&) = delete;

  /// The write end, for the runner alone (ProcessOptions::pass_fds, which closes ours).
  int give_write_end() {
    const int fd = write_end_;
    write_end_ = -1;
    return fd;
  }
  /// False when the pipe could not be made (the run then cannot send anything).
  bool ready() const { return fd_ >= 0; }
  /// What was sent, once the runner has ended (stops reading).
  const std::string& text() {
    stop();
    return text_;
  }
  /// How many bytes were sent, those not kept too.
  size_t bytes() {
    stop();
    return bytes_;
  }

 private:
  void stop() {
    if (reader_.joinable()) {
      (void)!::write(wake_[1], "x", 1);
      reader_.join();
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Reads what is there; true once every writer has left (end of file).
  bool drain() {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) return true;
      if (n < 0) return false;
      bytes_ += static_cast<size_t>(n);
      if (text_.size() <= kMaxExchangeBytes) {
        text_.append(buf, std::min(static_cast<size_t>(n), kMaxExchangeBytes + 1 - text_.size()));
      }
    }
  }
  void read_until_stopped() {
    // Until every writer has left (the runner, and any process of its that
    // kept the descriptor) or we are told to stop.
    for (;;) {
      pollfd p[2] = {{wake_[0], POLLIN, 0}, {fd_, POLLIN, 0}};
      const int ready = poll(p, 2, -1);
      if (ready < 0 && errno != EINTR) break;
      if (p[0].revents != 0) break;
      if (p[1].revents != 0 && drain()) break;  // end of file: no writer is left
    }
    drain();  // what the runner wrote before it ended
  }

  int fd_ = -1;
  int write_end_ = -1;
  int wake_[2] = {-1, -1};  // written by stop(): wakes the reader
  std::thread reader_;
  std::string text_;
  size_t bytes_ = 0;
};

// The counters of a student's run as the checks and the report may use them:
// "cuda:N" (a few devices) -> name -> number; anything else it sent is dropped.
nlohmann::json plain_counters(const nlohmann::json& sent) {
  nlohmann::json out = nlohmann::json::object();
  if (!sent.is_object()) return out;
  for (const auto& [device, counters] : sent.items()) {
    if (out.size() >= 16 || device.size() > 8 || device.rfind("cuda:", 0) != 0 || !counters.is_object()) continue;
    nlohmann::json kept = nlohmann::json::object();
    for (const auto& [name, value] : counters.items()) {
      if (kept.size() < 32 && name.size() <= 64 && value.is_number()) kept[name] = value;
    }
    out[device] = kept;
  }
  return out;
}

// What the harness's own keys of a student's results must be ("" when they
// are); the checks would otherwise stop on a type error, an ERROR of the workbook's.
std::string harness_keys_problem(const nlohmann::json& v) {
  const auto status = v.find("_status");
  if (status == v.end()) return "it sent no _status";
  const std::string s = status->is_string() ? status->get<std::string>() : "";
  if (s != "ok" && s != "todo" && s != "error") {
    return "its _status is " + cut_text(status->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 64, 64) +
           ", not ok, todo or error";
  }
  for (const char* key : {"_message", "_error_type"}) {
    if (v.contains(key) && !v[key].is_string()) return std::string("its ") + key + " is not a string";
  }
  for (const char* key : {"_elapsed_ms"}) {
    if (v.contains(key) && !v[key].is_number()) return std::string("its ") + key + " is not a number";
  }
  for (const char* key : {"_times_ms", "_modelled_ms"}) {
    if (!v.contains(key)) continue;
    const nlohmann::json& t = v[key];
    if (!t.is_array() || !std::all_of(t.begin(), t.end(), [](const nlohmann::json& x) { return x.is_number(); }))
      return std::string("its ") + key + " is not a list of numbers";
  }
  for (const char* key : {"_modelled_gpu", "_emulated_gpu_model"}) {
    if (v.contains(key) && !v[key].is_string()) return std::string("its ") + key + " is not a string";
  }
  return "";
}

// Why a student's run did not run on the emulated GPUs the grader set: as
// many as TINY_EMULATED_GPUS, modelled on the GPU TINY_EMULATED_GPU_MODEL
// names (the check's, else the grader's own). The student's code can change
// either before the emulator reads it (a static initializer runs before
// main), and the model decides every modelled time. "" when they match.
std::string emulator_problem(const nlohmann::json& v, const ProcessOptions& p) {
  const auto gpus = p.env.find("TINY_EMULATED_GPUS");
  const auto devices = v.find("_devices");
  if (gpus != p.env.end() && devices != v.end() && devices->is_array() &&
      std::to_string(devices->size()) != gpus->second) {
    return "ran on " + std::to_string(devices->size()) + " GPUs where the grader set " + gpus->second +
           " (TINY_EMULATED_GPUS): your code changed TINY_EMULATED_GPUS before the emulator read it; the grader "
           "chooses the devices a check runs on, so take that change out of your exercise.cpp";
  }
  const std::string ran = v.value("_emulated_gpu_model", "");
  if (ran.empty()) return "";
  const auto set = p.env.find("TINY_EMULATED_GPU_MODEL");
  const char* inherited = std::getenv("TINY_EMULATED_GPU_MODEL");
  const std::string given = set != p.env.end() ? set->second : inherited != nullptr ? inherited : "";
  std::string expected;
  try {
    expected = tiny::cuda::grading::emulated_gpu_model(given);
  } catch (const std::exception&) {
    return "";  // the grader's own setting is wrong: the reference's run says so
  }
  if (ran == expected) return "";
  return "ran on an emulated GPU modelled on another GPU than the grader set (yours: " + cut_text(ran, 128, 128) +
         ", the grader's: " + expected + ", each a model's name and a digest of its figures): your code changed "
         "TINY_EMULATED_GPU_MODEL, or the model file it names, before the emulator read it. The grader chooses the "
         "GPU a check's time is modelled on, so take that change out of your exercise.cpp";
}

// "reset the GPU counters (...) during a graded run: ..." when the student's
// code tried to reset what the checks count ("" when it did not).
std::string refused_resets_message(const nlohmann::json& v) {
  const auto it = v.find("_refused_resets");
  if (it == v.end() || !it->is_object()) return "";
  auto count = [&](const char* key) {
    const auto c = it->find(key);
    return c != it->end() && c->is_number() ? c->get<double>() : 0.0;
  };
  const bool counters = count("reset_device_counters") > 0, peaks = count("reset_peak_memory_stats") > 0;
  if (!counters && !peaks) return "";
  std::string what;
  if (counters) what = "the GPU counters (tiny::cuda::reset_device_counters)";
  if (peaks) what += std::string(counters ? " and " : "") + "the peak memory statistics (tiny::cuda::reset_peak_memory_stats)";
  return "reset " + what + " during a graded run: the checks count the work your code does, so they cannot be "
         "reset; take the reset out of your exercise.cpp";
}

// The check's details as they go into the JSON and the report: every string
// cut to kMaxMessageBytes, and the whole at most kMaxDetailsBytes (the
// checker's own figures, counters and timing, are kept in any case).
constexpr size_t kMaxDetailsBytes = size_t{256} << 10;
void cut_strings(nlohmann::json& j) {
  if (j.is_string()) {
    const std::string& text = j.get_ref<const std::string&>();
    if (text.size() > kMaxMessageBytes) j = cut_text(text);
  } else if (j.is_structured()) {
    for (auto& item : j) cut_strings(item);
  }
}
nlohmann::json bounded_details(nlohmann::json details) {
  cut_strings(details);
  const size_t size = details.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  if (size <= kMaxDetailsBytes || !details.is_object()) return details;
  nlohmann::json kept = nlohmann::json::object();
  for (const char* key : {"counters", "timing", "sandbox"}) {
    if (details.contains(key)) kept[key] = details[key];
  }
  kept["cut"] = "the other details (" + bytes_text(size) + " in all) were left out: more than the " +
                bytes_text(kMaxDetailsBytes) + " a check's details may hold";
  return kept;
}

// The source tree this checker was built from, if still there. Not from __FILE__:
// ccache (with its base directory set) compiles with relative paths, and a
// relative __FILE__ once hid nothing from a student's run.
fs::path source_tree() {
  const fs::path root = WORKBOOK_SOURCE_DIR;
  std::error_code ec;
  return root.is_absolute() && fs::is_directory(root / "solutions", ec) ? root : fs::path();
}

// What a student's run must not read: the reference's sources, the checks and
// the committed mistakes (the repository is world-readable), the git history,
// the folder of the reference runner (its build folder, with the mistakes'
// sources), and the paths of WORKBOOK_SANDBOX_HIDE (separated by ':').
std::vector<fs::path> paths_to_hide(const fs::path& reference_runner) {
  std::vector<fs::path> out;
  if (const fs::path src = source_tree(); !src.empty()) {
    for (const char* sub : {"solutions", "tests", ".git"}) out.push_back(src / sub);
  }
  out.push_back(reference_runner.parent_path());
  if (const char* env = std::getenv("WORKBOOK_SANDBOX_HIDE"); env != nullptr) {
    std::istringstream in(env);
    std::string item;
    while (std::getline(in, item, ':')) {
      if (!item.empty()) out.push_back(item);
    }
  }
  std::vector<fs::path> existing;
  for (const fs::path& p : out) {
    std::error_code ec;
    if (fs::exists(p, ec)) existing.push_back(p);
  }
  return existing;
}

// The libtiny.so this checker runs with ("" if it cannot be found).
fs::path libtiny_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&tiny::get_num_threads), &info) == 0 || info.dli_fname == nullptr) return {};
  return info.dli_fname;
}

}  // namespace

// ---------------------------------------------------------------- Run, Context

nlohmann::json Run::counters(int device) const {
  const std::string key = "cuda:" + std::to_string(device);
  if (out.values.contains("_counters") && out.values["_counters"].contains(key)) return out.values["_counters"][key];
  return nlohmann::json::object();
}

tiny::Generator Context::generator(uint64_t stream) const {
  // splitmix64 of (seed, stream): unrelated streams for unrelated inputs.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return tiny::Generator(z ^ (z >> 31));
}

fs::path Context::share(const fs::path& file) {
  if (library_dir.empty() || file.empty()) return {};
  const fs::path shared = library_dir / file.filename();
  std::error_code ec;
  if (fs::exists(shared, ec)) return shared;
  fs::create_hard_link(file, shared, ec);
  if (ec) fs::copy_file(file, shared, fs::copy_options::overwrite_existing, ec);
  if (ec) return {};
  chmod(shared.c_str(), 0755);
  return shared;
}

double Context::seconds_left() const {
  if (deadline_s <= 0) return 1e9;
  return deadline_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

namespace {
std::string time_key(const std::string& exercise, int repeat) { return exercise + "#" + std::to_string(repeat); }
// Below this many seconds left no run is started: it could not finish anything useful.
constexpr double kLeastUsefulRunS = 1.0;
}  // namespace

namespace {
// FNV-1a, 64 bits, as 16 hex digits: the name of a reference cache entry (its whole key is compared too).
std::string fnv_hex(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string file_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Everything a reference run's results follow from: the runner (path, size, time), the exercise,
// how it is run, the TINY_* environment it inherits (the modelled GPU, its memory) and its inputs
// (values.json lists each tensor's file with a digest of it).
std::string reference_key(const fs::path& runner, const std::string& exercise, const RunOptions& options,
                          const std::string& inputs) {
  std::error_code ec;
  const auto size = fs::file_size(runner, ec);
  const auto stamp = fs::last_write_time(runner, ec).time_since_epoch().count();
  std::ostringstream key;
  key << "runner " << runner.string() << " " << size << " " << stamp << "\nexercise " << exercise << "\ngpus "
      << options.gpus << "\nmode " << options.mode << "\nmemory " << options.memory_limit << "\n";
  for (const auto& [name, value] : options.env) key << "env " << name << "=" << value << "\n";
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "TINY_", 5) == 0) key << "inherited " << *e << "\n";
  }
  key << "inputs " << inputs;
  return key.str();
}
}  // namespace

bool Context::knows_reference_time(const std::string& exercise, int repeat) const {
  return reference_seconds_.count(time_key(exercise, repeat)) > 0;
}

double Context::run_limit(bool hostile, const std::string& key, const RunOptions& options, std::string& why) const {
  double limit = options.timeout_s;
  why = "the check's own limit";
  if (hostile) {
    // The reference's own time on this machine, now: a hang is found in seconds,
    // and a machine under load slows both alike.
    // Only this exercise's own time (another's, or none yet: the check's own limit): a quick
    // exercise's time must not cut short a correct run of a long one.
    const auto it = reference_seconds_.find(key);
    const double reference = it != reference_seconds_.end() ? it->second : 0;
    if (reference > 0) {
      const double derived = std::max(run_limit_floor_s, run_limit_factor * reference);
      if (derived < limit) {
        limit = derived;
        why = derived > run_limit_floor_s
                  ? fixed(run_limit_factor, 0) + "x the reference's own " + fixed(reference, 2) + " s"
                  : "at least " + fixed(run_limit_floor_s, 0) + " s, the reference needing only " + fixed(reference, 2) + " s";
      }
    }
  }
  if (timeout_cap_s > 0 && timeout_cap_s < limit) {
    limit = timeout_cap_s;
    why = "the grader's --timeout";
  }
  if (deadline_s > 0 && seconds_left() < limit) {
    limit = seconds_left();
    why = "what was left of the time for grading this submission (--deadline)";
  }
  return limit;
}

Context::CacheEntry Context::cache_entry_for(const fs::path& runner, const std::string& exercise,
                                            const RunOptions& options, const fs::path& dir) const {
  CacheEntry entry;
  const std::string inputs = file_text(dir / "in" / "values.json");
  // A file named in this checker's own folder (a checkpoint to write) must really be written.
  if (inputs.empty() || inputs.find(work_dir.string()) != std::string::npos) return entry;
  entry.key = reference_key(runner, exercise, options, inputs);
  entry.dir = reference_cache / fnv_hex(entry.key);
  return entry;
}

std::optional<Run> Context::cached_run(const CacheEntry& entry, const std::string& key, const RunOptions& options) {
  std::error_code ec;
  if (!fs::is_regular_file(entry.dir / "key.txt", ec) || file_text(entry.dir / "key.txt") != entry.key) return std::nullopt;
  try {
    Run cached;
    cached.call = options.call;
    cached.out = Bundle::parse(entry.dir / "out", file_text(entry.dir / "sent.json"),
                               "the reference's results kept in " + entry.dir.string());
    cached.status = cached.out.values.value("_status", "crash");
    cached.message = cut_text(cached.out.values.value("_message", ""));
    cached.error_type = cut_text(cached.out.values.value("_error_type", ""), 256, 256);
    cached.elapsed_ms = cached.out.values.value("_elapsed_ms", 0.0);
    // Its run's time limits the student's runs as if it had run here.
    double& slowest = reference_seconds_[key];
    slowest = std::max(slowest, std::stod(file_text(entry.dir / "seconds.txt")));
    if (cached.out.values.contains("_devices")) note_devices(devices, cached.out.values["_devices"]);
    return cached;
  } catch (const std::exception&) {
    return std::nullopt;  // a damaged entry: the reference runs again, and its results replace it
  }
}

void Context::keep_in_cache(const CacheEntry& entry, const fs::path& dir, const std::string& sent, double seconds) {
  // Written aside, then renamed into place: another checker of the batch reads an entry whole or not at all.
  const fs::path tmp = entry.dir.string() + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(runs_);
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (!ec) fs::copy(dir / "out", tmp / "out", fs::copy_options::recursive, ec);
  if (!ec) {
    std::ofstream(tmp / "sent.json", std::ios::binary) << sent;
    std::ofstream(tmp / "seconds.txt") << fixed(seconds, 6);
    std::ofstream(tmp / "key.txt", std::ios::binary) << entry.key;
    fs::rename(tmp, entry.dir, ec);  // fails when another checker was first: theirs is kept
  }
  if (ec) fs::remove_all(tmp, ec);
}

ProcessOptions Context::runner_process(const fs::path& runner, const std::string& exercise, const RunOptions& options,
                                       int repeat, const fs::path& dir, double limit, bool hostile) const {
  // The runner works in its own folder with relative paths: a student's run,
  // as another uid, could not name anything above it (root's, mode 0700).
  ProcessOptions p;
  p.argv = {runner.string(), exercise, "in", "out"};
  if (repeat > 0) {
    p.argv.push_back("--repeat");
    p.argv.push_back(std::to_string(repeat));
  }
  p.cwd = dir;
  p.env = options.env;
  // Checks always run on the emulated GPU, also on a machine with an NVIDIA
  // one: they grade by its deterministic counters and need the devices a
  // lesson requires (2 for lessons 5 and 6), so a grade is the same on any
  // machine. The demos (./workbook run N) use the real GPU.
  p.env["TINY_FORCE_EMULATED_GPU"] = "1";
  p.env["TINY_EMULATED_GPUS"] = std::to_string(options.gpus);
  p.env["TINY_EMULATED_GPU_MODE"] = options.mode;
  p.env["TINY_LAUNCH_BLOCKING"] = "";
  // A lesson whose checks still compare this CPU's clock (std::chrono in the
  // student's code and the runners) needs events on the same clock, not the
  // modelled GPU's (docs/performance_model.md); a lesson graded by modelled
  // time says so in RunOptions::env (TINY_EMULATED_GPU_CLOCK=modelled).
  if (p.env.count("TINY_EMULATED_GPU_CLOCK") == 0) p.env["TINY_EMULATED_GPU_CLOCK"] = "host";
  p.timeout_s = limit;
  p.memory_limit = options.memory_limit;
  p.log = dir / "log.txt";
  if (hostile) {
    p.sandbox = true;
    p.hidden = hidden_paths;
    p.output_limit = options.output_limit;
    p.cpu_limit_s = 2 * p.timeout_s + 5;
    p.process_limit = options.process_limit > 0 ? options.process_limit : default_process_limit();
    if (!library_dir.empty()) {
      const char* inherited = std::getenv("LD_LIBRARY_PATH");
      p.env["LD_LIBRARY_PATH"] = library_dir.string() + (inherited != nullptr && *inherited != '\0' ? std::string(":") + inherited : "");
    }
  }
  return p;
}

std::string Context::failure_message(const ProcessResult& process, const std::string& exercise,
                                     const RunOptions& options, double limit, const std::string& why_limit,
                                     bool hostile) {
  std::string message = process.describe();
  if (process.timed_out) {
    message += " after " + fixed(limit, 1) + " s (its limit: " + why_limit + ")";
    if (deadline_s > 0 && seconds_left() < kLeastUsefulRunS) deadline_hit_ = true;
    if (hostile) {
      timed_out_ = (options.call.empty() ? exercise : options.call) + " in check " + current_check + ", stopped after " +
                   fixed(limit, 1) + " s";
    }
  }
  if (!process.log_tail.empty()) message += "\nits last output:\n" + indent(process.log_tail, "  ");
  return message;
}

std::string Context::read_results(Run& result, const fs::path& dir, const std::string& sent, size_t sent_bytes,
                                  bool hostile) {
  if (hostile) {
    if (const std::string why = not_plain_results(dir / "out"); !why.empty()) {
      return "left results that are not to be trusted: " + why;
    }
  }
  if (sent_bytes == 0) {
    return "finished without sending its results (the runner sends them as it ends: did your code end the "
           "program itself, with exit() or a signal?)";
  }
  if (sent_bytes > kMaxExchangeBytes) {
    return "sent " + bytes_text(sent_bytes) + " of results, more than the " + bytes_text(kMaxExchangeBytes) +
           " the grader reads: return smaller results";
  }
  try {
    result.out = Bundle::parse(dir / "out", sent, "the values.json it sent");
  } catch (const std::exception& e) {
    // Anything written to the channel besides the runner's one message (by the
    // code graded, which runs in the runner's process) spoils it.
    return std::string("sent results that cannot be read (the runner sends one message through the results "
                       "channel; did your code write to it?): ") + e.what();
  }
  if (hostile) {
    if (const std::string why = harness_keys_problem(result.out.values); !why.empty()) {
      return "sent results that are not to be trusted: " + why;
    }
    if (const std::string why = refused_resets_message(result.out.values); !why.empty()) return why;
    if (result.out.values.contains("_counters")) result.out.values["_counters"] = plain_counters(result.out.values["_counters"]);
  }
  result.status = result.out.values.value("_status", "crash");
  result.message = cut_text(result.out.values.value("_message", ""));
  result.error_type = cut_text(result.out.values.value("_error_type", ""), 256, 256);
  result.elapsed_ms = result.out.values.value("_elapsed_ms", 0.0);
  if (!hostile && result.out.values.contains("_devices")) note_devices(devices, result.out.values["_devices"]);
  return "";
}

Run Context::run(const fs::path& runner, const std::string& who, const std::string& exercise, const Bundle& in,
                 const RunOptions& options, int repeat, bool ahead) {
  const bool hostile = who == "student";
  const std::string key = time_key(exercise, repeat);
  std::string why_limit;
  const double limit = run_limit(hostile, key, options, why_limit);
  Run result;
  result.call = options.call;
  auto crash = [&](const std::string& message) {
    result.status = "crash";
    result.message = cut_text(message);
    result.out = Bundle();
    return result;
  };
  if (hostile && !timed_out_.empty()) {
    return crash("was not run: an earlier run of your code in this lesson did not finish in time (" + timed_out_ +
                 "), so the lesson's other checks fail at once instead of waiting on it again");
  }
  if (deadline_s > 0 && limit < kLeastUsefulRunS) {
    deadline_hit_ = true;
    return crash("was not run: the time for grading this submission ran out (the grader's --deadline) before this check");
  }
  const fs::path dir = work_dir / (std::to_string(runs_++) + "-" + who + "-" + exercise);
  Bundle input = in;
  if (!input.values.contains("_seed")) input.values["_seed"] = seed;
  // A file a check names in the work folder is, for a student's run, a file of
  // its own folder: the rest of the work folder is out of its reach.
  if (hostile) relative_to_own_folder(input.values, work_dir.string() + "/");
  input.save(dir / "in");
  // Each run's folder is closed to others (a student's is then given to its
  // sandbox's uid alone): the work folder above can be passed through, not read.
  chmod(dir.c_str(), 0700);

  // The reference on inputs it was given before, in this class: its results read back, not run again.
  CacheEntry cache;
  if (!hostile && repeat == 0 && !reference_cache.empty()) {
    cache = cache_entry_for(runner, exercise, options, dir);
    if (!cache.key.empty()) {
      if (std::optional<Run> cached = cached_run(cache, key, options)) {
        // The check's own call of a run made ahead of the student's (student()) is that run, read back, not another.
        if (ahead || ran_ahead_.erase(cache.dir.string()) == 0) ++reference_cache_hits_;
        if (ahead) ran_ahead_.insert(cache.dir.string());
        return *cached;
      }
    }
  }
  if (!hostile && repeat == 0) ++reference_runs_;

  ProcessOptions p = runner_process(runner, exercise, options, repeat, dir, limit, hostile);
  // Its results come through a channel we hold, never from a file it left.
  ResultsChannel channel;
  if (!channel.ready()) {
    throw std::runtime_error(std::string("could not make the pipe the runner sends its results through: ") +
                             std::strerror(errno));
  }
  p.pass_fds = {channel.give_write_end()};
  p.env[kResultsFdVariable] = "3";
  const ProcessResult process = run_process(p);
  const std::string& sent = channel.text();
  if (hostile) details["sandbox"] = process.isolation.describe();
  if (process.start_failed) {
    // The runner was missing or being rebuilt: nothing of the student's ran.
    const std::string program = (registry().lesson > 0 ? "lesson " + std::to_string(registry().lesson) + "'s "
                                                        : std::string("the lesson's ")) +
                                (hostile ? "program" : "reference program");
    throw RunnerNotStarted("the grader could not start " + program + " (" + process.start_error +
                           "): this is the workbook's fault, not your code's; run the check again");
  }
  if (!hostile && process.ok()) {
    double& slowest = reference_seconds_[key];
    slowest = std::max(slowest, process.seconds);
  }
  if (!process.ok()) return crash(failure_message(process, exercise, options, limit, why_limit, hostile));
  if (const std::string why = read_results(result, dir, sent, channel.bytes(), hostile); !why.empty()) return crash(why);
  if (hostile) {
    if (const std::string why = emulator_problem(result.out.values, p); !why.empty()) return crash(why);
  }
  if (!cache.key.empty() && result.ok()) {
    keep_in_cache(cache, dir, sent, process.seconds);
    if (ahead) ran_ahead_.insert(cache.dir.string());
  }
  return result;
}

Run Context::student(const std::string& exercise, const Bundle& in, const RunOptions& options) {
  // A student's run is limited by the reference's own time for the exercise (run_limit); until the reference
  // has run it, by the check's own limit, a minute for most checks: an endless loop in a check that runs the
  // student's code first cost its lesson that minute. So the reference runs first, on the same inputs and
  // options, and its results are kept in the reference cache, where the check's own call of the reference on
  // them reads them back (a check that never calls it pays for one reference run per exercise and lesson).
  if (!knows_reference_time(exercise) && timed_out_.empty() && seconds_left() > kLeastUsefulRunS) {
    run(reference_runner, "reference", exercise, in, options, 0, true);
  }
  return run(student_runner, "student", exercise, in, options);
}

Run Context::reference(const std::string& exercise, const Bundle& in, const RunOptions& options) {
  return run(reference_runner, "reference", exercise, in, options);
}

std::optional<Outcome> Context::unless_ok(const Run& r) const {
  if (r.status == "ok") return std::nullopt;
  if (r.status == "todo") return Outcome::todo(r.message);
  const std::string who = r.call.empty() ? "your code" : r.call + ": your code";
  if (r.status == "error") return Outcome::fail(who + " threw " + r.error_type + ":\n" + indent(r.message, "  "));
  return Outcome::fail(who + " " + r.message);
}

std::optional<Outcome> Context::both(const std::string& exercise, const Bundle& in, Run& s, Run& r,
                                     const RunOptions& options) {
  // The reference goes first the first time an exercise runs, so that the
  // student's run is limited by the reference's own time (run_limit), not the
  // check's far longer one; after that the student goes first (a stub's
  // check then costs no reference run).
  const bool reference_first = !knows_reference_time(exercise) && seconds_left() > kLeastUsefulRunS;
  if (reference_first) r = reference(exercise, in, options);
  s = student(exercise, in, options);
  if (auto early = unless_ok(s)) return early;
  if (!reference_first) r = reference(exercise, in, options);
  if (!r.ok()) {
    return Outcome::error("the reference solution failed on these inputs (a bug in the workbook, not in your code: "
                          "please report it with the seed)\n" + indent(r.message, "  "));
  }
  if (s.out.values.contains("_counters")) {
    details["counters"] = {{"yours", s.out.values["_counters"]}, {"reference", r.out.values["_counters"]}};
  }
  return std::nullopt;
}

Timing Timing::of_rounds(std::vector<double> student, std::vector<double> reference) {
  Timing t;
  t.student_ms = std::move(student);
  t.reference_ms = std::move(reference);
  std::vector<double> ratios;
  for (size_t i = 0; i < t.student_ms.size() && i < t.reference_ms.size(); ++i) {
    ratios.push_back(t.student_ms[i] / std::max(t.reference_ms[i], 1e-6));
  }
  if (ratios.empty()) return t;
  t.ratio = median(t.student_ms) / std::max(median(t.reference_ms), 1e-6);
  t.ratio_low = *std::min_element(ratios.begin(), ratios.end());
  t.ratio_high = *std::max_element(ratios.begin(), ratios.end());
  return t;
}

Timing Context::time(const std::string& exercise, const Bundle& in, const RunOptions& options, int rounds,
                     int repeat) {
  TimingLock lock;
  std::vector<double> student_ms, reference_ms, host_student_ms, host_reference_ms;
  std::string modelled_gpu;
  for (int round = 0; round < rounds; ++round) {
    double ms[2] = {0, 0}, host_ms[2] = {0, 0};
    bool modelled[2] = {false, false};
    for (int side = 0; side < 2; ++side) {
      // Alternate who goes first, so neither always runs on a warmer machine.
      // Round 0 starts with the reference: the student's runs are then limited by its time (run_limit).
      const bool student_turn = (side == 0) == (round % 2 == 1);
      const Run r = run(student_turn ? student_runner : reference_runner, student_turn ? "student" : "reference",
                        exercise, in, options, repeat);
      if (!r.ok()) {
        // A stub is TODO here as in every other check (unless_ok), never a slow FAIL.
        Timing t;
        t.stopped = student_turn ? unless_ok(r)
                                 : Outcome::error("the reference solution failed while being timed (a bug in the "
                                                  "workbook, not in your code): " + r.message);
        // The reference went first: what the student's own run says (a stub's TODO) comes before the workbook's fault.
        if (!student_turn && side == 0) {
          if (auto own = unless_ok(run(student_runner, "student", exercise, in, options, repeat))) t.stopped = own;
        }
        return t;
      }
      auto numbers = [&](const char* key) {
        std::vector<double> v;
        for (const auto& x : r.out.values.value(key, nlohmann::json::array())) v.push_back(x.get<double>());
        return v;
      };
      const std::vector<double> times = numbers("_times_ms"), modelled_times = numbers("_modelled_ms");
      if (times.empty()) {
        // A runner always times its calls: no times would read as 0 ms, the fastest there is.
        Timing t;
        t.stopped = student_turn ? Outcome::fail("your code's run sent no timings (its results are not to be trusted)")
                                 : Outcome::error("the reference's run sent no timings (a bug in the workbook)");
        return t;
      }
      const int who = student_turn ? 0 : 1;
      host_ms[who] = median(times);
      modelled[who] = !modelled_times.empty();
      ms[who] = modelled[who] ? median(modelled_times) : host_ms[who];
      // The GPU's name comes from the reference's run only: a submission cannot choose the clock.
      if (!student_turn && modelled[who]) modelled_gpu = cut_text(r.out.values.value("_modelled_gpu", ""), 64, 64);
    }
    if (modelled[0] != modelled[1]) {
      // The runner times both the same way; only a submission that rewrote its results sends one kind and not the other.
      Timing t;
      t.stopped = modelled[1] ? Outcome::fail("your code's run sent no modelled timings though the reference's did "
                                              "(its results are not to be trusted)")
                              : Outcome::error("the reference's run sent no modelled timings though yours did (a bug "
                                               "in the workbook)");
      return t;
    }
    student_ms.push_back(ms[0]);
    reference_ms.push_back(ms[1]);
    host_student_ms.push_back(host_ms[0]);
    host_reference_ms.push_back(host_ms[1]);
    if (modelled[1]) break;  // modelled time is the same every round: more rounds would only repeat it
  }
  Timing t = Timing::of_rounds(student_ms, reference_ms);
  t.modelled_gpu = modelled_gpu;
  details["timing"] = {{"yours_ms", t.student_ms}, {"reference_ms", t.reference_ms}, {"ratio", t.ratio},
                       {"ratio_low", t.ratio_low}, {"ratio_high", t.ratio_high},
                       {"clock", modelled_gpu.empty() ? "host" : "modelled " + modelled_gpu}};
  if (!modelled_gpu.empty()) {
    // What the host's clock read, for the curious: advisory, never graded.
    details["timing"]["host_yours_ms"] = host_student_ms;
    details["timing"]["host_reference_ms"] = host_reference_ms;
  }
  return t;
}

Outcome Context::judge(const Timing& t, double limit) {
  if (t.stopped) return *t.stopped;
  if (!t.modelled_gpu.empty()) {
    const std::string figures = "yours " + fixed(median(t.student_ms), 3) + " ms, reference " +
                                fixed(median(t.reference_ms), 3) + " ms on the modelled " + t.modelled_gpu + ": " +
                                fixed(t.ratio, 2) + "x";
    if (t.ratio <= limit) return Outcome::pass("modelled time: " + figures);
    return Outcome::fail("your code is slower than the reference: " + figures + ", over the " + fixed(limit, 1) +
                         "x limit. Modelled time is the same on every run and every machine, so this is your "
                         "code's doing, not noise: profile it (tiny::profiler) to see where the time goes");
  }
  const std::string figures = "yours " + fixed(median(t.student_ms), 2) + " ms, reference " +
                              fixed(median(t.reference_ms), 2) + " ms: " + fixed(t.ratio, 2) + "x (rounds from " +
                              fixed(t.ratio_low, 2) + "x to " + fixed(t.ratio_high, 2) + "x)";
  if (t.ratio <= limit) return Outcome::pass("time: " + figures);
  if (t.ratio_low > limit) {
    return Outcome::fail("your code is clearly slower than the reference: " + figures + ", every round over the " +
                         fixed(limit, 0) + "x limit");
  }
  return Outcome::pass("timing inconclusive (" + figures + "): slower in some rounds only, so not held against you");
}

// ---------------------------------------------------------------- registration

CheckRegistrar::CheckRegistrar(const char* name, const char* summary, Outcome (*fn)(Context&), bool timed) {
  registry().checks.push_back(Check{name, summary, fn, timed});
}

LessonInfo::LessonInfo(int number, const char* folder) {
  registry().lesson = number;
  registry().folder = folder;
}

LessonCounters::LessonCounters(std::initializer_list<const char*> names) {
  for (const char* name : names) registry().counters.push_back(name);
}

// ---------------------------------------------------------------- the program

namespace {

struct Result {
  const Check* check;
  Outcome outcome;
  double seconds;
  nlohmann::json details;
};

std::string ctest_quote(const std::string& s) { return "[==[" + s + "]==]"; }

int write_ctest(const std::string& file, const std::string& self, const std::string& student,
                const std::string& reference) {
  const Registry& reg = registry();
  std::ofstream out(file);
  for (int variant = 0; variant < 2; ++variant) {
    const std::string prefix = (variant == 0 ? "lesson_" : "solution_") + std::to_string(reg.lesson);
    const std::string runner = variant == 0 ? student : reference;
    for (const Check& c : reg.checks) {
      const std::string name = prefix + "." + c.name;
      out << "add_test(" << ctest_quote(name) << " " << ctest_quote(self) << " --student " << ctest_quote(runner)
          << " --reference " << ctest_quote(reference) << " --check " << ctest_quote(c.name) << ")\n";
      out << "set_tests_properties(" << ctest_quote(name) << " PROPERTIES LABELS "
          << (variant == 0 ? "lessons" : "solutions") << " SKIP_RETURN_CODE 77 TIMEOUT 600";
      if (variant == 0) out << " FIXTURES_REQUIRED lesson_" << reg.lesson << "_build";
      if (c.timed) out << " RESOURCE_LOCK workbook_timing";
      out << ")\n";
    }
  }
  return out.good() ? 0 : 1;
}

bool color_output() {
  return isatty(1) && std::getenv("NO_COLOR") == nullptr;
}

void print_result(const Result& r, size_t width) {
  const bool color = color_output();
  const char* tag = "PASS";
  const char* col = "\033[32m";
  switch (r.outcome.verdict) {
    case Verdict::pass: break;
    case Verdict::fail: tag = "FAIL"; col = "\033[31m"; break;
    case Verdict::todo: tag = "TODO"; col = "\033[33m"; break;
    case Verdict::skip: tag = "SKIP"; col = "\033[36m"; break;
    case Verdict::error: tag = "ERROR"; col = "\033[35m"; break;
  }
  std::printf("  %s%-5s%s %-*s %s\n", color ? col : "", tag, color ? "\033[0m" : "", static_cast<int>(width),
              r.check->name.c_str(), r.check->summary.c_str());
  if (!r.outcome.message.empty()) std::printf("%s", indent(r.outcome.message, "        ").c_str());
  if (!r.outcome.note.empty()) std::printf("%s", indent(r.outcome.note, "        ").c_str());
}

}  // namespace

namespace {

// Bad usage: said on stderr, exit status 2.
int usage_error(const std::string& program, const std::string& why) {
  std::fprintf(stderr, "%s: %s (see %s --help)\n", program.c_str(), why.c_str(), program.c_str());
  return 2;
}

// --list: the lesson and its checks as JSON.
int print_check_list() {
  const Registry& reg = registry();
  nlohmann::json out = {{"lesson", reg.lesson}, {"folder", reg.folder}, {"counters_shown", reg.counters},
                        {"checks", nlohmann::json::array()}};
  for (const Check& c : reg.checks) out["checks"].push_back({{"name", c.name}, {"summary", c.summary}, {"timed", c.timed}});
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

// Why these options cannot run checks ("" when they can).
std::string usage_problem(const CheckerOptions& o) {
  const Registry& reg = registry();
  if (o.student.empty() || o.reference.empty()) return "--student and --reference are both needed";
  for (const std::string& path : {o.student, o.reference}) {
    if (!fs::exists(path)) return "no runner at '" + path + "' (build it first)";
  }
  for (const std::string& name : o.only) {
    const bool known = std::any_of(reg.checks.begin(), reg.checks.end(), [&](const Check& c) { return c.name == name; });
    if (!known) {
      std::string names;
      for (const Check& c : reg.checks) names += " " + c.name;
      return "lesson " + std::to_string(reg.lesson) + " has no check '" + name + "'; its checks:" + names;
    }
  }
  return "";
}

// The context the checks run in: the seed, the runners, the limits, the
// paths to hide, and its folders (a work folder, and one for the libraries
// a student's run needs). Throws when the work folder cannot be made.
void prepare_context(Context& ctx, const CheckerOptions& o) {
  // Twelve digits, as the grader prints them, so a seed reads the same under ctest and check.
  ctx.seed = o.seed ? *o.seed : (std::random_device{}() * 0x100000000ull + std::random_device{}()) % 1000000000000ull;
  ctx.student_runner = fs::absolute(o.student);
  ctx.reference_runner = fs::absolute(o.reference);
  ctx.student_is_reference = fs::equivalent(o.student, o.reference);
  ctx.timeout_cap_s = o.timeout;
  ctx.deadline_s = o.deadline;
  ctx.hidden_paths = paths_to_hide(ctx.reference_runner);
  if (!o.reference_cache.empty()) {
    std::error_code ec;
    fs::create_directories(o.reference_cache, ec);
    if (!ec) {
      chmod(o.reference_cache.c_str(), 0700);  // the reference's results are out of a student's run's reach
      ctx.reference_cache = fs::absolute(o.reference_cache);
      ctx.hidden_paths.push_back(ctx.reference_cache);
    }
  }
  exit_cleanly_on_interrupt();  // Ctrl-C, or the grader stopping us: the runs stopped, these folders removed
  ctx.work_dir = make_temp_folder("lesson");
  // Passable but not readable: a student's run reaches its own folder by its
  // full path (tinyrun, std::filesystem do), and nothing else (each run's folder is 0700).
  chmod(ctx.work_dir.c_str(), 0711);
  if (ctx.reference_cache.empty()) {
    // The reference's results for this checker alone (student() runs it first, the check then reads them back):
    // closed to a student's run's uid, and hidden from its sandbox, as a shared one is.
    const fs::path own = ctx.work_dir / "reference-cache";
    std::error_code ec;
    if (fs::create_directory(own, ec) && chmod(own.c_str(), 0700) == 0) {
      ctx.reference_cache = own;
      ctx.hidden_paths.push_back(own);
    }
  }
  // Beside it, open to all: what a student's run needs from the build tree.
  try {
    const std::string lib = make_temp_folder("lib").string();
    chmod(lib.c_str(), 0755);
    ctx.library_dir = lib;
    if (ctx.share(libtiny_path()).empty()) {
      std::error_code ec;
      fs::remove_all(lib, ec);
      ctx.library_dir.clear();
    }
  } catch (const std::exception&) {
  }
}

// Runs one check, its message and details bounded.
Result run_one(const Check& c, Context& ctx, bool timing) {
  Result r{&c, Outcome::pass(), 0, nlohmann::json::object()};
  ctx.details = nlohmann::json::object();
  ctx.current_check = c.name;
  const auto t0 = std::chrono::steady_clock::now();
  if (c.timed && !timing) {
    r.outcome = Outcome::skip("timing checks are off (--no-timing)");
  } else {
    try {
      r.outcome = c.run(ctx);
    } catch (const RunnerNotStarted& e) {
      r.outcome = Outcome::error(e.what());
    } catch (const std::exception& e) {
      r.outcome = Outcome::error(std::string("the check itself failed (a bug in the workbook): ") + e.what());
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // What a student's run sent may be in these: bounded before they are printed or written.
  r.outcome.message = cut_text(r.outcome.message);
  r.outcome.note = cut_text(r.outcome.note);
  r.details = bounded_details(ctx.details);
  return r;
}

// Removes the context's folders, or with --keep renames the work folder and says where it is.
void clean_up(const Context& ctx, bool keep) {
  std::error_code ec;
  if (!ctx.library_dir.empty()) fs::remove_all(ctx.library_dir, ec);
  if (!keep) {
    fs::remove_all(ctx.work_dir, ec);
    return;
  }
  // Renamed, so that no grader takes it for one a killed checker left (sweep_stale_temp_folders).
  const std::string name = ctx.work_dir.filename().string();
  const fs::path kept = ctx.work_dir.parent_path() / ("workbook-kept-" + name.substr(name.size() - 6));
  fs::rename(ctx.work_dir, kept, ec);
  std::printf("inputs, outputs and logs kept in %s\n", (ec ? ctx.work_dir : kept).c_str());
}

// --json: the results for the grader. False when the file cannot be written.
bool write_results_json(const std::string& file, const Context& ctx, const std::vector<Result>& results) {
  const Registry& reg = registry();
  nlohmann::json doc = {{"lesson", reg.lesson}, {"folder", reg.folder}, {"seed", ctx.seed},
                        {"devices", ctx.devices}, {"counters_shown", reg.counters},
                        {"timed_out", ctx.timed_out()}, {"deadline_hit", ctx.deadline_hit()},
                        {"reference_runs", ctx.reference_runs()}, {"reference_cache_hits", ctx.reference_cache_hits()},
                        {"checks", nlohmann::json::array()}};
  for (const Result& r : results) {
    doc["checks"].push_back({{"name", r.check->name}, {"summary", r.check->summary}, {"timed", r.check->timed},
                             {"verdict", verdict_name(r.outcome.verdict)}, {"message", r.outcome.message},
                             {"note", r.outcome.note}, {"seconds", r.seconds}, {"details", r.details}});
  }
  std::ofstream out(file);
  out << doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return out.good();
}

// The exit status: with --expect-fail, whether that check failed as expected;
// else 0 all passed, 1 a check did not pass, 77 every check run was skipped.
int exit_status(const CheckerOptions& o, const std::vector<Result>& results) {
  if (!o.expect_check.empty()) {
    const Outcome& out = results.front().outcome;
    const bool as_expected = out.verdict == Verdict::fail && out.message.find(o.expect_text) != std::string::npos;
    std::printf("%s: %s was expected to fail with \"%s\"\n", as_expected ? "as expected" : "NOT as expected",
                o.expect_check.c_str(), o.expect_text.c_str());
    return as_expected ? 0 : 1;
  }
  size_t passed = 0, skipped = 0;
  for (const Result& r : results) {
    passed += r.outcome.verdict == Verdict::pass;
    skipped += r.outcome.verdict == Verdict::skip;
  }
  if (results.size() > 1) std::printf("%zu of %zu checks passed\n", passed, results.size() - skipped);
  if (!results.empty() && skipped == results.size()) return 77;
  return passed + skipped == results.size() ? 0 : 1;
}

}  // namespace

int run_checker(const CheckerOptions& o, const std::string& program) {
  const Registry& reg = registry();
  if (o.list) return print_check_list();
  if (!o.write_ctest.empty()) {
    return write_ctest(o.write_ctest, fs::absolute(program).string(), o.student_runner, o.reference_runner);
  }
  if (const std::string why = usage_problem(o); !why.empty()) return usage_error(program, why);
  Context ctx;
  try {
    prepare_context(ctx, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), e.what());
    return 1;
  }
  std::vector<Result> results;
  size_t width = 0;
  for (const Check& c : reg.checks) width = std::max(width, c.name.size());
  std::printf("lesson %d (%s), seed %llu\n", reg.lesson, reg.folder.c_str(), static_cast<unsigned long long>(ctx.seed));
  std::fflush(stdout);
  for (const Check& c : reg.checks) {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), c.name) == o.only.end()) continue;
    results.push_back(run_one(c, ctx, o.timing));
    print_result(results.back(), width);
    std::fflush(stdout);
  }
  clean_up(ctx, o.keep);
  if (!o.json_file.empty() && !write_results_json(o.json_file, ctx, results)) {
    std::fprintf(stderr, "%s: could not write %s\n", program.c_str(), o.json_file.c_str());
    return 1;
  }
  return exit_status(o, results);
}

}  // namespace workbook
