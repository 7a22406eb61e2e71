// CPU embedding lookup (a row gather) and its backward (a row scatter-add).
#include "backend/cpu/kernels.h"

namespace tiny::cpu {

void register_embedding_kernels() {
  // Filled in with the nn modules (Embedding).
}

}  // namespace tiny::cpu
