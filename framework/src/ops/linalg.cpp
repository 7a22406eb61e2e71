// Matrix products. Tensors are row-major; the GEMM stub takes cuBLAS's
// column-major arguments, so C = A @ B is computed as C^T = B^T @ A^T, and a
// transposed view is passed as a transpose flag rather than copied.
#include "amp/autocast_policy.h"
#include "backend/define_dispatch.h"
#include "backend/stubs/gemm.h"
#include "core/matmul_precision.h"
#include "ops/op_helpers.h"

// The kernels these ops call, each with the work of one call on the modelled GPU.
namespace tiny {
namespace {
// TF32 changes the modelled time and the counters only: the emulated GPU computes in float32.
KernelWork gemm_work(Dtype dtype, bool, bool, int64_t m, int64_t n, int64_t k, double, const void*, int64_t,
                     const void*, int64_t, double beta, void*, int64_t) {
  const bool tf32 = dtype == Dtype::Float32 && detail::float32_matmul_allows_tf32();
  return {"gemm", gpu::model::gemm_cost(dtype, m, n, k, beta != 0, tf32)};
}
}  // namespace

TINY_DEFINE_DISPATCH(gemm_stub, "gemm", gemm_work);
}  // namespace tiny

namespace tiny {

using autograd::BackwardArgs;
using autograd::record;
using autograd::save;
using autograd::save_if;
using autograd::should_record;

namespace {

// How a row-major [rows, cols] matrix is handed to a column-major GEMM as its transpose.
struct GemmOperand {
  Tensor tensor;  // possibly a contiguous copy
  bool trans;     // true when the memory is column-major (a transposed view)
  int64_t ld;
};

GemmOperand as_gemm_operand(const Tensor& x) {
  const int64_t rows = x.size(0), cols = x.size(1);
  const int64_t s0 = x.stride(0), s1 = x.stride(1);
  if ((s1 == 1 || cols == 1) && s0 >= std::max<int64_t>(1, cols)) return {x, false, s0};
  if ((s0 == 1 || rows == 1) && s1 >= std::max<int64_t>(1, rows)) return {x, true, s1};
  Tensor c = x.contiguous();
  return {c, false, std::max<int64_t>(1, cols)};
}

// tiny's constant for a dtype, without "tiny::k": kFloat32, kBFloat16, ...
const char* dtype_constant(Dtype dtype) {
  switch (dtype) {
    case Dtype::Bool: return "Bool";
    case Dtype::Int64: return "Int64";
    case Dtype::Int32: return "Int32";
    case Dtype::UInt8: return "UInt8";
    case Dtype::Float32: return "Float32";
    case Dtype::Float64: return "Float64";
    case Dtype::Float16: return "Float16";
    case Dtype::BFloat16: return "BFloat16";
  }
  return dtype_name(dtype);
}

// PyTorch's message, then the fix: convert the integer (or lower-precision) operand to the other's dtype.
void check_same_dtype(const Tensor& a, const Tensor& b) {
  if (a.dtype() == b.dtype()) return;
  const bool a_wins =
      a.is_floating_point() && (!b.is_floating_point() || element_size(a.dtype()) > element_size(b.dtype()));
  const Tensor& target = a_wins ? a : b;
  TINY_THROW(DtypeError, "expected mat1 and mat2 to have the same dtype, but got: ", dtype_name(a.dtype()), " != ",
             dtype_name(b.dtype()), " (convert the ", dtype_name((a_wins ? b : a).dtype()), " one with .to(tiny::k",
             dtype_constant(target.dtype()), "))");
}

void check_mm(const Tensor& a, const Tensor& b, const char* op) {
  TINY_CHECK(a.dim() == 2, ShapeError, op, ": self must be a matrix (2-D), got a ", a.dim(), "-D tensor of shape ",
             shape_str(a.sizes()));
  TINY_CHECK(b.dim() == 2, ShapeError, op, ": mat2 must be a matrix (2-D), got a ", b.dim(), "-D tensor of shape ",
             shape_str(b.sizes()));
  TINY_CHECK(a.size(1) == b.size(0), ShapeError, "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x",
             a.size(1), " and ", b.size(0), "x", b.size(1), ")");
  check_same_dtype(a, b);
  TINY_CHECK(a.dtype() != kBool, DtypeError, "\"", op, "\" not implemented for 'bool'");
  ops::check_same_device(a, b, op);
}

// out (contiguous [m, n]) = alpha * a @ b + beta * out
void gemm_into(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (beta == 0.0) out.fill_(0);
    else out.mul_(beta);
    return;
  }
  GemmOperand A = as_gemm_operand(a), B = as_gemm_operand(b);
  gemm_stub(out.device())(out.dtype(), B.trans, A.trans, n, m, k, alpha, B.tensor.unsafe_impl()->data(), B.ld,
                          A.tensor.unsafe_impl()->data(), A.ld, beta, out.unsafe_impl()->data(), n);
}

// Batched product of [batch, m, k] and [batch, k, n] (batch strides may be 0).
Tensor bmm_impl(const Tensor& a, const Tensor& b) {
  const int64_t batch = a.size(0), m = a.size(1), n = b.size(2);
  Tensor out = make_tensor({batch, m, n}, a.dtype(), a.device());
  {
    NoGradGuard no_grad;  // the per-matrix views are plumbing, not part of the graph
    for (int64_t i = 0; i < batch; ++i) gemm_into(out.select(0, i), a.select(0, i), b.select(0, i), 1.0, 0.0);
  }
  if (should_record({a, b})) {
    record("BmmBackward0", {a, b}, {out}, {save_if(a, b.requires_grad()), save_if(b, a.requires_grad())}, [](const BackwardArgs& args) {
      const Tensor& g = args.grad();
      const Tensor& x = args.saved[0];
      const Tensor& y = args.saved[1];
      return std::vector<Tensor>{args.needs[0] ? bmm_impl(g, y.transpose(1, 2)) : Tensor(),
                                 args.needs[1] ? bmm_impl(x.transpose(1, 2), g) : Tensor()};
    });
  }
  return out;
}

// Gradients of a @ b laid out like the operand they belong to. A Linear
// layer's weight enters as weight.t() (column-major); computing its gradient
// as (g^T @ a)^T gives a transposed view of a contiguous [out, in] tensor, so
// after TransposeBackward the parameter's gradient is contiguous and
// AccumulateGrad keeps it without a strided copy (PyTorch does the same).
bool is_column_major(const Tensor& m) { return m.stride(0) == 1 && m.stride(1) != 1; }

Tensor grad_of_mat1(const Tensor& g, bool mat1_column_major, const Tensor& mat2) {
  return mat1_column_major ? mm(mat2, g.t()).t() : mm(g, mat2.t());
}

Tensor grad_of_mat2(const Tensor& g, const Tensor& mat1, bool mat2_column_major) {
  return mat2_column_major ? mm(g.t(), mat1).t() : mm(mat1.t(), g);
}

}  // namespace

