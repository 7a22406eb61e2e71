// Fills the CUDA column of every dispatch stub. Function pointers only: no
// CUDA call happens here, so registration (and the test that lists the stubs
// each backend has) works on machines without a GPU.
#include "backend/cuda/kernels.h"

namespace tiny {

void register_cuda_kernels() {
  constexpr int cuda = static_cast<int>(Backend::CUDA);
  unary_stub.table[cuda] = &cuda_backend::unary_kernel;
  binary_stub.table[cuda] = &cuda_backend::binary_kernel;
  where_stub.table[cuda] = &cuda_backend::where_kernel;
  copy_stub.table[cuda] = &cuda_backend::copy_kernel;
  fill_stub.table[cuda] = &cuda_backend::fill_kernel;
  arange_stub.table[cuda] = &cuda_backend::arange_kernel;
  reduce_stub.table[cuda] = &cuda_backend::reduce_kernel;
  arg_reduce_stub.table[cuda] = &cuda_backend::arg_reduce_kernel;
  gemm_stub.table[cuda] = &cuda_backend::gemm_kernel;
  softmax_stub.table[cuda] = &cuda_backend::softmax_kernel;
  softmax_backward_stub.table[cuda] = &cuda_backend::softmax_backward_kernel;
  nll_forward_stub.table[cuda] = &cuda_backend::nll_forward_kernel;
  nll_backward_stub.table[cuda] = &cuda_backend::nll_backward_kernel;
  random_stub.table[cuda] = &cuda_backend::random_kernel;
  im2col_stub.table[cuda] = &cuda_backend::im2col_kernel;
  col2im_stub.table[cuda] = &cuda_backend::col2im_kernel;
  pool2d_stub.table[cuda] = &cuda_backend::pool2d_kernel;
  pool2d_backward_stub.table[cuda] = &cuda_backend::pool2d_backward_kernel;
  embedding_stub.table[cuda] = &cuda_backend::embedding_kernel;
  embedding_backward_stub.table[cuda] = &cuda_backend::embedding_backward_kernel;
  sgd_step_stub.table[cuda] = &cuda_backend::sgd_step_kernel;
  adam_step_stub.table[cuda] = &cuda_backend::adam_step_kernel;
  rmsprop_step_stub.table[cuda] = &cuda_backend::rmsprop_step_kernel;
  non_finite_check_and_unscale_stub.table[cuda] = &cuda_backend::non_finite_check_and_unscale_kernel;
  update_scale_stub.table[cuda] = &cuda_backend::update_scale_kernel;
}

}  // namespace tiny
