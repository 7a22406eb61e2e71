#include "batch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "gradebook.h"
#include "junit.h"
#include "report.h"
#include "submission.h"
#include "text_file.h"
#include "tiny/error.h"

namespace workbook {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A submission's own files, from the lessons graded so far.
void write_submission_files(const fs::path& dir, const std::string& name, const std::vector<LessonResult>& results,
                            double seconds, uint64_t seed, const std::string& quiz, const std::string& warning,
                            const SubmissionLayout& layout) {
  nlohmann::json doc = gradescope_results(results, seconds, seed, quiz, &layout);
  if (!warning.empty()) doc["output"] = warning + doc["output"].get<std::string>();
  write_file_atomically(dir / "results.json", results_json_text(doc));
  std::ostringstream board;
  board << layout.text() << "\n";
  print_scoreboard(board, results, seed, false);
  board << warning;
  write_file_atomically(dir / "scoreboard.txt", board.str());
  write_file_atomically(dir / "report.html", html_report(results, seed, "GPU Training Workbook: " + name, warning, layout.text()));
  write_file_atomically(dir / "junit.xml", junit_xml(results, name, seed, &layout));
}

std::string lesson_line(const LessonResult& r) {
  std::string line = "lesson " + std::to_string(r.lesson->number) + " " + r.status;
  if (!r.timed_out.empty()) line += " (timed out)";
  return line + ", " + points_text(r.points) + " of " + points_text(r.max_points) + " points (" +
         duration_text(r.seconds) + ")";
}

// The summaries of the submissions that have one (graded now or before), in the batch's order.
std::vector<nlohmann::json> class_summaries(const fs::path& out_dir, const std::vector<fs::path>& submissions,
                                            bool say_what_is_left_out) {
  std::vector<nlohmann::json> summaries;
  for (const fs::path& s : submissions) {
    const fs::path file = out_dir / submission_name(s) / "summary.json";
    try {
      std::ifstream in(file);
      if (in.good()) summaries.push_back(nlohmann::json::parse(in));
    } catch (const std::exception&) {
      if (say_what_is_left_out) {
        std::fprintf(stderr, "%s cannot be read: that submission is left out of the class table\n", file.c_str());
      }
    }
  }
  return summaries;
}

}  // namespace

std::string submission_name(const fs::path& submission) {
  const std::string name = submission.filename().string();
  return is_archive_name(name) ? archive_stem(name) : name;
}

std::vector<fs::path> find_submissions(const fs::path& batch, std::vector<std::string>& skipped) {
  std::vector<fs::path> submissions;
  std::map<std::string, std::string> taken;  // a submission's name -> the entry that has it
  std::error_code ec;
  fs::directory_iterator it(batch, ec);
  TINY_CHECK(!ec, ValueError, "--batch ", batch.string(), " cannot be read: ", ec.message());
  std::vector<fs::directory_entry> entries;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) entries.push_back(*it);
  if (ec) skipped.push_back("(the rest of the folder: an entry cannot be read: " + ec.message() + ")");
  std::sort(entries.begin(), entries.end());
  // Folders before archives, so that "alice" keeps its name when "alice.zip" is there too.
  std::stable_partition(entries.begin(), entries.end(), [](const fs::directory_entry& e) {
    std::error_code err;
    return e.is_directory(err) && !e.is_symlink(err);
  });
  for (const fs::directory_entry& entry : entries) {
    const std::string file = entry.path().filename().string();
    const std::string name = submission_name(entry.path());
    std::error_code err;
    const fs::file_status st = entry.symlink_status(err);
    if (err) {
      skipped.push_back(file + " (cannot be read: " + err.message() + ")");
    } else if (fs::is_symlink(st)) {
      skipped.push_back(file + " (a symbolic link: not followed; copy the submission itself into the batch)");
    } else if (!fs::is_directory(st) && !(fs::is_regular_file(st) && is_archive_name(file))) {
      skipped.push_back(file + (fs::is_regular_file(st) ? " (a file that is not a .zip, .tar.gz or .tgz submission)"
                                                        : " (not a folder nor a file)"));
    } else if (file[0] == '.') {
      skipped.push_back(file + (fs::is_directory(st) ? " (a hidden folder)" : " (a hidden file)"));
    } else if (name.empty()) {
      skipped.push_back(file + " (an archive without a name before its extension)");
    } else if (name == "gradebook.csv" || name == "index.html" || name == "shard.json" ||
               (name.size() > 4 && name.substr(name.size() - 4) == ".tmp")) {
      // Its folder in --out would take the place of the batch's own file.
      skipped.push_back(file + " (named as a file the batch writes in --out: rename the " +
                        (fs::is_directory(st) ? "folder)" : "archive)"));
    } else if (taken.count(name) != 0) {
      skipped.push_back(file + " (the same student name as " + taken[name] + ", graded instead: rename one)");
    } else {
      taken[name] = file;
      submissions.push_back(entry.path());
    }
  }
  std::sort(submissions.begin(), submissions.end(),
            [](const fs::path& x, const fs::path& y) { return submission_name(x) < submission_name(y); });
  return submissions;
}

