// A class graded in parts (issue 20 item 4): --shard's values, the part the
// environment of a SLURM array task or a Kubernetes indexed Job gives, the
// split of a class, and grade merge's reading of the parts, errors included.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gradebook.h"
#include "shard.h"

namespace {

namespace fs = std::filesystem;
using namespace workbook;

// The error's text when `f` throws, "" when it does not.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Shard, IndexAndCountCountedFromZero) {
  const Shard a = parse_shard("0/2"), b = parse_shard("1/2");
  EXPECT_EQ(a.index, 0);
  EXPECT_EQ(b.index, 1);
  EXPECT_EQ(b.count, 2);
  EXPECT_EQ(b.text(), "1/2");
  EXPECT_EQ(parse_shard("0/1").count, 1);
}

TEST(Shard, BadValuesAreRefusedNamingTheValueAndTheFix) {
  for (const std::string bad : {"3/2", "2/2", "0/0", "a/b", "1/", "/2", "-1/2", "1", "1/2/3", "0/99999", " 1/2"}) {
    const std::string e = error_of([&]() { parse_shard(bad); });
    ASSERT_FALSE(e.empty()) << bad << " was taken";
    EXPECT_NE(e.find("--shard " + bad), std::string::npos) << e;
    EXPECT_NE(e.find("INDEX/COUNT"), std::string::npos) << e;
  }
  EXPECT_NE(error_of([]() { parse_shard("3/2"); }).find("they are 0 to 1"), std::string::npos);
}

// An environment of these variables only.
std::function<const char*(const char*)> env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    const auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST(ShardFromEnvironment, NothingSetIsTheWholeClass) {
  EXPECT_FALSE(shard_from_environment(env({}), std::nullopt).has_value());
}

