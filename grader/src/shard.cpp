#include "shard.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "gradebook.h"
#include "text_file.h"
#include "tiny/error.h"

namespace workbook {

namespace fs = std::filesystem;

namespace {

constexpr int kMaxShards = 10000;

// A whole number from 0 to kMaxShards written in digits only ("" and "1x" are not).
std::optional<long> whole(const std::string& s) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::strtol(s.c_str(), nullptr, 10);
}

// A gradebook field as read back: the name without its spreadsheet escape.
std::string row_name(const std::vector<std::string>& row) {
  const std::string& f = row[0];
  return f.size() >= 2 && f[0] == '\'' && std::string("=+-@\t\r").find(f[1]) != std::string::npos ? f.substr(1) : f;
}

}  // namespace

Shard parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  const std::string fix = ": give INDEX/COUNT, the index counted from 0 as SLURM's --array=0-N and Kubernetes' "
                          "JOB_COMPLETION_INDEX count it (a class in 2 parts: --shard 0/2 on one machine, --shard 1/2 "
                          "on the other)";
  TINY_CHECK(slash != std::string::npos, ValueError, "--shard ", text, " is not INDEX/COUNT", fix);
  const std::optional<long> index = whole(text.substr(0, slash)), count = whole(text.substr(slash + 1));
  TINY_CHECK(index && count, ValueError, "--shard ", text, " is not two whole numbers", fix);
  TINY_CHECK(*count >= 1 && *count <= kMaxShards, ValueError, "--shard ", text, ": a class cannot be cut into ", *count,
             " parts (give 1 to ", kMaxShards, ")", fix);
  TINY_CHECK(*index < *count, ValueError, "--shard ", text, ": there is no part ", *index, " of ", *count,
             " (they are 0 to ", *count - 1, ")", fix);
  Shard s;
  s.index = static_cast<int>(*index);
  s.count = static_cast<int>(*count);
  s.source = "--shard " + text;
  return s;
}

