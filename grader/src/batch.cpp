#include "batch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "gradebook.h"
#include "junit.h"
#include "report.h"
#include "submission.h"
#include "tiny/error.h"

namespace workbook {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Writes through a temporary file and a rename, so a kill never leaves half a file.
void spit(const fs::path& file, const std::string& text) {
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    TINY_CHECK(out.good(), IOError, "cannot write ", tmp.string());
  }
  fs::rename(tmp, file);
}

// A submission's own files, from the lessons graded so far.
void write_submission_files(const fs::path& dir, const std::string& name, const std::vector<LessonResult>& results,
                            double seconds, uint64_t seed, const std::string& quiz, const std::string& warning) {
  nlohmann::json doc = gradescope_results(results, seconds, seed, quiz);
  if (!warning.empty()) doc["output"] = warning + doc["output"].get<std::string>();
  spit(dir / "results.json", results_json_text(doc));
  std::ostringstream board;
  print_scoreboard(board, results, seed, false);
  board << warning;
  spit(dir / "scoreboard.txt", board.str());
  spit(dir / "report.html", html_report(results, seed, "GPU Training Workbook: " + name, warning));
  spit(dir / "junit.xml", junit_xml(results, name, seed));
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
    const fs::path file = out_dir / s.filename() / "summary.json";
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

double lesson_budget(double left, size_t later) {
  if (later == 0) return left;
  const double reserve = std::min(30.0, left / static_cast<double>(later + 1));
  // At least a minute (or all that is left): a few seconds would only waste themselves on a compile cut short.
  return std::max(std::min(left, 60.0), left - reserve * static_cast<double>(later));
}

std::vector<LessonResult> grade_submission(const Recipe& recipe, const std::vector<const Lesson*>& lessons,
                                           const fs::path& lessons_dir, const fs::path& build_dir, const fs::path& work,
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
    results.push_back(grade_lesson(recipe, *l, lessons_dir, build_dir, work / l->folder, mine));
    if (after_each) after_each(results);
  }
  return results;
}