TEST(ShardFromEnvironment, ASlurmArrayTaskCountedFromItsFirstIndex) {
  auto s = shard_from_environment(
      env({{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_COUNT", "2"}}), std::nullopt);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->text(), "1/2");
  EXPECT_NE(s->source.find("SLURM_ARRAY_TASK_ID=1"), std::string::npos);
  // --array=1-3: task 3 is the third part, 2/3.
  s = shard_from_environment(
      env({{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_MIN", "1"}, {"SLURM_ARRAY_TASK_COUNT", "3"}}), std::nullopt);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->text(), "2/3");
  // --array=10-14:2 (10, 12, 14): 14 is 2/3.
  s = shard_from_environment(env({{"SLURM_ARRAY_TASK_ID", "14"}, {"SLURM_ARRAY_TASK_MIN", "10"},
                                  {"SLURM_ARRAY_TASK_STEP", "2"}, {"SLURM_ARRAY_TASK_COUNT", "3"}}),
                             std::nullopt);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->text(), "2/3");
  // --shard-count replaces SLURM's count.
  s = shard_from_environment(env({{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_COUNT", "2"}}), 4);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->text(), "0/4");
}

TEST(ShardFromEnvironment, AKubernetesIndexedJobNeedsItsCount) {
  auto s = shard_from_environment(env({{"JOB_COMPLETION_INDEX", "2"}}), 3);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->text(), "2/3");
  const std::string e = error_of([]() { shard_from_environment(env({{"JOB_COMPLETION_INDEX", "2"}}), std::nullopt); });
  EXPECT_NE(e.find("JOB_COMPLETION_INDEX=2"), std::string::npos) << e;
  EXPECT_NE(e.find("--shard-count"), std::string::npos) << e;
  EXPECT_NE(error_of([]() { shard_from_environment(env({{"JOB_COMPLETION_INDEX", "3"}}), 3); }).find("parts 0 to 2"),
            std::string::npos);
}

TEST(ShardFromEnvironment, GarbageAndIndicesOutsideTheArrayAreErrorsNamingVariableValueAndFix) {
  struct Case {
    std::map<std::string, std::string> vars;
    std::string named, fix;
  };
  const std::vector<Case> cases = {
      {{{"SLURM_ARRAY_TASK_ID", "abc"}, {"SLURM_ARRAY_TASK_COUNT", "2"}}, "SLURM_ARRAY_TASK_ID=\"abc\"", "--shard INDEX/COUNT"},
      {{{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "two"}}, "SLURM_ARRAY_TASK_COUNT=\"two\"", "--shard INDEX/COUNT"},
      {{{"SLURM_ARRAY_TASK_ID", "5"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_COUNT", "2"}},
       "SLURM_ARRAY_TASK_ID=5", "--array=0-1"},
      {{{"SLURM_ARRAY_TASK_ID", "1"}}, "SLURM_ARRAY_TASK_ID=1", "--shard-count"},
      {{{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_MIN", "1"}, {"SLURM_ARRAY_TASK_COUNT", "2"}},
       "SLURM_ARRAY_TASK_ID=0", "--array=0-N"},
      {{{"JOB_COMPLETION_INDEX", "-1"}}, "JOB_COMPLETION_INDEX=\"-1\"", "--shard INDEX/COUNT"},
  };
  for (const Case& c : cases) {
    const std::string e = error_of([&]() { shard_from_environment(env(c.vars), std::nullopt); });
    ASSERT_FALSE(e.empty()) << c.named << " was taken";
    EXPECT_NE(e.find(c.named), std::string::npos) << e;
    EXPECT_NE(e.find(c.fix), std::string::npos) << e;
  }
}

TEST(Shard, EveryShardTakesItsOwnSubmissionsAndTogetherTheyTakeEachOnce) {
  std::vector<fs::path> all;
  for (const char* n : {"ada", "ben", "cy", "dee", "eve", "fay", "gus"}) all.push_back(fs::path("/batch") / n);
  for (int count : {1, 2, 3, 7, 9}) {
    std::multiset<fs::path> seen;
    for (int i = 0; i < count; ++i) {
      Shard s;
      s.index = i, s.count = count;
      const std::vector<fs::path> part = shard_of(all, s);
      EXPECT_EQ(part, shard_of(all, s)) << "the same split every time";
      EXPECT_TRUE(std::is_sorted(part.begin(), part.end()));
      // Balanced: no part has more than one more than another.
      EXPECT_LE(part.size(), (all.size() + count - 1) / count);
      seen.insert(part.begin(), part.end());
    }
    EXPECT_EQ(std::vector<fs::path>(seen.begin(), seen.end()), all) << count << " shards";
  }
  Shard second;
  second.index = 1, second.count = 2;
  EXPECT_EQ(shard_of(all, second), (std::vector<fs::path>{"/batch/ben", "/batch/dee", "/batch/fay"}));
}

// ---------------------------------------------------------------- merge

class Merge : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/workbook-merge-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root = tmpl;
    one.number = 1, one.title = "Device check", one.folder = "1_device_check";
    lessons = {&one};
  }
  void TearDown() override { fs::remove_all(root); }

  std::string row(const std::string& name, const std::string& status, uint64_t seed = 7) {
    LessonResult r;
    r.lesson = &one;
    r.status = status;
    r.points = status == "passed" ? 5 : 0;
    r.max_points = 5;
    return gradebook_row(name, {r}, seed, 3);
  }
  // A shard's out folder: its gradebook with `graded` and shard.json saying it was to grade `assigned`.
  fs::path shard(const std::string& folder, int index, int count, const std::vector<std::string>& graded,
                 std::vector<std::string> assigned = {}) {
    const fs::path dir = root / folder;
    fs::create_directories(dir);
    std::string text = gradebook_header(lessons);
    for (const std::string& n : graded) text += row(n, n[0] < 'm' ? "passed" : "in progress");
    std::ofstream(dir / "gradebook.csv") << text;
    if (assigned.empty()) assigned = graded;
    Shard s;
    s.index = index, s.count = count;
    std::ofstream(dir / "shard.json") << shard_record(s, "/batch", 4, assigned, {"notes.txt (a file)"}).dump();
    return dir;
  }

  fs::path root;
  Lesson one;
  std::vector<const Lesson*> lessons;
};

TEST_F(Merge, TheShardsRowsInTheBatchsOrderAsOneBatchWritesThem) {
  // The split of ada, ben, cy, zed into two: 0/2 has ada and cy, 1/2 ben and zed.
  const fs::path a = shard("shard-0", 0, 2, {"cy", "ada"}), b = shard("shard-1", 1, 2, {"zed", "ben"});
  const Merged m = read_shards({b, a});
  ASSERT_EQ(m.rows.size(), 4u);
  write_gradebook(root / "merged.csv", m.header, m.rows);
  std::string whole = gradebook_header(lessons);
  for (const char* n : {"ada", "ben", "cy", "zed"}) whole += row(n, n[0] < 'm' ? "passed" : "in progress");
  std::ifstream in(root / "merged.csv");
  std::stringstream merged;
  merged << in.rdbuf();
  EXPECT_EQ(merged.str(), whole);
  EXPECT_EQ(m.folders[1], b / "ben");
  EXPECT_EQ(m.skipped, std::vector<std::string>{"notes.txt (a file)"});
}

TEST_F(Merge, AStudentInTwoShardsIsAnErrorNamingBoth) {
  const fs::path a = shard("shard-0", 0, 2, {"ada", "cy"}), b = shard("shard-1", 1, 2, {"ben", "cy"});
  const std::string e = error_of([&]() { read_shards({a, b}); });
  EXPECT_NE(e.find("submission cy is in two shards"), std::string::npos) << e;
  EXPECT_NE(e.find(a.string() + "/gradebook.csv"), std::string::npos) << e;
  EXPECT_NE(e.find(b.string() + "/gradebook.csv"), std::string::npos) << e;
}

TEST_F(Merge, AShardCutShortIsNamedWithWhatItLacks) {
  const fs::path a = shard("shard-0", 0, 2, {"ada"}, {"ada", "cy"}), b = shard("shard-1", 1, 2, {"ben"});
  const std::string e = error_of([&]() { read_shards({a, b}); });
  EXPECT_NE(e.find(a.string() + "'s gradebook is incomplete"), std::string::npos) << e;
  EXPECT_NE(e.find("missing: cy"), std::string::npos) << e;
  EXPECT_NE(e.find("--resume"), std::string::npos) << e;
}

TEST_F(Merge, EveryShardCutShortIsNamedAtOnce) {
  // Two of three shards were killed: one merge attempt must name both, so the
  // instructor resumes both before merging again.
  const fs::path a = shard("shard-0", 0, 3, {"ada"}, {"ada", "cy"}), b = shard("shard-1", 1, 3, {"ben"});
  const fs::path c = shard("shard-2", 2, 3, {}, {"dee", "eve"});
  const std::string e = error_of([&]() { read_shards({a, b, c}); });
  EXPECT_NE(e.find("2 shards were cut short"), std::string::npos) << e;
  EXPECT_NE(e.find(a.string() + "'s gradebook is incomplete: shard 0/3 has 1 of its 2"), std::string::npos) << e;
  EXPECT_NE(e.find(c.string() + "'s gradebook is incomplete: shard 2/3 has 0 of its 2"), std::string::npos) << e;
  EXPECT_NE(e.find("missing: dee, eve"), std::string::npos) << e;
  EXPECT_EQ(e.find(b.string() + "'s gradebook"), std::string::npos) << "a finished shard named as cut short:\n" << e;
}

TEST_F(Merge, AMissingShardDifferentSplitsAndOtherColumnsAreRefused) {
  const fs::path a = shard("shard-0", 0, 2, {"ada"});
  std::string e = error_of([&]() { read_shards({a}); });
  EXPECT_NE(e.find("shard 1/2 of the split is not among the folders given"), std::string::npos) << e;
  const fs::path c = shard("three", 1, 3, {"ben"});
  e = error_of([&]() { read_shards({a, c}); });
  EXPECT_NE(e.find("is a part of 3"), std::string::npos) << e;
  const fs::path d = shard("again", 0, 2, {"cy"});
  e = error_of([&]() { read_shards({a, d}); });
  EXPECT_NE(e.find("are both shard 0/2"), std::string::npos) << e;
  const fs::path other = shard("other", 1, 2, {"ben"});
  std::ofstream(other / "gradebook.csv") << "submission,total,maximum,percent,seed,seconds,problems\n";
  e = error_of([&]() { read_shards({a, other}); });
  EXPECT_NE(e.find("has other columns than"), std::string::npos) << e;
  e = error_of([&]() { read_shards({root / "nowhere"}); });
  EXPECT_NE(e.find("holds no gradebook.csv"), std::string::npos) << e;
}

}  // namespace
