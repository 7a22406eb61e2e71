// The intake of a submission (issue 20 item 1): lessons found at any depth, .zip and .tar.gz unpacked
// with hostile archives refused (absolute path, "..", symbolic and hard links, bombs, corrupt bytes), two
// exercise.cpp of one lesson named, the "submission layout" item, and what a batch folder skips. Then
// Gradescope's results.json (item 5): text output and each check's visibility from lesson.json.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "batch.h"
#include "grade.h"
#include "intake.h"
#include "recipe.h"
#include "tiny/error.h"
#include "unpack.h"

namespace {

namespace fs = std::filesystem;
using namespace workbook;

// A fresh folder of this test's own, removed when it ends.
class IntakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("intake_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (int n : {1, 2}) {
      Lesson l;
      l.number = n;
      l.folder = n == 1 ? "1_device_check" : "2_moving_tensors";
      l.title = l.folder;
      lessons_.push_back(l);
    }
    for (const Lesson& l : lessons_) pointers_.push_back(&l);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::vector<Lesson> lessons_;
  std::vector<const Lesson*> pointers_;
};

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << text;
}

// One entry of an archive the tests write: a file, a folder, a symbolic link or a hard link.
struct Entry {
  std::string path = "", data = "";
  enum Kind { kFile, kFolder, kSymlink, kHardlink } kind = kFile;
  std::string target = "";  // of a link
  uint64_t zeros = 0;  // a file of this many zero bytes instead of `data` (a bomb)
};

// Writes `entries` as a .zip ("zip") or a .tar.gz ("tar.gz") with libarchive's writer, as zip and tar would.
fs::path make_archive(const fs::path& file, const std::string& format, const std::vector<Entry>& entries) {
  archive* a = archive_write_new();
  if (format == "zip") {
    archive_write_set_format_zip(a);
  } else {
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_gzip(a);
  }
  EXPECT_EQ(archive_write_open_filename(a, file.c_str()), ARCHIVE_OK) << archive_error_string(a);
  const std::string block(1 << 16, '\0');
  for (const Entry& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.path.c_str());
    archive_entry_set_perm(entry, 0644);
    const uint64_t size = e.zeros > 0 ? e.zeros : e.data.size();
    switch (e.kind) {
      case Entry::kFile:
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_size(entry, static_cast<la_int64_t>(size));
        break;
      case Entry::kFolder:
        archive_entry_set_filetype(entry, AE_IFDIR);
        break;
      case Entry::kSymlink:
        archive_entry_set_filetype(entry, AE_IFLNK);
        archive_entry_set_symlink(entry, e.target.c_str());
        break;
      case Entry::kHardlink:
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_hardlink(entry, e.target.c_str());
        archive_entry_set_size(entry, 0);
        break;
    }
    EXPECT_EQ(archive_write_header(a, entry), ARCHIVE_OK) << archive_error_string(a);
    if (e.kind == Entry::kFile) {
      if (e.zeros > 0) {
        for (uint64_t done = 0; done < e.zeros; done += block.size()) {
          archive_write_data(a, block.data(), std::min<uint64_t>(block.size(), e.zeros - done));
        }
      } else {
        archive_write_data(a, e.data.data(), e.data.size());
      }
    }
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
  return file;
}

const std::string kSource = "// my lesson 1\n";

// Every file under `root`, relative: what an unpacking left behind.
std::vector<std::string> files_under(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path().lexically_relative(root).string());
  }
  return out;
}