int grade_batch(const Recipe& recipe, const std::vector<const Lesson*>& lessons, const BatchOptions& b,
                GradeOptions options) {
  std::vector<fs::path> submissions;
  std::vector<std::string> skipped;
  for (const auto& entry : fs::directory_iterator(b.batch)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory()) {
      skipped.push_back(name + " (not a folder)");
    } else if (name[0] == '.') {
      skipped.push_back(name + " (a hidden folder)");
    } else if (name == "gradebook.csv" || name == "index.html" ||
               (name.size() > 4 && name.substr(name.size() - 4) == ".tmp")) {
      // Its folder in --out would take the place of the batch's own file.
      skipped.push_back(name + " (named as a file the batch writes in --out: rename the folder)");
    } else {
      submissions.push_back(entry.path());
    }
  }
  std::sort(submissions.begin(), submissions.end());
  std::sort(skipped.begin(), skipped.end());
  for (const std::string& s : skipped) std::fprintf(stderr, "skipped in --batch: %s\n", s.c_str());
  TINY_CHECK(!submissions.empty(), ValueError, "--batch ", b.batch.string(),
             " holds no submission folders (one folder per student, each a copy of the lessons folder)");
  fs::create_directories(b.out_dir);
  const fs::path csv = b.out_dir / "gradebook.csv";
  const std::string header = gradebook_header(lessons);

  // What is graded already (--resume), and the seed the class shares.
  Gradebook done;
  if (fs::exists(csv)) {
    TINY_CHECK(b.resume, ValueError, csv.string(), " exists already: add --resume to go on with it (its submissions "
               "are not graded again), or choose another --out, or remove it to grade the class again");
    done = read_gradebook(csv, header);
    write_gradebook(csv, header, done.rows);  // without a row a kill cut short
    if (!b.seed_given && done.last_seed != 0) options.seed = done.last_seed;
  } else {
    write_gradebook(csv, header, {});
  }
  std::vector<fs::path> todo;
  for (const fs::path& s : submissions) {
    if (done.submissions.count(s.filename().string()) == 0) todo.push_back(s);
  }
  if (b.resume) {
    std::fprintf(stderr, "resuming %s: %zu of %zu submissions are in it already; grading the other %zu with seed %llu\n",
                 csv.c_str(), submissions.size() - todo.size(), submissions.size(), todo.size(),
                 static_cast<unsigned long long>(options.seed));
  }

  std::mutex mutex;
  size_t next = 0, finished = 0, lessons_done = 0;
  std::vector<std::string> failed;
  const size_t lessons_total = todo.size() * lessons.size();
  const Clock::time_point start = Clock::now();
  auto estimate = [&]() {
    // From the lessons graded so far: the batch's pace, jobs included.
    if (lessons_done == 0) return std::string();
    const double left = since(start) * static_cast<double>(lessons_total - lessons_done) / lessons_done;
    return ", about " + duration_text(left) + " left";
  };
  auto worker = [&]() {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (next >= todo.size()) return;
        i = next++;
      }
      const std::string name = todo[i].filename().string();
      const std::string tag = "[" + std::to_string(i + 1) + "/" + std::to_string(todo.size()) + "] " + name;
      const fs::path mine = b.out_dir / name;
      const fs::path w = b.work / std::to_string(i);
      const std::string quiz = read_quiz(submission_lessons_dir(todo[i]));
      const Clock::time_point t0 = Clock::now();
      size_t graded = 0;  // of this submission's lessons
      try {
        fs::create_directories(mine);
        std::error_code gone;
        fs::remove(mine / "summary.json", gone);  // an earlier batch's: this one's is written when it is done
        GradeOptions quiet = options;  // the batch's own lines say what is graded
        quiet.progress = false;
        const std::vector<LessonResult> results = grade_submission(
            recipe, lessons, submission_lessons_dir(todo[i]), w / "build", w / "checks", quiet, b.deadline_s,
            [&](const std::vector<LessonResult>& so_far) {
              // Rewritten after each lesson: a kill keeps what was graded.
              write_submission_files(mine, name, so_far, since(t0), options.seed, quiz, b.sandbox_warning);
              std::lock_guard<std::mutex> lock(mutex);
              ++lessons_done;
              ++graded;
              std::fprintf(stderr, "%s: %s\n", tag.c_str(), lesson_line(so_far.back()).c_str());
            });
        const double seconds = since(t0);
        const nlohmann::json summary = submission_summary(name, results, options.seed, seconds);
        spit(mine / "summary.json", summary.dump(1) + "\n");  // before its row: a row means a summary
        std::lock_guard<std::mutex> lock(mutex);
        append_row(csv, gradebook_row(name, results, options.seed, seconds));
        // The class's page so far: a kill keeps it too.
        spit(b.out_dir / "index.html", class_index_html(lessons, class_summaries(b.out_dir, submissions, false),
                                                        b.sandbox_warning));
        ++finished;
        const double total = summary["total"], maximum = summary["maximum"];
        std::fprintf(stderr, "%s: done, %s of %s points (%.1f%%) in %s; %zu of %zu submissions done in %s%s\n",
                     tag.c_str(), points_text(total).c_str(), points_text(maximum).c_str(),
                     maximum > 0 ? 100 * total / maximum : 0.0, duration_text(seconds).c_str(), finished, todo.size(),
                     duration_text(since(start)).c_str(), finished < todo.size() ? estimate().c_str() : "");
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        lessons_done += lessons.size() - graded;  // the estimate counts it as done
        failed.push_back(name);
        std::fprintf(stderr, "%s: grading failed (%s); it has no row, so --resume grades it again\n", tag.c_str(),
                     e.what());
      }
      std::error_code ec;
      fs::remove_all(w, ec);
    }
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < std::max(1, b.jobs); ++j) threads.emplace_back(worker);
  for (auto& t : threads) t.join();

  const std::vector<nlohmann::json> summaries = class_summaries(b.out_dir, submissions, true);
  spit(b.out_dir / "index.html", class_index_html(lessons, summaries, b.sandbox_warning));
  std::printf("%s", class_table(lessons, summaries).c_str());
  std::printf("\ngraded %zu submission%s with seed %llu in %s: %s (index.html beside it; results.json, report.html, "
              "junit.xml and scoreboard.txt in a folder per submission)\n",
              finished, finished == 1 ? "" : "s", static_cast<unsigned long long>(options.seed),
              duration_text(since(start)).c_str(), csv.c_str());
  if (!failed.empty()) {
    std::string names;
    for (const std::string& n : failed) names += " " + n;
    std::printf("%zu could not be graded (see above):%s; run the same command with --resume to try them again\n",
                failed.size(), names.c_str());
    return 1;
  }
  return 0;
}

}  // namespace workbook
