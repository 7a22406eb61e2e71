// The CPU backend's kernels, one per dispatch stub (see backend/dispatch.h).
#pragma once

#include "backend/dispatch.h"

namespace tiny::cpu {

void unary_kernel(TensorIter& iter, kernels::UnaryKind kind, const kernels::OpParams& params);
void binary_kernel(TensorIter& iter, kernels::BinaryKind kind, const kernels::OpParams& params);
void where_kernel(TensorIter& iter);
void copy_kernel(TensorIter& iter);
void fill_kernel(TensorIter& iter, const Scalar& value);
void arange_kernel(const Tensor& out, double start, double step);
void reduce_kernel(ReduceIter& iter, kernels::ReduceKind kind);
void arg_reduce_kernel(ReduceIter& iter, bool is_max);
void gemm_kernel(Dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                 const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc);
void softmax_kernel(const Tensor& out, const Tensor& in, int64_t dim, bool log);
void softmax_backward_kernel(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim, bool log);
void nll_forward_kernel(const Tensor& losses, const Tensor& log_probs, const Tensor& target, int64_t ignore_index);
void nll_backward_kernel(const Tensor& grad_input, const Tensor& grad_losses, const Tensor& target,
                         int64_t ignore_index);
void random_kernel(const Tensor& out, RandomKind kind, PhiloxState state, double a, double b);

// Families whose kernels live in their own files register themselves.
void register_embedding_kernels();  // embedding_kernels.cpp
void register_optimizer_kernels();  // optimizer_kernels.cpp
void register_amp_kernels();        // amp_kernels.cpp
void register_conv_kernels();       // conv_kernels.cpp

}  // namespace tiny::cpu