TEST_F(IntakeTest, LessonsAreFoundAtAnyDepthOfAFolderWithQuizBesideThem) {
  write(dir_ / "alice" / "my work" / "copy" / "lessons" / "1_device_check" / "exercise.cpp", kSource);
  write(dir_ / "alice" / "my work" / "copy" / "lessons" / "quiz.txt", "1. the CPU\n");
  const SubmissionLayout layout = take_in(dir_ / "alice", pointers_, dir_ / "scratch");
  EXPECT_EQ(layout.problem, "");
  EXPECT_EQ(layout.lessons_dir_of(lessons_[0]), dir_ / "alice" / "my work" / "copy" / "lessons");
  EXPECT_EQ(layout.lessons_dir_of(lessons_[1]), fs::path());
  EXPECT_EQ(layout.quiz_dir, dir_ / "alice" / "my work" / "copy" / "lessons");
  EXPECT_FALSE(layout.complete());
  EXPECT_EQ(layout.problem_of(lessons_[0]), "");
  EXPECT_NE(layout.problem_of(lessons_[1]).find("no 2_moving_tensors/exercise.cpp anywhere in alice/"),
            std::string::npos);
  const std::string text = layout.text();
  EXPECT_NE(text.find("submission layout of alice/: 1 of 2 lessons found"), std::string::npos) << text;
  EXPECT_NE(text.find("lesson 1 (1_device_check/exercise.cpp): found at my work/copy/lessons/1_device_check/exercise.cpp"),
            std::string::npos) << text;
  EXPECT_NE(text.find("lesson 2 (2_moving_tensors/exercise.cpp): not submitted"), std::string::npos) << text;
  EXPECT_NE(text.find("expected: a folder N_name/ holding exercise.cpp"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(dir_ / "scratch")) << "a folder needs no scratch";
}

TEST_F(IntakeTest, TwoExerciseCppOfOneLessonAreAnErrorNamingBoth) {
  write(dir_ / "bob" / "lessons" / "1_device_check" / "exercise.cpp", kSource);
  write(dir_ / "bob" / "old" / "1_device_check" / "exercise.cpp", kSource);
  write(dir_ / "bob" / "lessons" / "2_moving_tensors" / "exercise.cpp", kSource);
  const SubmissionLayout layout = take_in(dir_ / "bob", pointers_, dir_ / "scratch");
  const std::string why = layout.problem_of(lessons_[0]);
  EXPECT_NE(why.find("2 files are 1_device_check/exercise.cpp: lessons/1_device_check/exercise.cpp and "
                     "old/1_device_check/exercise.cpp"), std::string::npos) << why;
  EXPECT_NE(why.find("keep one"), std::string::npos) << why;
  EXPECT_EQ(layout.problem_of(lessons_[1]), "");
  EXPECT_NE(layout.text().find("lesson 1 (1_device_check/exercise.cpp): not graded: 2 files are"), std::string::npos);
  EXPECT_FALSE(layout.complete());
}

TEST_F(IntakeTest, TheWorkbooksSolutionsAndFoldersNamedAfterNoLessonAreListedNotTaken) {
  write(dir_ / "carol" / "workbook" / "lessons" / "1_device_check" / "exercise.cpp", kSource);
  write(dir_ / "carol" / "workbook" / "solutions" / "1_device_check" / "exercise.cpp", kSource);
  write(dir_ / "carol" / "workbook" / "lessons" / "lesson2" / "exercise.cpp", kSource);
  const SubmissionLayout layout = take_in(dir_ / "carol", pointers_, dir_ / "scratch");
  EXPECT_EQ(layout.problem_of(lessons_[0]), "");
  const std::string text = layout.text();
  EXPECT_NE(text.find("not taken: workbook/solutions/1_device_check/exercise.cpp (under solutions/"), std::string::npos)
      << text;
  EXPECT_NE(text.find("not taken: workbook/lessons/lesson2/exercise.cpp (its folder \"lesson2\" is not a lesson"),
            std::string::npos) << text;
}

TEST_F(IntakeTest, ASymlinkedFolderIsNotFollowed) {
  write(dir_ / "elsewhere" / "1_device_check" / "exercise.cpp", kSource);
  fs::create_directories(dir_ / "dave");
  fs::create_directory_symlink(dir_ / "elsewhere", dir_ / "dave" / "lessons");
  const SubmissionLayout layout = take_in(dir_ / "dave", pointers_, dir_ / "scratch");
  EXPECT_EQ(layout.lessons_dir_of(lessons_[0]), fs::path());
}

TEST_F(IntakeTest, AZipAndATarGzAreUnpackedIntoTheScratchAndSearched) {
  for (const std::string format : {"zip", "tar.gz"}) {
    const fs::path archive = make_archive(dir_ / ("erin." + format), format,
                                          {{"erin/", "", Entry::kFolder},
                                           {"erin/deep/1_device_check/exercise.cpp", kSource},
                                           {"erin/deep/quiz.txt", "my answers\n"},
                                           {"./erin/deep/2_moving_tensors/exercise.cpp", kSource}});
    const fs::path scratch = dir_ / ("scratch_" + format);
    const SubmissionLayout layout = take_in(archive, pointers_, scratch);
    ASSERT_EQ(layout.problem, "") << format;
    EXPECT_TRUE(layout.complete()) << layout.text();
    EXPECT_EQ(layout.lessons_dir_of(lessons_[0]), scratch / "unpacked" / "erin" / "deep");
    EXPECT_EQ(layout.quiz_dir, scratch / "unpacked" / "erin" / "deep");
    EXPECT_NE(layout.text().find("found at erin." + format + ": erin/deep/1_device_check/exercise.cpp"),
              std::string::npos) << layout.text();
    std::ifstream in(scratch / "unpacked" / "erin" / "deep" / "1_device_check" / "exercise.cpp");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, kSource);
    EXPECT_FALSE(fs::exists(dir_ / "erin")) << "unpacked beside the submission";
  }
}

