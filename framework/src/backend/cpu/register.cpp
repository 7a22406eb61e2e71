#include "backend/cpu/kernels.h"

namespace tiny {

void register_cpu_kernels() {
  constexpr int cpu = static_cast<int>(Backend::CPU);
  unary_stub.table[cpu] = &cpu::unary_kernel;
  binary_stub.table[cpu] = &cpu::binary_kernel;
  where_stub.table[cpu] = &cpu::where_kernel;
  copy_stub.table[cpu] = &cpu::copy_kernel;
  fill_stub.table[cpu] = &cpu::fill_kernel;
  arange_stub.table[cpu] = &cpu::arange_kernel;
  reduce_stub.table[cpu] = &cpu::reduce_kernel;
  arg_reduce_stub.table[cpu] = &cpu::arg_reduce_kernel;
  gemm_stub.table[cpu] = &cpu::gemm_kernel;
  softmax_stub.table[cpu] = &cpu::softmax_kernel;
  softmax_backward_stub.table[cpu] = &cpu::softmax_backward_kernel;
  nll_forward_stub.table[cpu] = &cpu::nll_forward_kernel;
  nll_backward_stub.table[cpu] = &cpu::nll_backward_kernel;
  random_stub.table[cpu] = &cpu::random_kernel;
  cpu::register_embedding_kernels();
  cpu::register_optimizer_kernels();
  cpu::register_amp_kernels();
  cpu::register_conv_kernels();
}

}  // namespace tiny