std::optional<Shard> shard_from_environment(const std::function<const char*(const char*)>& env,
                                            std::optional<int> count) {
  auto var = [&](const char* name) -> std::optional<std::string> {
    const char* v = env(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  auto number = [&](const char* name, const std::string& value, const std::string& fix) {
    const std::optional<long> n = whole(value);
    TINY_CHECK(n.has_value(), ValueError, name, "=\"", value, "\" is not a whole number: ", fix);
    return *n;
  };
  if (count) {
    TINY_CHECK(*count >= 1 && *count <= kMaxShards, ValueError, "--shard-count ", *count,
               " is not a number of parts to cut the class into: give 1 to ", kMaxShards);
  }
  const std::string or_flag = " or give --shard INDEX/COUNT, which the environment never overrides";
  if (const std::optional<std::string> id = var("SLURM_ARRAY_TASK_ID")) {
    const std::string fix = "sbatch sets it in an array job (--array=0-N); unset it" + or_flag;
    const long task = number("SLURM_ARRAY_TASK_ID", *id, fix);
    const std::optional<std::string> min_text = var("SLURM_ARRAY_TASK_MIN");
    const std::optional<std::string> step_text = var("SLURM_ARRAY_TASK_STEP");
    const std::optional<std::string> count_text = var("SLURM_ARRAY_TASK_COUNT");
    const long min = min_text ? number("SLURM_ARRAY_TASK_MIN", *min_text, fix) : 0;
    const long step = step_text ? number("SLURM_ARRAY_TASK_STEP", *step_text, fix) : 1;
    TINY_CHECK(step >= 1, ValueError, "SLURM_ARRAY_TASK_STEP=", step, " is not a step of an array: ", fix);
    TINY_CHECK(task >= min && (task - min) % step == 0, ValueError, "SLURM_ARRAY_TASK_ID=", task,
               " is not a task of the array SLURM_ARRAY_TASK_MIN=", min, ", SLURM_ARRAY_TASK_STEP=", step,
               ": submit one range of indices (sbatch --array=0-N)", or_flag);
    long n = 0;
    if (count) {
      n = *count;
    } else {
      TINY_CHECK(count_text.has_value(), ValueError, "SLURM_ARRAY_TASK_ID=", task, " is set without "
                 "SLURM_ARRAY_TASK_COUNT (a SLURM before 17.02?): give --shard-count N, the number of array tasks",
                 or_flag);
      n = number("SLURM_ARRAY_TASK_COUNT", *count_text, fix);
    }
    const long index = (task - min) / step;
    TINY_CHECK(n >= 1 && n <= kMaxShards && index < n, ValueError, "SLURM_ARRAY_TASK_ID=", task,
               " is task ", index, " (counted from SLURM_ARRAY_TASK_MIN=", min, ") of ", n,
               " (SLURM_ARRAY_TASK_COUNT or --shard-count), which has tasks 0 to ", n - 1,
               ": submit the array as one range, sbatch --array=0-", n - 1, ", with no gaps (a list such as "
               "--array=1,5 leaves parts of the class ungraded)", or_flag);
    Shard s;
    s.index = static_cast<int>(index);
    s.count = static_cast<int>(n);
    s.source = "SLURM_ARRAY_TASK_ID=" + std::to_string(task) + (min != 0 ? ", SLURM_ARRAY_TASK_MIN=" + std::to_string(min) : "") +
               (count ? ", --shard-count " : ", SLURM_ARRAY_TASK_COUNT=") + std::to_string(n);
    return s;
  }
  if (const std::optional<std::string> id = var("JOB_COMPLETION_INDEX")) {
    const std::string fix = "a Kubernetes indexed Job sets it (completionMode: Indexed); unset it" + or_flag;
    const long index = number("JOB_COMPLETION_INDEX", *id, fix);
    TINY_CHECK(count.has_value(), ValueError, "JOB_COMPLETION_INDEX=", index, " is set, but Kubernetes does not say "
               "how many parts there are: give --shard-count N (the Job's completions)", or_flag);
    TINY_CHECK(index < *count, ValueError, "JOB_COMPLETION_INDEX=", index, " is not a part of --shard-count ", *count,
               " (parts 0 to ", *count - 1, "): give the Job's completions as --shard-count", or_flag);
    Shard s;
    s.index = static_cast<int>(index);
    s.count = *count;
    s.source = "JOB_COMPLETION_INDEX=" + std::to_string(index) + ", --shard-count " + std::to_string(*count);
    return s;
  }
  return std::nullopt;
}

std::vector<fs::path> shard_of(const std::vector<fs::path>& submissions, const Shard& shard) {
  std::vector<fs::path> mine;
  for (size_t i = static_cast<size_t>(shard.index); i < submissions.size(); i += static_cast<size_t>(shard.count)) {
    mine.push_back(submissions[i]);
  }
  return mine;
}

nlohmann::json shard_record(const Shard& shard, const fs::path& batch, size_t class_size,
                            const std::vector<std::string>& names, const std::vector<std::string>& skipped,
                            uint64_t seed) {
  nlohmann::json record = {{"index", shard.index}, {"count", shard.count}, {"source", shard.source},
                           {"batch", fs::absolute(batch).lexically_normal().string()}, {"class_size", class_size},
                           {"submissions", names}, {"skipped", skipped}};
  if (seed != 0) record["seed"] = seed;
  return record;
}

namespace {

// What read_shards has gathered from the folders read so far.
struct Gathered {
  std::map<std::string, std::string> owner;             // submission -> the folder whose gradebook has it
  std::map<std::string, std::vector<std::string>> row;  // submission -> its row
  std::map<std::string, fs::path> folder;
  std::map<int, std::string> parts;                     // shard index -> its folder
  int count = 0;
  std::string count_from, batch, batch_from;
  std::set<std::string> skipped;
  std::set<uint64_t> seeds;
  std::vector<std::string> incomplete;  // one line per shard cut short, all named at once
};

// The first line of `csv` (whose text is `text`); the first shard's sets
// `header`, the others' must equal it.
void check_header(const fs::path& csv, const std::string& text, const fs::path& first_dir, std::string& header) {
  const std::string line = text.substr(0, text.find('\n') + 1);
  TINY_CHECK(line.rfind("submission,", 0) == 0, ValueError, csv.string(), " is not a gradebook the grader wrote "
             "(its first line is not \"submission,total,...\")");
  if (header.empty()) {
    header = line;
  } else {
    TINY_CHECK(line == header, ValueError, csv.string(), " has other columns than ", first_dir.string(),
               "/gradebook.csv (\"", line.substr(0, line.size() - 1), "\" against \"",
               header.substr(0, header.size() - 1), "\"): the shards must grade the same lessons");
  }
}

// Notes in `seen` when gradebook `g` lacks a submission that shard `index`/`n` (`record`) was to grade.
void check_complete(const fs::path& dir, const nlohmann::json& record, const Gradebook& g, int index, int n,
                    Gathered& seen) {
  std::vector<std::string> missing;
  for (const auto& name : record.value("submissions", nlohmann::json::array())) {
    if (name.is_string() && g.submissions.count(name.get<std::string>()) == 0) missing.push_back(name);
  }
  if (missing.empty()) return;
  std::string names;
  for (size_t i = 0; i < missing.size() && i < 10; ++i) names += (i ? ", " : "") + missing[i];
  if (missing.size() > 10) names += ", ... (" + std::to_string(missing.size() - 10) + " more)";
  seen.incomplete.push_back(tiny::detail::concat(
      dir.string(), "'s gradebook is incomplete: shard ", index, "/", n, " has ", g.submissions.size(), " of its ",
      record.value("submissions", nlohmann::json::array()).size(), " submissions (missing: ", names, ")"));
}

// Throws naming every shard cut short, so that all of them can be resumed before one more merge.
void check_every_shard_complete(const Gathered& seen) {
  if (seen.incomplete.empty()) return;
  if (seen.incomplete.size() == 1) {
    TINY_THROW(ValueError, seen.incomplete[0], "; run that shard again with the same command and --resume, then merge");
  }
  std::string lines;
  for (const std::string& line : seen.incomplete) lines += "\n  " + line;
  TINY_THROW(ValueError, seen.incomplete.size(), " shards were cut short:", lines,
             "\nrun each of them again with the same command and --resume, then merge");
}

// What the shard in `dir` was to grade (shard.json), to tell a finished shard
// from one cut short, and that it belongs to the same split as the others.
void check_record(const fs::path& dir, const fs::path& record_file, const Gradebook& g, Gathered& seen) {
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(read_whole_file(record_file));
  } catch (const std::exception& e) {
    TINY_THROW(ValueError, record_file.string(), " cannot be read (", e.what(), "): run that shard again with "
               "--resume, which writes it anew");
  }
  const int index = record.value("index", 0), n = record.value("count", 1);
  if (seen.count == 0) {
    seen.count = n, seen.count_from = dir.string();
  } else {
    TINY_CHECK(n == seen.count, ValueError, dir.string(), " is a part of ", n, " and ", seen.count_from, " a part of ",
               seen.count, ": merge the shards of one split (each with the same --shard .../COUNT)");
  }
  const std::string b = record.value("batch", "");
  if (seen.batch.empty()) {
    seen.batch = b, seen.batch_from = dir.string();
  } else if (b != seen.batch) {
    std::fprintf(stderr, "note: %s graded %s and %s graded %s: merged all the same (the same class moved?)\n",
                 seen.batch_from.c_str(), seen.batch.c_str(), dir.string().c_str(), b.c_str());
  }
  TINY_CHECK(seen.parts.count(index) == 0, ValueError, dir.string(), " and ", seen.parts[index], " are both shard ",
             index, "/", n, ": give each shard's folder once");
  seen.parts[index] = dir.string();
  check_complete(dir, record, g, index, n, seen);
  for (const auto& s : record.value("skipped", nlohmann::json::array())) {
    if (s.is_string()) seen.skipped.insert(s.get<std::string>());
  }
}

// Takes the rows of the gradebook of the shard in `dir`; a submission must be in one shard only.
void take_rows(const fs::path& dir, const Gradebook& g, Gathered& seen) {
  for (const auto& r : g.rows) {
    const std::string name = row_name(r);
    TINY_CHECK(seen.owner.count(name) == 0, ValueError, "submission ", name, " is in two shards: ", seen.owner[name],
               "/gradebook.csv and ", dir.string(), "/gradebook.csv (did the batch folder change between the "
               "shards, or was a folder given twice?): grade it in one shard only, or remove its row from the other");
    seen.owner[name] = dir.string();
    seen.row[name] = r;
    seen.folder[name] = dir / name;
    try {
      seen.seeds.insert(std::stoull(r.at(4)));
    } catch (const std::exception&) {
    }
  }
}

// Throws when a part of the split the shard.json files name is not among the `given` folders.
void check_every_part_given(const Gathered& seen, size_t given) {
  if (seen.count == 0) return;
  std::string absent;
  for (int i = 0; i < seen.count; ++i) {
    if (seen.parts.count(i) == 0) {
      absent += (absent.empty() ? "" : ", ") + std::to_string(i) + "/" + std::to_string(seen.count);
    }
  }
  TINY_CHECK(absent.empty(), ValueError, "shard ", absent, " of the split is not among the folders given (", given,
             " given): merge every shard's folder, or grade the missing one first");
}

}  // namespace

Merged read_shards(const std::vector<fs::path>& dirs) {
  TINY_CHECK(!dirs.empty(), ValueError, "grade merge needs the shards' out folders: grade merge OUT/shard-0 OUT/shard-1 "
             "... --out OUT");
  Merged m;
  Gathered seen;
  for (const fs::path& dir : dirs) {
    const fs::path csv = dir / "gradebook.csv";
    TINY_CHECK(fs::is_regular_file(csv), ValueError, dir.string(), " holds no gradebook.csv: give the folders each "
               "shard's grade --batch wrote (its --out), e.g. OUT/shard-0 OUT/shard-1");
    const std::string text = read_whole_file(csv);
    check_header(csv, text, dirs[0], m.header);
    const Gradebook g = read_gradebook(csv, m.header);
    const fs::path record_file = dir / "shard.json";
    if (fs::is_regular_file(record_file)) check_record(dir, record_file, g, seen);
    take_rows(dir, g, seen);
  }
  check_every_part_given(seen, dirs.size());
  check_every_shard_complete(seen);
  // The batch's own order: by submission name (std::map), as a batch with --jobs 1 appends its rows.
  for (const auto& [name, r] : seen.row) {
    m.rows.push_back(r);
    m.folders.push_back(seen.folder.at(name));
  }
  m.skipped.assign(seen.skipped.begin(), seen.skipped.end());
  m.seeds.assign(seen.seeds.begin(), seen.seeds.end());
  return m;
}

int merge_shards(const Recipe& recipe, const std::vector<fs::path>& dirs, const fs::path& out,
                 const std::string& warning) {
  for (const fs::path& d : dirs) {
    std::error_code ec;
    TINY_CHECK(!fs::equivalent(d, out, ec), ValueError, "grade merge --out ", out.string(), " is one of the shards' "
               "folders: give another folder, e.g. the one above them");
  }
  const Merged m = read_shards(dirs);
  // The lessons, from the gradebook's columns (lesson_N_points).
  std::vector<const Lesson*> lessons;
  std::istringstream columns(m.header.substr(0, m.header.size() - 1));
  for (std::string c; std::getline(columns, c, ',');) {
    if (c.rfind("lesson_", 0) == 0 && c.size() > 14 && c.substr(c.size() - 7) == "_points") {
      lessons.push_back(&recipe.lesson(std::stoi(c.substr(7, c.size() - 14))));
    }
  }
  TINY_CHECK(gradebook_header(lessons) == m.header, ValueError, "the shards' gradebooks have columns \"",
             m.header.substr(0, m.header.size() - 1), "\", which this grader does not write: merge with the grader "
             "that graded them");
  fs::create_directories(out);
  std::vector<nlohmann::json> summaries;
  for (size_t i = 0; i < m.rows.size(); ++i) {
    // Each submission's files beside the class's index.html, which links to NAME/report.html.
    const fs::path to = out / m.folders[i].filename();
    std::error_code ec;
    fs::remove_all(to, ec);
    fs::copy(m.folders[i], to, fs::copy_options::recursive, ec);
    TINY_CHECK(!ec, IOError, "cannot copy ", m.folders[i].string(), " to ", to.string(), ": ", ec.message());
    try {
      summaries.push_back(nlohmann::json::parse(read_whole_file(to / "summary.json")));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s cannot be read (%s): that submission is left out of the class table\n",
                   (to / "summary.json").c_str(), e.what());
    }
  }
  write_gradebook(out / "gradebook.csv", m.header, m.rows);
  write_file_atomically(out / "index.html", class_index_html(lessons, summaries, warning));
  std::printf("%s", class_table(lessons, summaries).c_str());
  std::printf("\nmerged %zu submission%s from %zu folder%s: %s (index.html and a folder per submission beside it)\n",
              m.rows.size(), m.rows.size() == 1 ? "" : "s", dirs.size(), dirs.size() == 1 ? "" : "s",
              (out / "gradebook.csv").c_str());
  if (m.seeds.size() > 1) {
    std::string list;
    for (uint64_t s : m.seeds) list += " " + std::to_string(s);
    std::printf("note: the shards graded with different seeds (%s): each student's inputs came from their own row's "
                "seed; give every shard the same --seed for one set of inputs (grader/slurm/grade_array.sbatch does)\n",
                list.c_str() + 1);
  }
  if (!m.skipped.empty()) {
    std::printf("%zu entr%s of the batch not graded (no row in the gradebook):\n", m.skipped.size(),
                m.skipped.size() == 1 ? "y" : "ies");
    for (const std::string& s : m.skipped) std::printf("  left out: %s\n", s.c_str());
  }
  return 0;
}

}  // namespace workbook
