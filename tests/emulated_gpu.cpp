// Linked into tiny_tests and grader_tests: their tests check the emulated GPU
// (its modes, capacity, counters, its two devices), so they use it also on a
// machine with an NVIDIA GPU, however they are started (ctest, or by hand), and
// so do the processes they start. tests/gpu/ (label gpu) checks the real GPU.
// A TINY_FORCE_EMULATED_GPU already in the environment wins.
#include <cstdlib>

namespace {
// Before main: tiny picks its GPU runtime on first use, never before main.
const bool forced = ::setenv("TINY_FORCE_EMULATED_GPU", "1", /*overwrite=*/0) == 0;
}  // namespace
