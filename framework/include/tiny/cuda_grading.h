/// @file cuda_grading.h
/// @brief For the workbook's grader (grader/harness/runner_main.cpp): the GPU
/// counters it grades are kept from the code it grades, which runs in the same
/// process (grader/README.md, "How a check runs", says what that does not stop).
///
/// Not part of tiny.h: a lesson's code has no use for it.
#pragma once

#include <cstdint>
#include <string>

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

/// @brief The performance model the emulated GPU of this process times its
/// work on, as "NAME DIGEST" (the model's name, and a digest of every figure
/// it was built from: two models with the same digest give the same times);
/// "" without an emulated GPU. The grader compares it with
/// emulated_gpu_model(name_or_path) of the model it set: code that changes
/// TINY_EMULATED_GPU_MODEL before the emulator reads it (a static initializer
/// can) changes it.
std::string emulated_gpu_model();
/// @brief The same for a model TINY_EMULATED_GPU_MODEL may name (a model's
/// name or a model file's path; "" for the default, h100-sxm), without an
/// emulated GPU. Throws tiny::ValueError as TINY_EMULATED_GPU_MODEL would.
std::string emulated_gpu_model(const std::string& name_or_path);

/// @brief tiny::cuda::reset_device_counters for the grader's own code (a lesson's glue), refused or not.
void reset_device_counters(int index);
/// @brief tiny::cuda::reset_peak_memory_stats for the grader's own code (a lesson's glue), refused or not.
void reset_peak_memory_stats(int index);

}  // namespace tiny::cuda::grading