void ops::gemm_into(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  tiny::gemm_into(out, a, b, alpha, beta);
}

Tensor mm(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = amp::detail::lower(a_in), b = amp::detail::lower(b_in);
  check_mm(a, b, "mm");
  TINY_OP_SCOPE("mm", a, b);
  Tensor out = make_tensor({a.size(0), b.size(1)}, a.dtype(), a.device());
  gemm_into(out, a, b, 1.0, 0.0);
  if (should_record({a, b})) {
    const bool a_col = is_column_major(a), b_col = is_column_major(b);
    record("MmBackward0", {a, b}, {out}, {save_if(a, b.requires_grad()), save_if(b, a.requires_grad())},
           [a_col, b_col](const BackwardArgs& args) {
      const Tensor& g = args.grad();
      return std::vector<Tensor>{args.needs[0] ? grad_of_mat1(g, a_col, args.saved[1]) : Tensor(),
                                 args.needs[1] ? grad_of_mat2(g, args.saved[0], b_col) : Tensor()};
    });
  }
  return out;
}

Tensor addmm(const Tensor& bias_in, const Tensor& a_in, const Tensor& b_in, const Scalar& beta, const Scalar& alpha) {
  const Tensor bias = amp::detail::lower(bias_in), a = amp::detail::lower(a_in), b = amp::detail::lower(b_in);
  check_mm(a, b, "addmm");
  TINY_OP_SCOPE("addmm", bias, a, b);
  ops::check_same_device(bias, a, "addmm");
  const IntArrayRef shape{a.size(0), b.size(1)};
  broadcast_shapes(bias.sizes(), shape);  // throws with both shapes when the bias does not fit
  Tensor out = make_tensor(shape, a.dtype(), a.device());
  const double be = beta.to_double(), al = alpha.to_double();
  {
    // Filling the fresh output is plumbing: copy_ would otherwise refuse a bias that requires grad.
    NoGradGuard no_grad;
    if (be != 0.0) out.copy_(bias);
    gemm_into(out, a, b, al, be == 0.0 ? 0.0 : be);
  }
  if (should_record({bias, a, b})) {
    const bool a_col = is_column_major(a), b_col = is_column_major(b);
    const IntArrayRef bias_sizes = bias.sizes();
    record("AddmmBackward0", {bias, a, b}, {out}, {save_if(a, b.requires_grad()), save_if(b, a.requires_grad())},
           [be, al, a_col, b_col, bias_sizes](const BackwardArgs& args) {
      const Tensor& g = args.grad();
      Tensor gbias, ga, gb;
      if (args.needs[0]) gbias = autograd::sum_to(be == 1.0 ? g : g * be, bias_sizes);
      if (args.needs[1]) ga = grad_of_mat1(g, a_col, args.saved[1]);
      if (args.needs[2]) gb = grad_of_mat2(g, args.saved[0], b_col);
      if (al != 1.0) {
        if (ga.defined()) ga = ga * al;
        if (gb.defined()) gb = gb * al;
      }
      return std::vector<Tensor>{gbias, ga, gb};
    });
  }
  return out;
}

