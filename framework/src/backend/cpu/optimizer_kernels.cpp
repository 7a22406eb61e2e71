// CPU fused optimizer updates: one pass over param, grad and state per step.
#include "backend/cpu/kernels.h"

namespace tiny::cpu {

void register_optimizer_kernels() {
  // Filled in with tiny::optim (SGD, Adam, AdamW).
}

}  // namespace tiny::cpu
