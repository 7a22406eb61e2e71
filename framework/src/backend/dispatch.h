// Kernel dispatch: each op family has one stub holding a function per backend.
// Ops call `stub(backend)(args...)`; each backend fills its column of every
// stub in one registration function, so a test can list any op a backend lacks.
#pragma once

#include <vector>

#include "core/tensor_iterator.h"
#include "kernels/conv_ops.h"
#include "kernels/optimizer_ops.h"
#include "kernels/pointwise_ops.h"
#include "kernels/reduce_ops.h"
#include "tiny/generator.h"
#include "tiny/scalar.h"

namespace tiny {

enum class Backend : uint8_t { CPU = 0, Emulated = 1, CUDA = 2 };
constexpr int kNumBackends = 3;
const char* backend_name(Backend backend);
// The backend that runs ops on `device`.
Backend backend_of(const Device& device);

struct DispatchStubBase {
  explicit DispatchStubBase(const char* stub_name);
  virtual ~DispatchStubBase() = default;
  virtual bool has(Backend backend) const = 0;
  const char* name;
  static std::vector<DispatchStubBase*>& all();  // every stub, for the registration test
};

void ensure_kernels_registered();

template <typename Fn>
struct DispatchStub final : DispatchStubBase {
  explicit DispatchStub(const char* stub_name) : DispatchStubBase(stub_name) {}
  bool has(Backend backend) const override { return table[static_cast<int>(backend)] != nullptr; }
  Fn operator()(Backend backend) const {
    ensure_kernels_registered();
    Fn fn = table[static_cast<int>(backend)];
    TINY_CHECK(fn != nullptr, NotImplemented, "the '", name, "' kernel is not implemented for the ",
               backend_name(backend), " backend");
    return fn;
  }
  Fn operator()(const Device& device) const { return (*this)(backend_of(device)); }
  Fn table[kNumBackends] = {};
};

enum class RandomKind : uint8_t { Uniform, Normal, Randint, Bernoulli };

using UnaryFn = void (*)(TensorIter& iter, kernels::UnaryKind kind, const kernels::OpParams& params);
using BinaryFn = void (*)(TensorIter& iter, kernels::BinaryKind kind, const kernels::OpParams& params);
using IterFn = void (*)(TensorIter& iter);
using FillFn = void (*)(TensorIter& iter, const Scalar& value);
using ArangeFn = void (*)(const Tensor& out, double start, double step);
using ReduceFn = void (*)(ReduceIter& iter, kernels::ReduceKind kind);
using ArgReduceFn = void (*)(ReduceIter& iter, bool is_max);
// Column-major GEMM with cuBLAS's arguments: C = alpha * op(A) * op(B) + beta * C.
using GemmFn = void (*)(Dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                        const void* a, int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc);
using SoftmaxFn = void (*)(const Tensor& out, const Tensor& in, int64_t dim, bool log);
using SoftmaxBackwardFn = void (*)(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim,
                                   bool log);
using NllForwardFn = void (*)(const Tensor& losses, const Tensor& log_probs, const Tensor& target,
                              int64_t ignore_index);
using NllBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_losses, const Tensor& target,
                               int64_t ignore_index);
using RandomFn = void (*)(const Tensor& out, RandomKind kind, PhiloxState state, double a, double b);
// Convolution as im2col + GEMM (kernels/conv_ops.h): cols [C*KH*KW, B*OH*OW]
// from a contiguous input [B, C, H, W], and back (col2im overwrites grad_input).
using Im2colFn = void (*)(const Tensor& cols, const Tensor& input, const kernels::Conv2dGeometry& geometry);
using Col2imFn = void (*)(const Tensor& grad_input, const Tensor& cols, const kernels::Conv2dGeometry& geometry);
// 2-D max/average/adaptive-average pooling of contiguous [N*C, H, W] planes;
// `indices` (int64, like `out`) is written by max pooling only (undefined otherwise).
using Pool2dFn = void (*)(const Tensor& out, const Tensor& indices, const Tensor& input,
                          const kernels::Pool2dGeometry& geometry);
