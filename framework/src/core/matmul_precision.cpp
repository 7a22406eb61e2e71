// torch.set_float32_matmul_precision: one process-wide setting, as PyTorch's
// (not thread-local: DataParallel's threads and the main thread agree).
#include "core/matmul_precision.h"

#include <atomic>
#include <string>

#include "tiny/error.h"
#include "tiny/matmul_precision.h"

namespace tiny {

namespace {

// 0: "highest", 1: "high", 2: "medium".
std::atomic<int> g_precision{0};
const char* const kNames[] = {"highest", "high", "medium"};

}  // namespace

void set_float32_matmul_precision(const std::string& precision) {
  for (int i = 0; i < 3; ++i) {
    if (precision == kNames[i]) {
      g_precision.store(i, std::memory_order_relaxed);
      return;
    }
  }
  TINY_THROW(ValueError, "set_float32_matmul_precision: unknown precision \"", precision,
             "\"; use \"highest\" (float32 products, the default), \"high\" or \"medium\" (TF32 tensor cores where "
             "the GPU has them), as torch.set_float32_matmul_precision");
}

std::string get_float32_matmul_precision() { return kNames[g_precision.load(std::memory_order_relaxed)]; }

namespace detail {
bool float32_matmul_allows_tf32() { return g_precision.load(std::memory_order_relaxed) != 0; }
}  // namespace detail

}  // namespace tiny
