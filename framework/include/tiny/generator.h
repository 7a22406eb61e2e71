/// @file generator.h
/// @brief Random number generators: a seed and a position in the Philox 4x32-10 stream.
///
/// A generator holds no random numbers, only where the next random op starts:
/// an op reserves the Philox counters it needs when it is queued and computes
/// its numbers from {seed, offset} on whatever backend runs it, so the same
/// seed gives the same numbers on the CPU, the emulator and CUDA, with any
/// number of threads (DESIGN.md section 5).
#pragma once

#include <cstdint>
#include <memory>

#include "tiny/device.h"

namespace tiny {

/// @brief The seed a generator starts from when none is given (PyTorch's default_rng_seed_val).
inline constexpr uint64_t default_rng_seed = 67280421310721ULL;

/// @brief A seed and an offset into the Philox stream.
struct PhiloxState {
  /// @brief The Philox key: low 32 bits are key word 0, high 32 bits key word 1.
  uint64_t seed;
  /// @brief The first Philox counter not yet handed out.
  uint64_t offset;
};

/// @brief A Philox random number generator; a handle, so copies share one state (like passing a torch.Generator around).
///
/// Every member is thread-safe.
class Generator {
 public:
  /// @brief Creates a generator at the start of `seed`'s stream.
  explicit Generator(uint64_t seed = default_rng_seed);

  /// @brief Restarts the generator at the start of `seed`'s stream (the offset goes back to 0).
  void manual_seed(uint64_t seed);

  /// @brief The seed the generator was created or last seeded with.
  uint64_t initial_seed() const;

  /// @brief The current seed and offset, to save and later restore with set_state().
  PhiloxState get_state() const;

  /// @brief Restores a state returned by get_state(), so the following random ops repeat.
  void set_state(PhiloxState state);

  /// @brief Reserves `counters` Philox counters: returns {seed, offset before} and advances the offset.
  ///
  /// Concurrent callers get disjoint ranges. Ops compute `counters` with
  /// `kernels::philox_counters_needed(n, draws_per_element)`.
  PhiloxState reserve(uint64_t counters);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// @brief The process's default CPU generator; created on first use and never destroyed.
Generator& default_cpu_generator();

/// @brief The default generator of `device`: the CPU's, or one per GPU (PyTorch's `torch.cuda.default_generators`).
///
/// `manual_seed` seeds all of them. Each device draws its own stream, so CPU
/// draws never shift a GPU's dropout masks; the same seed and offset give the
/// same numbers on every device (Philox is counter-based).
Generator& default_generator(const Device& device);

/// @brief Seeds every default generator (the CPU one and each registered device one), resetting their offsets.
void manual_seed(uint64_t seed);

namespace detail {
/// @brief Adds a device's default generator to the set tiny::manual_seed() seeds.
///
/// For device backends, called once when a device's default generator is
/// created. If tiny::manual_seed() was already called, `generator` is seeded
/// with that seed at once, so a device first used after manual_seed() still
/// follows it.
void register_default_generator(Generator generator);
}  // namespace detail

}  // namespace tiny
