// tiny::nn::functional::embedding: a row gather with a deterministic scatter-add backward.
#include "backend/define_dispatch.h"
#include "backend/stubs/embedding.h"
#include "ops/op_helpers.h"
#include "tiny/nn/functional.h"

// The kernels these ops call, each with the work of one call on the modelled GPU.
namespace tiny {
namespace {
KernelWork embedding_work(const Tensor& out, const Tensor&, const Tensor& indices) {
  return {"embedding", cost_of({out, out, indices})};  // each row read, then written
}
KernelWork embedding_backward_work(const Tensor&, const Tensor& grad_out, const Tensor& indices, int64_t) {
  return {"embedding_backward", cost_of({grad_out, grad_out, grad_out, indices})};
}
}  // namespace

TINY_DEFINE_DISPATCH(embedding_stub, "embedding", embedding_work);
TINY_DEFINE_DISPATCH(embedding_backward_stub, "embedding_backward", embedding_backward_work);
}  // namespace tiny

namespace tiny::nn::functional {

Tensor embedding(const Tensor& indices, const Tensor& weight, int64_t padding_idx) {
  TINY_OP_SCOPE("embedding", indices, weight);
  TINY_CHECK(indices.defined() && weight.defined(), ValueError, "embedding: indices and weight must be defined tensors");
  TINY_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, DtypeError,
             "embedding: expected indices of dtype int64 or int32 but got ", dtype_name(indices.dtype()),
             " (convert them with indices.to(tiny::kInt64))");
  TINY_CHECK(weight.dim() == 2, ShapeError, "embedding: weight must be 2-D [num_embeddings, embedding_dim], got shape ",
             shape_str(weight.sizes()));
  TINY_CHECK(weight.is_floating_point(), DtypeError, "embedding: expected a floating-point weight, got ",
             dtype_name(weight.dtype()));
  ops::check_same_device(weight, indices, "embedding");
  const int64_t num = weight.size(0), dim = weight.size(1);
  TINY_CHECK(padding_idx == -1 || (padding_idx >= 0 && padding_idx < num), ValueError, "embedding: padding_idx must be ",
             "-1 (none) or within [0, ", num, "), got ", padding_idx);

  const Tensor idx = indices.to(kInt64).contiguous();
  const int64_t n = idx.numel();
  Tensor out = make_tensor({n, dim}, weight.dtype(), weight.device());
  embedding_stub(weight.device())(out, weight, idx);
  IntArrayRef out_shape = indices.sizes();
  out_shape.push_back(dim);
  out = out.view(out_shape);

  if (autograd::should_record({weight})) {
    const IntArrayRef weight_shape = weight.sizes();
    autograd::record("EmbeddingBackward0", {weight}, {out}, {autograd::save(idx)},
                     [weight_shape, n, dim, padding_idx](const autograd::BackwardArgs& args) {
                       const Tensor& g = args.grad();
                       Tensor grad_weight = zeros(weight_shape, TensorOptions(g.dtype()).device(g.device()));
                       Tensor grad_rows = g.reshape({n, dim}).contiguous();
                       embedding_backward_stub(g.device())(grad_weight, grad_rows, args.saved[0], padding_idx);
                       return std::vector<Tensor>{grad_weight};
                     });
  }
  return out;
}

}  // namespace tiny::nn::functional
