// The CUDA backend's kernels, one per dispatch stub (see backend/dispatch.h),
// as the CPU backend's backend/cpu/kernels.h. Each is a host function that
// launches on the device of its tensors, on the calling thread's current
// stream there, and returns before the GPU has run it. The arithmetic is the
// shared op structs of kernels/*.h; the .cu files beside this one hold only
// the loops (grid-stride, one generic block reduction), the launchers and the
// cuBLAS glue. Built only with a CUDA toolkit (TINY_HAVE_CUDA).
#pragma once

#include "backend/dispatch.h"

namespace tiny::cuda_backend {

// pointwise.cu
void unary_kernel(TensorIter& iter, kernels::UnaryKind kind, const kernels::OpParams& params);
void binary_kernel(TensorIter& iter, kernels::BinaryKind kind, const kernels::OpParams& params);
void where_kernel(TensorIter& iter);
void copy_kernel(TensorIter& iter);
void fill_kernel(TensorIter& iter, const Scalar& value);
void arange_kernel(const Tensor& out, double start, double step);
// reduce.cu
void reduce_kernel(ReduceIter& iter, kernels::ReduceKind kind);
void arg_reduce_kernel(ReduceIter& iter, bool is_max);
// gemm.cu (cuBLAS)
void gemm_kernel(Dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc);
// softmax.cu
void softmax_kernel(const Tensor& out, const Tensor& in, int64_t dim, bool log);
void softmax_backward_kernel(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim, bool log);
// loss.cu
void nll_forward_kernel(const Tensor& losses, const Tensor& log_probs, const Tensor& target, int64_t ignore_index);
void nll_backward_kernel(const Tensor& grad_input, const Tensor& grad_losses, const Tensor& target,
                         int64_t ignore_index);
// random.cu
void random_kernel(const Tensor& out, RandomKind kind, PhiloxState state, double a, double b);
// conv.cu
void im2col_kernel(const Tensor& cols, const Tensor& input, const kernels::Conv2dGeometry& geometry);
void col2im_kernel(const Tensor& grad_input, const Tensor& cols, const kernels::Conv2dGeometry& geometry);
void pool2d_kernel(const Tensor& out, const Tensor& indices, const Tensor& input,
                   const kernels::Pool2dGeometry& geometry);
void pool2d_backward_kernel(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                            const kernels::Pool2dGeometry& geometry);
// embedding.cu
void embedding_kernel(const Tensor& out, const Tensor& weight, const Tensor& indices);
void embedding_backward_kernel(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices,
                               int64_t padding_idx);
// optimizer.cu
void sgd_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                     const kernels::SgdParams& params);
void rmsprop_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& grad_avg,
                         const Tensor& momentum_buffer, const kernels::RmspropParams& params);
void adam_step_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                      const Tensor& max_exp_avg_sq, const kernels::AdamParams& params);
// amp.cu
void non_finite_check_and_unscale_kernel(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                         const Tensor& inv_scale);
void update_scale_kernel(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                         double growth_factor, double backoff_factor, int64_t growth_interval);

}  // namespace tiny::cuda_backend