Tensor bmm(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = amp::detail::lower(a_in), b = amp::detail::lower(b_in);
  TINY_CHECK(a.dim() == 3, ShapeError, "batch1 must be a 3D tensor, got a ", a.dim(), "-D tensor of shape ",
             shape_str(a.sizes()));
  TINY_CHECK(b.dim() == 3, ShapeError, "batch2 must be a 3D tensor, got a ", b.dim(), "-D tensor of shape ",
             shape_str(b.sizes()));
  TINY_CHECK(b.size(0) == a.size(0) && b.size(1) == a.size(2), ShapeError,
             "Expected size for first two dimensions of batch2 tensor to be: [", a.size(0), ", ", a.size(2),
             "] but got: [", b.size(0), ", ", b.size(1), "].");
  TINY_CHECK(a.dtype() == b.dtype(), DtypeError, "expected scalar type ", dtype_name(a.dtype()),
             " but found ", dtype_name(b.dtype()), " (convert one: b.to(a.dtype()))");
  TINY_CHECK(a.dtype() != kBool, DtypeError, "\"bmm\" not implemented for 'bool'");
  ops::check_same_device(a, b, "bmm");
  return bmm_impl(a, b);
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = amp::detail::lower(a_in), b = amp::detail::lower(b_in);
  TINY_CHECK(a.dim() >= 1 && b.dim() >= 1, ShapeError, "both arguments to matmul need to be at least 1D, but they are ",
             a.dim(), "D and ", b.dim(), "D");
  TINY_OP_SCOPE("matmul", a, b);
  if (a.dim() == 1 && b.dim() == 1) {
    TINY_CHECK(a.size(0) == b.size(0), ShapeError, "inconsistent tensor size, expected tensor [", a.size(0),
               "] and src [", b.size(0), "] to have the same number of elements, but got ", a.size(0), " and ",
               b.size(0), " elements respectively");
    return mm(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  }
  if (a.dim() == 2 && b.dim() == 1) return mm(a, b.unsqueeze(1)).squeeze(1);
  if (a.dim() == 1 && b.dim() == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (a.dim() == 2 && b.dim() == 2) return mm(a, b);

  // Batched: broadcast the batch dims, fold them into one, multiply, unfold.
  const Tensor x = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor y = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t m = x.size(-2), k = x.size(-1), n = y.size(-1);
  TINY_CHECK(y.size(-2) == k, ShapeError, "mat1 and mat2 shapes cannot be multiplied (", m, "x", k, " and ",
             y.size(-2), "x", n, ")");
  check_same_dtype(x, y);
  ops::check_same_device(x, y, "matmul");
  const IntArrayRef xb(x.sizes().begin(), x.sizes().end() - 2);
  const IntArrayRef yb(y.sizes().begin(), y.sizes().end() - 2);
  const IntArrayRef batch = broadcast_shapes(xb, yb);
  int64_t count = 1;
  for (int64_t s : batch) count *= s;
  IntArrayRef xs = batch, ys = batch;
  xs.insert(xs.end(), {m, k});
  ys.insert(ys.end(), {k, n});
  Tensor out = bmm_impl(x.expand(xs).reshape({count, m, k}), y.expand(ys).reshape({count, k, n}));
  IntArrayRef out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(m);
  if (b.dim() > 1) out_shape.push_back(n);
  return out.reshape(out_shape);
}

}  // namespace tiny