// grad_input (overwritten) from grad_out, and max pooling's indices.
using Pool2dBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                                  const kernels::Pool2dGeometry& geometry);
// out[i, :] = weight[indices[i], :] (indices int64, any shape flattened; out contiguous [n, dim]).
using EmbeddingFn = void (*)(const Tensor& out, const Tensor& weight, const Tensor& indices);
// grad_weight[indices[i], :] += grad_out[i, :] (deterministic order; padding_idx rows skipped when >= 0).
using EmbeddingBackwardFn = void (*)(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices,
                                     int64_t padding_idx);
// One fused SGD update of `param` in place (momentum_buffer undefined when momentum == 0).
using SgdStepFn = void (*)(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                           const kernels::SgdParams& params);
// One fused Adam/AdamW update of `param` in place (max_exp_avg_sq undefined unless amsgrad).
using AdamStepFn = void (*)(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                            const Tensor& max_exp_avg_sq, const kernels::AdamParams& params);
// One fused RMSprop update of `param` in place (grad_avg undefined unless centered,
// momentum_buffer undefined unless momentum > 0).
using RmspropStepFn = void (*)(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                               const Tensor& grad_avg, const Tensor& momentum_buffer,
                               const kernels::RmspropParams& params);

// Mixed precision (PyTorch's _amp_foreach_non_finite_check_and_unscale_): every
// grad (contiguous, floating, on one device) *= inv_scale[0] in place, and
// found_inf[0] = 1 when any element was inf or NaN (never reset to 0). The
// scalars are float32 [1] tensors on the grads' device, read by the kernel.
using NonFiniteCheckAndUnscaleFn = void (*)(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                            const Tensor& inv_scale);
// PyTorch's _amp_update_scale_ on scale (float32 [1]), growth_tracker (int64 [1]), found_inf (float32 [1]).
using UpdateScaleFn = void (*)(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                               double growth_factor, double backoff_factor, int64_t growth_interval);

extern DispatchStub<UnaryFn> unary_stub;
extern DispatchStub<BinaryFn> binary_stub;
extern DispatchStub<IterFn> where_stub;
extern DispatchStub<IterFn> copy_stub;  // converts dtypes; same device
extern DispatchStub<FillFn> fill_stub;
extern DispatchStub<ArangeFn> arange_stub;
extern DispatchStub<ReduceFn> reduce_stub;
extern DispatchStub<ArgReduceFn> arg_reduce_stub;
extern DispatchStub<GemmFn> gemm_stub;
extern DispatchStub<SoftmaxFn> softmax_stub;
extern DispatchStub<SoftmaxBackwardFn> softmax_backward_stub;
extern DispatchStub<NllForwardFn> nll_forward_stub;
extern DispatchStub<NllBackwardFn> nll_backward_stub;
extern DispatchStub<RandomFn> random_stub;
extern DispatchStub<Im2colFn> im2col_stub;
extern DispatchStub<Col2imFn> col2im_stub;
extern DispatchStub<Pool2dFn> pool2d_stub;
extern DispatchStub<Pool2dBackwardFn> pool2d_backward_stub;
extern DispatchStub<EmbeddingFn> embedding_stub;
extern DispatchStub<EmbeddingBackwardFn> embedding_backward_stub;
extern DispatchStub<SgdStepFn> sgd_step_stub;
extern DispatchStub<AdamStepFn> adam_step_stub;
extern DispatchStub<RmspropStepFn> rmsprop_step_stub;
extern DispatchStub<NonFiniteCheckAndUnscaleFn> non_finite_check_and_unscale_stub;
extern DispatchStub<UpdateScaleFn> update_scale_stub;

// Filled by each backend.
void register_cpu_kernels();
void register_emulated_kernels();
// backend/cuda/register.cpp; only in builds with CUDA (TINY_HAVE_CUDA).
void register_cuda_kernels();

}  // namespace tiny
