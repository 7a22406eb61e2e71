/// @file cuda_grading.h
/// @brief For the workbook's grader (grader/harness/runner_main.cpp): the GPU
/// counters it grades are kept from the code it grades, which runs in the same
/// process (grader/README.md, "How a check runs", says what that does not stop).
///
/// Not part of tiny.h: a lesson's code has no use for it.
#pragma once

#include <cstdint>

namespace tiny::cuda::grading {

/// @brief From now on tiny::cuda::reset_device_counters and
/// tiny::cuda::reset_peak_memory_stats change nothing and count the attempt
/// (refused_counter_resets), for the rest of the process.
void refuse_counter_resets();

/// @brief The attempts refused since refuse_counter_resets(), per function.
struct RefusedResets {
  uint64_t reset_device_counters = 0;    ///< calls of tiny::cuda::reset_device_counters
  uint64_t reset_peak_memory_stats = 0;  ///< calls of tiny::cuda::reset_peak_memory_stats
};
/// @brief How many resets were refused so far.
RefusedResets refused_counter_resets();

/// @brief tiny::cuda::reset_device_counters for the grader's own code (a lesson's glue), refused or not.
void reset_device_counters(int index);
/// @brief tiny::cuda::reset_peak_memory_stats for the grader's own code (a lesson's glue), refused or not.
void reset_peak_memory_stats(int index);

}  // namespace tiny::cuda::grading
