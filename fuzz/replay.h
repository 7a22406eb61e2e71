// Replays a fuzz target's committed corpus (fuzz/corpus/<target>/) in the ordinary test suites:
// ok_* files must be accepted, bad_* files rejected with a tiny::Error, and every other file
// (inputs libFuzzer found, crash regressions) may go either way but must not crash.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common.h"
#include "tiny/error.h"

namespace tiny_fuzz {

using Target = void (*)(const uint8_t*, size_t);

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `target` over every file of `dir`; returns how many files there were.
inline size_t replay_corpus(const std::filesystem::path& dir, Target target) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    const std::string name = file.filename().string();
    const std::vector<uint8_t> bytes = read_bytes(file);
    std::string outcome = "accepted";
    try {
      target(bytes.data(), bytes.size());
    } catch (const tiny::Error& e) {
      outcome = std::string("tiny::Error: ") + e.what();
    } catch (const Bug& e) {
      outcome = "BUG: " + e.what;
      ADD_FAILURE() << name << ": " << e.what;
    } catch (const std::exception& e) {
      outcome = std::string("std::exception: ") + e.what();
    }
    if (name.rfind("ok_", 0) == 0) {
      EXPECT_EQ(outcome, "accepted") << name << " is a valid input";
    } else if (name.rfind("bad_", 0) == 0) {
      EXPECT_EQ(outcome.rfind("tiny::Error: ", 0), 0u) << name << " must be rejected with a tiny::Error, got " << outcome;
    }
  }
  return files.size();
}

}  // namespace tiny_fuzz