double lesson_budget(double left, size_t later) {
  if (later == 0) return left;
  const double reserve = std::min(30.0, left / static_cast<double>(later + 1));
  // At least a minute (or all that is left): a few seconds would only waste themselves on a compile cut short.
  return std::max(std::min(left, 60.0), left - reserve * static_cast<double>(later));
}

std::vector<LessonResult> grade_submission(const Recipe& recipe, const std::vector<const Lesson*>& lessons,
                                           const fs::path& lessons_dir, const SubmissionLayout* layout,
                                           const fs::path& build_dir, const fs::path& work,
                                           const GradeOptions& options, double deadline_s,
                                           const std::function<void(const std::vector<LessonResult>&)>& after_each) {
  const Clock::time_point start = Clock::now();
  std::vector<LessonResult> results;
  for (size_t k = 0; k < lessons.size(); ++k) {
    const Lesson* l = lessons[k];
    GradeOptions mine = options;
    if (deadline_s > 0) {
      const double left = deadline_s - since(start);
      mine.lesson_budget_s = lesson_budget(left, lessons.size() - k - 1);
      mine.out_of_time = left < 1;
    }
    if (options.progress) {
      std::fprintf(stderr, "checking lesson %d (%s)...\n", l->number, l->title.c_str());
      std::fflush(stderr);
    }
    fs::path dir = lessons_dir;
    if (layout != nullptr) {
      dir = layout->lessons_dir_of(*l);
      mine.not_submitted = layout->problem_of(*l);
    }
    results.push_back(grade_lesson(recipe, *l, dir, build_dir, work / l->folder, mine));
    if (after_each) after_each(results);
  }
  return results;
}