TEST_F(IntakeTest, AnArchiveOfDotKeepsItsFilesAndSkipsItsRoot) {
  // `tar czf lessons.tgz .` from inside the lessons folder: "./" first, then "./1_device_check/...".
  const fs::path archive = make_archive(dir_ / "dot.tar.gz", "tar.gz",
                                        {{"./", "", Entry::kFolder},
                                         {"./1_device_check/", "", Entry::kFolder},
                                         {"./1_device_check/exercise.cpp", kSource}});
  const SubmissionLayout layout = take_in(archive, pointers_, dir_ / "scratch");
  ASSERT_EQ(layout.problem, "");
  EXPECT_EQ(layout.lessons_dir_of(lessons_[0]), dir_ / "scratch" / "unpacked");
  // A file (not a folder) named "./" is still refused: it names no file.
  const fs::path odd = make_archive(dir_ / "odd.tar.gz", "tar.gz", {{"./", "x"}});
  const std::string problem = take_in(odd, pointers_, dir_ / "scratch2").problem;
  EXPECT_NE(problem.find("odd.tar.gz was refused: an entry has no name"), std::string::npos) << problem;
}

TEST_F(IntakeTest, AFolderHoldingOnlyAnArchiveIsThatArchive) {
  // Gradescope keeps an uploaded .tar.gz as the one file of /autograder/submission.
  fs::create_directories(dir_ / "submission");
  make_archive(dir_ / "submission" / "lessons.tar.gz", "tar.gz", {{"lessons/1_device_check/exercise.cpp", kSource}});
  const SubmissionLayout layout = take_in(dir_ / "submission", pointers_, dir_ / "scratch");
  EXPECT_EQ(layout.lessons_dir_of(lessons_[0]), dir_ / "scratch" / "unpacked" / "lessons");
  EXPECT_NE(layout.text().find("found at lessons.tar.gz: lessons/1_device_check/exercise.cpp"), std::string::npos);
}

