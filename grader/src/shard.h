// Grading a class on several machines: which submissions a shard of a batch
// grades (--shard i/n, or a SLURM array task's or a Kubernetes indexed Job's
// index), and `grade merge`, which combines the shards' out folders into one
// gradebook.csv and index.html, as one batch would have written them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "grade.h"

namespace workbook {

/// @brief One part of a class: shard `index` of `count`, counted from 0 as a
/// SLURM array started with --array=0-(count-1) and a Kubernetes indexed Job
/// (JOB_COMPLETION_INDEX) count theirs.
struct Shard {
  int index = 0;       ///< 0 .. count-1
  int count = 1;       ///< 1: the whole class
  std::string source;  ///< where it came from, for messages: "--shard 1/2", "SLURM_ARRAY_TASK_ID=1, ..."
  /// @brief "1/2" (0-based, as --shard takes it).
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};

/// @brief Parses --shard's "i/n" (0 <= i < n <= 10000); throws tiny::ValueError
/// naming the value and what to give instead ("3/2", "0/0", "a/b", "1/").
Shard parse_shard(const std::string& text);

/// @brief The shard the environment gives when --shard is not: a SLURM array
/// task's (SLURM_ARRAY_TASK_ID less SLURM_ARRAY_TASK_MIN, divided by
/// SLURM_ARRAY_TASK_STEP, of SLURM_ARRAY_TASK_COUNT; `count` when given
/// replaces the count), else a Kubernetes indexed Job's (JOB_COMPLETION_INDEX,
/// of `count`, which it needs: Kubernetes does not say how many there are).
/// nullopt when neither is set. A variable set to what is not a number, an
/// index outside the count, or an array that is not one range of indices
/// throws tiny::ValueError naming the variable, its value and the fix.
/// `env` reads a variable (std::getenv in the program, a map in tests).
std::optional<Shard> shard_from_environment(const std::function<const char*(const char*)>& env,
                                            std::optional<int> count);

/// @brief The part of `submissions` (already in the batch's order: sorted by
/// name) that `shard` grades: the ones at positions index, index+count,
/// index+2*count, ... Every shard that sees the same batch folder makes the
/// same split, and the shards together grade each submission exactly once.
std::vector<std::filesystem::path> shard_of(const std::vector<std::filesystem::path>& submissions, const Shard& shard);

/// @brief What a batch records of itself in OUT/shard.json, for `grade merge`
/// to tell a finished shard from one cut short, and for `--resume` to keep the
/// batch's seed when a kill came before the gradebook's first row (0: none).
nlohmann::json shard_record(const Shard& shard, const std::filesystem::path& batch, size_t class_size,
                            const std::vector<std::string>& names, const std::vector<std::string>& skipped,
                            uint64_t seed = 0);

/// @brief The result of combining shards: the merged gradebook's header and rows (sorted by submission, the
/// batch's order), the folders each submission's files are in, and what was left out of the batch.
struct Merged {
  std::string header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::filesystem::path> folders;  ///< per row: the shard folder holding that submission's files
  std::vector<std::string> skipped;            ///< what the batch left out (once each)
  std::vector<uint64_t> seeds;                 ///< the seeds the rows were graded with, each once
};

/// @brief Reads the shards' gradebook.csv and shard.json. Throws tiny::ValueError
/// naming the folders when a folder has no gradebook, the headers differ, a
/// submission is in two shards, a shard's gradebook is incomplete (the
/// submissions it lacks, and to run it again with --resume), the shards are of
/// different splits, or one of the split is missing.
Merged read_shards(const std::vector<std::filesystem::path>& dirs);

/// @brief `grade merge DIR... --out OUT`: writes OUT/gradebook.csv (the rows of
/// every shard, in the batch's order, as one batch with --jobs 1 writes them),
/// copies each submission's folder into OUT, writes OUT/index.html and prints
/// the class table. Returns the exit status.
int merge_shards(const Recipe& recipe, const std::vector<std::filesystem::path>& dirs,
                 const std::filesystem::path& out, const std::string& warning);

}  // namespace workbook