namespace {

// The seed of the batch that wrote `record` (shard.json) earlier, 0 when
// none; throws when it was another shard's.
uint64_t check_shard_record(const fs::path& record, const BatchOptions& b) {
  uint64_t recorded_seed = 0;  // a kill may come before any row
  if (!fs::exists(record)) return recorded_seed;
  // Two shards writing one gradebook would each take the other's rows for their own.
  nlohmann::json was;
  try {
    std::ifstream in(record);
    was = nlohmann::json::parse(in);
  } catch (const std::exception&) {
  }
  const int index = was.value("index", b.shard.index), count = was.value("count", b.shard.count);
  if (was.contains("seed") && was["seed"].is_number_unsigned()) recorded_seed = was["seed"].get<uint64_t>();
  TINY_CHECK(index == b.shard.index && count == b.shard.count, ValueError, b.out_dir.string(), " holds shard ",
             index, "/", count, "'s gradebook, and this is shard ", b.shard.text(), " (", b.shard.source,
             "): give each shard its own --out (e.g. OUT/shard-", b.shard.index, "), then grade merge them");
  return recorded_seed;
}

// What is graded already (--resume), and the seed the class shares: its
// rows', else (killed before the first row) `recorded_seed`, the one the batch
// started with; --seed overrides both.
Gradebook start_gradebook(const fs::path& csv, const std::string& header, const BatchOptions& b,
                          uint64_t recorded_seed, GradeOptions& options) {
  Gradebook done;
  if (fs::exists(csv)) {
    TINY_CHECK(b.resume, ValueError, csv.string(), " exists already: add --resume to go on with it (its submissions "
               "are not graded again), or choose another --out, or remove it to grade the class again");
    done = read_gradebook(csv, header);
    write_gradebook(csv, header, done.rows);  // without a row a kill cut short
    if (!b.seed_given && done.last_seed != 0) {
      options.seed = done.last_seed;
    } else if (!b.seed_given && recorded_seed != 0) {
      options.seed = recorded_seed;
    }
  } else {
    write_gradebook(csv, header, {});
  }
  return done;
}

// One batch's grading, shared by its worker threads: what they read, and
// (under `mutex`) what they count.
struct BatchRun {
  const Recipe& recipe;
  const std::vector<const Lesson*>& lessons;
  const BatchOptions& b;
  const GradeOptions& options;
  const std::vector<fs::path>& submissions;  // this run's part of the class
  const std::vector<fs::path>& todo;         // of those, the ones without a row yet
  const fs::path csv;
  const Clock::time_point start = Clock::now();
  std::mutex mutex{};
  size_t next = 0, finished = 0, lessons_done = 0;
  long reference_runs = 0, reference_hits = 0;
  std::vector<std::string> failed{};
};

// From the lessons graded so far: the batch's pace, jobs included.
std::string estimate(const BatchRun& run) {
  if (run.lessons_done == 0) return std::string();
  const size_t lessons_total = run.todo.size() * run.lessons.size();
  const double left = since(run.start) * static_cast<double>(lessons_total - run.lessons_done) / run.lessons_done;
  return ", about " + duration_text(left) + " left";
}

// Grades submission `i` of run.todo into its folder and the gradebook's row,
// saying on stderr how far it and the batch are.
void grade_entry(BatchRun& run, size_t i, const fs::path& w) {
  const BatchOptions& b = run.b;
  const std::string name = submission_name(run.todo[i]);
  const std::string tag = "[" + std::to_string(i + 1) + "/" + std::to_string(run.todo.size()) + "] " + name;
  const fs::path mine = b.out_dir / name;
  // Found at any depth of the folder, or of the archive unpacked into this submission's scratch.
  const SubmissionLayout layout = take_in(run.todo[i], run.lessons, w / "intake");
  const std::string quiz = layout.quiz_dir.empty() ? std::string() : read_quiz(layout.quiz_dir);
  const Clock::time_point t0 = Clock::now();
  size_t graded = 0;  // of this submission's lessons
  try {
    fs::create_directories(mine);
    std::error_code gone;
    fs::remove(mine / "summary.json", gone);  // an earlier batch's: this one's is written when it is done
    GradeOptions quiet = run.options;  // the batch's own lines say what is graded
    quiet.progress = false;
    const uint64_t seed = run.options.seed;
    const std::vector<LessonResult> results = grade_submission(
        run.recipe, run.lessons, fs::path(), &layout, w / "build", w / "checks", quiet, b.deadline_s,
        [&](const std::vector<LessonResult>& so_far) {
          // Rewritten after each lesson: a kill keeps what was graded.
          write_submission_files(mine, name, so_far, since(t0), seed, quiz, b.sandbox_warning, layout);
          std::lock_guard<std::mutex> lock(run.mutex);
          ++run.lessons_done;
          ++graded;
          run.reference_runs += so_far.back().reference_runs;
          run.reference_hits += so_far.back().reference_cache_hits;
          std::fprintf(stderr, "%s: %s\n", tag.c_str(), lesson_line(so_far.back()).c_str());
        });
    const double seconds = since(t0);
    const nlohmann::json summary = submission_summary(name, results, seed, seconds);
    write_file_atomically(mine / "summary.json", summary.dump(1) + "\n");  // before its row: a row means a summary
    std::lock_guard<std::mutex> lock(run.mutex);
    append_row(run.csv, gradebook_row(name, results, seed, seconds));
    // The class's page so far: a kill keeps it too.
    write_file_atomically(b.out_dir / "index.html", class_index_html(run.lessons, class_summaries(b.out_dir, run.submissions, false),
                                                    b.sandbox_warning));
    ++run.finished;
    const double total = summary["total"], maximum = summary["maximum"];
    std::fprintf(stderr, "%s: done, %s of %s points (%.1f%%) in %s; %zu of %zu submissions done in %s%s\n",
                 tag.c_str(), points_text(total).c_str(), points_text(maximum).c_str(),
                 maximum > 0 ? 100 * total / maximum : 0.0, duration_text(seconds).c_str(), run.finished,
                 run.todo.size(), duration_text(since(run.start)).c_str(),
                 run.finished < run.todo.size() ? estimate(run).c_str() : "");
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(run.mutex);
    run.lessons_done += run.lessons.size() - graded;  // the estimate counts it as done
    run.failed.push_back(name);
    std::fprintf(stderr, "%s: grading failed (%s); it has no row, so --resume grades it again\n", tag.c_str(),
                 e.what());
  }
}

// One worker thread: takes the next submission not yet taken until none is left.
void grade_entries(BatchRun& run) {
  for (;;) {
    size_t i;
    {
      std::lock_guard<std::mutex> lock(run.mutex);
      if (run.next >= run.todo.size()) return;
      i = run.next++;
    }
    const fs::path w = run.b.work / std::to_string(i);
    grade_entry(run, i, w);
    std::error_code ec;
    fs::remove_all(w, ec);
  }
}

// The class's page and table, and what the instructor should know: how often
// the reference ran, what was left out and what failed (then 1).
int report_batch(const BatchRun& run) {
  const BatchOptions& b = run.b;
  const std::vector<nlohmann::json> summaries = class_summaries(b.out_dir, run.submissions, true);
  write_file_atomically(b.out_dir / "index.html", class_index_html(run.lessons, summaries, b.sandbox_warning));
  std::printf("%s", class_table(run.lessons, summaries).c_str());
  std::printf("\ngraded %zu submission%s with seed %llu in %s: %s (index.html beside it; results.json, report.html, "
              "junit.xml and scoreboard.txt in a folder per submission)\n",
              run.finished, run.finished == 1 ? "" : "s", static_cast<unsigned long long>(run.options.seed),
              duration_text(since(run.start)).c_str(), run.csv.c_str());
  if (run.reference_runs + run.reference_hits > 0) {
    std::printf("the reference solution ran %ld time%s; %ld of its runs were answered from this batch's earlier ones "
                "(the same lesson, check, seed and modelled GPU)%s\n", run.reference_runs,
                run.reference_runs == 1 ? "" : "s", run.reference_hits, b.share_reference ? "" : " (not shared: "
                "--no-reference-cache, or a student's run could have written them)");
  }
  if (!b.skipped.empty()) {
    // Said again at the end, where the instructor reads: a student whose file was not taken gets no row at all.
    std::printf("%zu entr%s of %s not graded (no row in the gradebook):\n", b.skipped.size(),
                b.skipped.size() == 1 ? "y" : "ies", b.batch.c_str());
    for (const std::string& s : b.skipped) std::printf("  left out: %s\n", s.c_str());
  }
  if (!run.failed.empty()) {
    std::string names;
    for (const std::string& n : run.failed) names += " " + n;
    std::printf("%zu could not be graded (see above):%s; run the same command with --resume to try them again\n",
                run.failed.size(), names.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int grade_batch(const Recipe& recipe, const std::vector<const Lesson*>& lessons, BatchOptions b,
                GradeOptions options) {
  const std::vector<fs::path> everyone = find_submissions(b.batch, b.skipped);
  for (const std::string& s : b.skipped) std::fprintf(stderr, "skipped in --batch: %s\n", s.c_str());
  TINY_CHECK(!everyone.empty(), ValueError, "--batch ", b.batch.string(),
             " holds no submissions (one folder, .zip or .tar.gz per student, each holding the lessons folder)");
  // This run's part of the class: every shard splits the same sorted list the same way.
  const std::vector<fs::path> submissions = shard_of(everyone, b.shard);
  fs::create_directories(b.out_dir);
  const fs::path csv = b.out_dir / "gradebook.csv";
  const fs::path record = b.out_dir / "shard.json";
  const uint64_t recorded_seed = check_shard_record(record, b);
  if (b.shard.count > 1) {
    std::fprintf(stderr, "shard %s (%s): %zu of the class's %zu submissions, %s\n", b.shard.text().c_str(),
                 b.shard.source.c_str(), submissions.size(), everyone.size(),
                 submissions.empty() ? "nothing to grade here" : "the others are the other shards'");
  }
  const Gradebook done = start_gradebook(csv, gradebook_header(lessons), b, recorded_seed, options);
  {
    std::vector<std::string> names;
    for (const fs::path& s : submissions) names.push_back(submission_name(s));
    write_file_atomically(record, shard_record(b.shard, b.batch, everyone.size(), names, b.skipped, options.seed).dump(1) + "\n");
  }
  std::vector<fs::path> todo;
  for (const fs::path& s : submissions) {
    if (done.submissions.count(submission_name(s)) == 0) todo.push_back(s);
  }
  if (b.resume) {
    std::fprintf(stderr, "resuming %s: %zu of %zu submissions are in it already; grading the other %zu with seed %llu\n",
                 csv.c_str(), submissions.size() - todo.size(), submissions.size(), todo.size(),
                 static_cast<unsigned long long>(options.seed));
  }

  if (b.share_reference) options.reference_cache = b.work / "reference-cache";
  BatchRun run{recipe, lessons, b, options, submissions, todo, csv};
  std::vector<std::thread> threads;
  for (int j = 0; j < std::max(1, b.jobs); ++j) threads.emplace_back([&run] { grade_entries(run); });
  for (auto& t : threads) t.join();
  return report_batch(run);
}

}  // namespace workbook