// Each hostile archive is refused as a whole, saying which entry and why, and writes nothing outside the scratch.
TEST_F(IntakeTest, HostileArchivesAreRefusedNamingTheEntryAndTheRule) {
  struct Case {
    std::string name;
    std::vector<Entry> entries;
    std::string expected;
  };
  const std::string outside = (dir_ / "outside.txt").string();
  const std::vector<Case> cases = {
      {"absolute", {{outside, "pwned"}}, "has an absolute path"},
      {"dotdot", {{"lessons/../../outside.txt", "pwned"}}, "has a \"..\" in its path"},
      {"symlink", {{"lessons/1_device_check/exercise.cpp", "", Entry::kSymlink, "/etc/shadow"}},
       "is a symbolic link (to \"/etc/shadow\")"},
      {"symlink_folder", {{"lessons", "", Entry::kSymlink, "/"}, {"lessons/outside.txt", "pwned"}},
       "is a symbolic link"},
      {"hardlink", {{"lessons/1_device_check/exercise.cpp", "", Entry::kHardlink, "/etc/shadow"}},
       "is a hard link (to \"/etc/shadow\")"},
  };
  for (const std::string format : {"zip", "tar.gz"}) {
    for (const Case& c : cases) {
      if (format == "zip" && c.name == "hardlink") continue;  // zip has no hard links
      const fs::path archive = make_archive(dir_ / (c.name + "." + format), format, c.entries);
      const fs::path scratch = dir_ / ("scratch_" + c.name + "_" + format);
      const SubmissionLayout layout = take_in(archive, pointers_, scratch);
      EXPECT_NE(layout.problem.find(c.name + "." + format + " was refused: "), std::string::npos) << layout.problem;
      EXPECT_NE(layout.problem.find(c.expected), std::string::npos) << c.name << " " << format << ": " << layout.problem;
      EXPECT_FALSE(fs::exists(outside)) << c.name;
      EXPECT_EQ(layout.lessons_dir_of(lessons_[0]), fs::path());
      EXPECT_EQ(layout.problem_of(lessons_[0]), layout.problem) << "every lesson is not submitted, with the reason";
      EXPECT_NE(layout.text().find("not taken: " + layout.problem), std::string::npos);
      for (const std::string& f : files_under(scratch)) {
        EXPECT_EQ(fs::symlink_status(scratch / f).type() == fs::file_type::symlink, false) << f;
      }
    }
  }
}

TEST_F(IntakeTest, ArchiveBombsAreRefusedNamingTheLimitTheyPassed) {
  // Total size: 70 MiB of zeros (about 70 KiB packed) is over the default 64 MiB, refused from its header.
  const fs::path big = make_archive(dir_ / "big.tar.gz", "tar.gz", {{"lessons/zeros", "", Entry::kFile, "", 70u << 20}});
  ArchiveLimits no_ratio;
  no_ratio.max_ratio = 1e12;
  const SubmissionLayout total = take_in(big, pointers_, dir_ / "s1", no_ratio);
  EXPECT_NE(total.problem.find("the entry \"lessons/zeros\" says it is 73400320 bytes, more than the limit on the "
                               "total unpacked size (64 MiB"), std::string::npos) << total.problem;
  EXPECT_FALSE(fs::exists(dir_ / "s1" / "unpacked" / "lessons" / "zeros")) << "refused before a byte was written";
  // Counted as it unpacks too: two files of 40 MiB, each under the limit, together over it.
  const fs::path two = make_archive(dir_ / "two.tar.gz", "tar.gz", {{"a", "", Entry::kFile, "", 40u << 20},
                                                                     {"b", "", Entry::kFile, "", 40u << 20}});
  const SubmissionLayout sum = take_in(two, pointers_, dir_ / "s2", no_ratio);
  EXPECT_NE(sum.problem.find("more than the limit on the total unpacked size"), std::string::npos) << sum.problem;
  // Ratio: 20 MiB of zeros, under the total, stops at the ratio (over 200x once 1 MiB is out), early.
  const fs::path dense = make_archive(dir_ / "dense.zip", "zip", {{"lessons/zeros", "", Entry::kFile, "", 20u << 20}});
  const SubmissionLayout ratio = take_in(dense, pointers_, dir_ / "s3");
  EXPECT_NE(ratio.problem.find("times its size: the limit on the compression ratio"), std::string::npos)
      << ratio.problem;
  // 200 times its ~20 KiB is about 4 MiB: it stops there, not at 20 MiB.
  EXPECT_LT(fs::file_size(dir_ / "s3" / "unpacked" / "lessons" / "zeros"), uint64_t{8} << 20) << "stopped early";
  // File count.
  std::vector<Entry> many;
  for (int i = 0; i < 12; ++i) many.push_back({"lessons/f" + std::to_string(i), "x"});
  ArchiveLimits ten;
  ten.max_entries = 10;
  const SubmissionLayout count = take_in(make_archive(dir_ / "many.zip", "zip", many), pointers_, dir_ / "s4", ten);
  EXPECT_NE(count.problem.find("more than 10 entries (the limit on the file count"), std::string::npos)
      << count.problem;
  // The archive's own size, before a byte of it is read.
  ArchiveLimits tiny_archive;
  tiny_archive.max_archive_bytes = 1000;
  const fs::path noise = make_archive(dir_ / "noise.tar.gz", "tar.gz", {{"lessons/f", std::string(100000, 'x')}});
  write(dir_ / "noise.tar.gz", std::string(2000, 'n'));
  const SubmissionLayout packed = take_in(noise, pointers_, dir_ / "s5", tiny_archive);
  EXPECT_NE(packed.problem.find("noise.tar.gz was refused: it is 2000 bytes, more than 1000 bytes (the limit on an "
                                "archive's size"), std::string::npos) << packed.problem;
}

