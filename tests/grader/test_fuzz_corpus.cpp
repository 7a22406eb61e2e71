// The fuzz targets of the grader's readers (fuzz/grader_targets.cpp) over their committed corpora,
// and the bugs the fuzzing work found in them, as regression tests.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "harness/bundle.h"
#include "replay.h"
#include "submission.h"
#include "targets.h"

namespace {

namespace fs = std::filesystem;
const fs::path kCorpus = TINY_FUZZ_CORPUS;

TEST(FuzzCorpus, Bundle) { EXPECT_GE(tiny_fuzz::replay_corpus(kCorpus / "bundle", tiny_fuzz::bundle), 10u); }
TEST(FuzzCorpus, Recipe) { EXPECT_GE(tiny_fuzz::replay_corpus(kCorpus / "recipe", tiny_fuzz::recipe), 8u); }
TEST(FuzzCorpus, Archive) { EXPECT_GE(tiny_fuzz::replay_corpus(kCorpus / "archive", tiny_fuzz::archive), 10u); }
TEST(FuzzCorpus, Submission) {
  EXPECT_GE(tiny_fuzz::replay_corpus(kCorpus / "submission", tiny_fuzz::submission), 8u);
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = tiny_fuzz::scratch_dir() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// quiz.txt is copied into results.json: a FIFO used to hang the grader, /dev/zero to eat all memory,
// and a symlink to copy a file of the grading machine into the student's results.
TEST(FuzzRegression, QuizThatIsNotARegularFileIsNotRead) {
  const fs::path d = fresh_dir("quiz_fifo");
  ASSERT_EQ(::mkfifo((d / "quiz.txt").c_str(), 0600), 0);
  EXPECT_NE(workbook::read_quiz(d).find("not a regular file"), std::string::npos);
  fs::remove(d / "quiz.txt");
  fs::create_symlink("/dev/zero", d / "quiz.txt");
  EXPECT_NE(workbook::read_quiz(d).find("not a regular file"), std::string::npos);
  fs::remove(d / "quiz.txt");
  EXPECT_EQ(workbook::read_quiz(d), "");
}

TEST(FuzzRegression, QuizIsCutAtItsCap) {
  const fs::path d = fresh_dir("quiz_big");
  std::ofstream(d / "quiz.txt") << std::string(workbook::kMaxQuizBytes + 1000, 'x');
  const std::string quiz = workbook::read_quiz(d);
  EXPECT_EQ(quiz.substr(0, 4), "xxxx");
  EXPECT_NE(quiz.find("[quiz.txt cut at 65536 bytes]"), std::string::npos);
  EXPECT_LT(quiz.size(), workbook::kMaxQuizBytes + 100);
}

// A quiz (or a compiler quoting a student's source) that is not UTF-8 made results.json's dump throw,
// which in `grade --batch` ended the whole batch (std::terminate in a worker thread).
TEST(FuzzRegression, ResultsJsonAcceptsBytesThatAreNotUtf8) {
  const nlohmann::json doc = {{"output", std::string("caf\xe9 \xff")}};
  std::string text;
  ASSERT_NO_THROW(text = workbook::results_json_text(doc));
  EXPECT_EQ(nlohmann::json::parse(text).at("output"), "caf\xef\xbf\xbd \xef\xbf\xbd");
}

// A `lessons` symlink loop made fs::exists throw outside the batch's try (std::terminate).
TEST(FuzzRegression, LessonsSymlinkLoopIsNotAFolder) {
  const fs::path d = fresh_dir("loop");
  fs::create_symlink("lessons", d / "lessons");
  EXPECT_EQ(workbook::submission_lessons_dir(d), d);
}

// values.json named a file outside the exchange folder (or /dev/zero, which read forever).
TEST(FuzzRegression, BundleFileMustBeInsideTheFolder) {
  const fs::path d = fresh_dir("bundle_escape");
  tiny::io::save_npy((d / "t0.npy").string(), tiny::zeros({2}));
  for (const std::string file : {"/dev/zero", "../bundle_escape/t0.npy", ".."}) {
    std::ofstream(d / "values.json") << nlohmann::json{{"_tensors", {{{"name", "x"}, {"defined", true},
        {"file", file}, {"device", "cpu"}, {"dtype", "float32"}, {"shape", {2}}, {"requires_grad", false},
        {"is_pinned", false}}}}}.dump();
    try {
      workbook::Bundle::load(d);
      ADD_FAILURE() << "Bundle::load read '" << file << "'";
    } catch (const tiny::IOError& e) {
      EXPECT_NE(std::string(e.what()).find("must be a .npy file inside the folder, got '" + file + "'"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