TEST_F(IntakeTest, CorruptArchivesAreRefusedSayingTheyCannotBeRead) {
  write(dir_ / "noise.zip", std::string("PK\x03\x04") + " this is not a zip at all");  // a zip's magic, then noise
  const SubmissionLayout noise = take_in(dir_ / "noise.zip", pointers_, dir_ / "s1");
  EXPECT_NE(noise.problem.find("noise.zip cannot be read as a .zip or .tar.gz archive"), std::string::npos)
      << noise.problem;
  // A real .tar.gz cut in the middle.
  const fs::path whole = make_archive(dir_ / "whole.tar.gz", "tar.gz",
                                      {{"lessons/1_device_check/exercise.cpp", std::string(100000, 'a')}});
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write(dir_ / "cut.tar.gz", bytes.substr(0, bytes.size() / 2));
  const SubmissionLayout cut = take_in(dir_ / "cut.tar.gz", pointers_, dir_ / "s2");
  EXPECT_NE(cut.problem.find("cut.tar.gz cannot be read"), std::string::npos) << cut.problem;
  // The reader the fuzz target drives says the same from memory.
  EXPECT_THROW(read_archive(bytes.data(), bytes.size() / 2, "cut.tar.gz"), tiny::ValueError);
  EXPECT_EQ(read_archive(bytes.data(), bytes.size(), "whole.tar.gz").at(0).size, 100000u);
}

TEST_F(IntakeTest, ABatchListsWhatItSkipsAndWhy) {
  fs::create_directories(dir_ / "batch" / "alice");
  fs::create_directories(dir_ / "batch" / "bob");
  make_archive(dir_ / "batch" / "bob.zip", "zip", {{"x", "y"}});
  make_archive(dir_ / "batch" / "carol.tar.gz", "tar.gz", {{"x", "y"}});
  write(dir_ / "batch" / "notes.txt", "");
  fs::create_directories(dir_ / "batch" / ".git");
  fs::create_directory_symlink(dir_ / "batch" / "alice", dir_ / "batch" / "linked");
  std::vector<std::string> skipped;
  const std::vector<fs::path> found = find_submissions(dir_ / "batch", skipped);
  std::vector<std::string> names;
  for (const fs::path& p : found) names.push_back(submission_name(p));
  EXPECT_EQ(names, (std::vector<std::string>{"alice", "bob", "carol"}));
  EXPECT_EQ(found[1].filename(), "bob") << "the folder keeps the name";
  std::string all;
  for (const std::string& s : skipped) all += s + "\n";
  EXPECT_NE(all.find("bob.zip (the same student name as bob, graded instead: rename one)"), std::string::npos) << all;
  EXPECT_NE(all.find("notes.txt (a file that is not a .zip, .tar.gz or .tgz submission)"), std::string::npos) << all;
  EXPECT_NE(all.find(".git (a hidden folder)"), std::string::npos) << all;
  EXPECT_NE(all.find("linked (a symbolic link: not followed"), std::string::npos) << all;
  EXPECT_EQ(skipped.size(), 4u) << all;
}

CheckResult check(const std::string& name, bool timed, const std::string& message) {
  CheckResult c;
  c.name = name;
  c.summary = name + " works";
  c.verdict = "fail";
  c.message = message;
  c.timed = timed;
  return c;
}

TEST(GradescopeResults, OutputIsTextAndEachChecksVisibilityFollowsLessonJson) {
  Lesson l;
  l.number = 3;
  l.folder = "3_x";
  l.title = "Three";
  l.timed_visibility = "after_published";
  l.check_visibility["secret"] = "hidden";
  LessonResult r;
  r.lesson = &l;
  r.status = "in progress";
  r.checks = {check("plain", false, "expected std::vector<int> <b>3</b>"), check("speed", true, ""),
              check("secret", true, "")};
  r.total = 3;
  assign_points(r);
  ASSERT_EQ(r.status, "in progress") << r.problem;
  SubmissionLayout layout;
  layout.name = "alice/";
  layout.lessons.push_back({&l, "/x", "lessons/3_x/exercise.cpp", ""});
  const nlohmann::json doc = gradescope_results({r}, 1, 7, "", &layout);
  EXPECT_EQ(doc.at("output_format"), "text");
  EXPECT_EQ(doc.at("test_output_format"), "text");
  const nlohmann::json& tests = doc.at("tests");
  ASSERT_EQ(tests.size(), 4u);
  EXPECT_EQ(tests[0].at("name"), "submission layout");
  EXPECT_EQ(tests[0].at("max_score"), 0);
  EXPECT_EQ(tests[0].at("status"), "passed");
  EXPECT_NE(tests[0].at("output").get<std::string>().find("found at lessons/3_x/exercise.cpp"), std::string::npos);
  EXPECT_EQ(tests[1].at("visibility"), "visible");
  EXPECT_EQ(tests[1].at("output_format"), "text");
  EXPECT_NE(tests[1].at("output").get<std::string>().find("std::vector<int> <b>3</b>"), std::string::npos);
  EXPECT_EQ(tests[2].at("visibility"), "after_published");
  EXPECT_EQ(tests[3].at("visibility"), "hidden");
}

TEST(GradescopeResults, AVisibilityNamingNoCheckMakesTheLessonAnErrorNamingTheField) {
  Lesson l;
  l.number = 3;
  l.folder = "3_x";
  l.check_visibility["no such check"] = "hidden";
  LessonResult r;
  r.lesson = &l;
  r.status = "passed";
  r.checks = {check("plain", false, "")};
  assign_points(r);
  EXPECT_EQ(r.status, "error");
  EXPECT_NE(r.problem.find("lessons/3_x/lesson.json: 'check_visibility' names \"no such check\""), std::string::npos)
      << r.problem;
}

TEST(GradescopeResults, LessonJsonVisibilitiesThatAreNotGradescopesAreRefusedNamingTheField) {
  const fs::path dir = fs::temp_directory_path() / ("visibility_test_" + std::to_string(::getpid()));
  fs::create_directories(dir / "lessons" / "1_one");
  fs::create_directories(dir / "lessons" / "2_two");
  std::ofstream(dir / "lessons" / "1_one" / "lesson.json")
      << R"({"title": "One", "timed_visibility": "after_published", "check_visibility": {"a": "hidden"}})";
  std::ofstream(dir / "lessons" / "2_two" / "lesson.json") << R"({"title": "Two", "timed_visibility": "later"})";
  std::ofstream(dir / "recipe.json") << R"({"source_dir": ")" << dir.string() << R"(", "build_dir": "b", "student_dir": "s",
    "launcher": "", "cxx": "c++", "flags": [], "defines": [], "include_dirs": [], "link": [],
    "lessons": [{"number": 1, "folder": "1_one", "glue": [], "reference": "r", "checks": "c", "demo_target": "d"},
                {"number": 2, "folder": "2_two", "glue": [], "reference": "r", "checks": "c", "demo_target": "d"}]})";
  const Recipe recipe = Recipe::load(dir / "recipe.json");
  fs::remove_all(dir);
  EXPECT_EQ(recipe.lesson(1).problem, "");
  EXPECT_EQ(recipe.lesson(1).timed_visibility, "after_published");
  EXPECT_EQ(recipe.lesson(1).check_visibility.at("a"), "hidden");
  EXPECT_NE(recipe.lesson(2).problem.find("'timed_visibility' must be one of Gradescope's visibilities"),
            std::string::npos) << recipe.lesson(2).problem;
  EXPECT_NE(recipe.lesson(2).problem.find("got \"later\""), std::string::npos) << recipe.lesson(2).problem;
}

}  // namespace
