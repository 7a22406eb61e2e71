// The emulated GPU's kernels are the CPU kernels, queued on the device's
// current stream and run by its worker on the worker's view of device memory
// (host code only ever sees a PROT_NONE address). Each wrapper captures
// worker views of its device tensors (see worker_view: they do not own the
// memory, as a CUDA kernel's pointers do not) and its CPU tensors by value,
// and declares the kernel's work (a KernelCost: bytes moved, FLOPs), from
// which the performance model times it on the modelled GPU: launch() takes no
// kernel without one.
#include "backend/cpu/kernels.h"
#include "core/matmul_precision.h"
#include "core/tensor_impl.h"
#include "gpu/device_context.h"
#include "gpu/emulated/emulated_runtime.h"
#include "gpu/model/cost.h"

namespace tiny {

namespace {

gpu::EmulatedRuntime& emu() { return *gpu::emulated_runtime(); }

// A CPU tensor over the worker's view of a device tensor's memory. It does
// not own that memory: as on CUDA, a device tensor whose last handle goes
// while its kernels are still queued returns its block to the caching
// allocator at once (memory_allocated falls at once), and the stream order
// keeps the block's next user behind those kernels. Use on another stream must
// be declared with record_stream, as on a real GPU. CPU operands (a copy's
// host side) are kept alive by the queued work.
Tensor worker_view(const Tensor& t) {
  if (!t.defined() || t.is_cpu()) return t;
  const auto& storage = t.unsafe_impl()->storage;
  void* alias = storage->data == nullptr ? nullptr : emu().worker_address(storage->data);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(alias, storage->nbytes, Device(), nullptr);
  impl->sizes = t.sizes();
  impl->strides = t.strides();
  impl->offset = t.storage_offset();
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

// The iterator with every operand replaced by its worker view.
TensorIter worker_iter(const TensorIter& iter) {
  TensorIter out = iter;
  for (int k = 0; k < iter.num_operands; ++k) {
    out.operands[k] = worker_view(iter.operands[k]);
    out.data[k] = out.operands[k].unsafe_impl()->data();
  }
  return out;
}

ReduceIter worker_iter(const ReduceIter& iter) {
  ReduceIter out = iter;
  out.input = worker_view(iter.input);
  for (int k = 0; k < iter.num_outputs; ++k) out.outputs[k] = worker_view(iter.outputs[k]);
  return out;
}

int device_index(const Tensor& t) { return t.device().index(); }

using gpu::model::KernelCost;
using gpu::model::Work;

// The bytes a kernel moves reading or writing `t`: each stored element once
// (a broadcast dimension, of stride 0, is read once), at least 4 bytes each
// (tiny's kernels move one element per thread).
int64_t moved_bytes(const Tensor& t) {
  if (!t.defined()) return 0;
  int64_t elements = 1;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.strides()[d] != 0) elements *= t.sizes()[d];
  }
  return elements * gpu::model::element_bytes(t.dtype());
}

KernelCost cost_of(std::initializer_list<Tensor> tensors, Work work = Work::pointwise) {
  KernelCost c;
  c.work = work;
  for (const Tensor& t : tensors) c.bytes += moved_bytes(t);
  return c;
}

KernelCost cost_of(const TensorIter& iter, Work work = Work::pointwise) {
  KernelCost c;
  c.work = work;
  for (int k = 0; k < iter.num_operands; ++k) c.bytes += moved_bytes(iter.operands[k]);
  return c;
}

void launch(int device, const char* name, const KernelCost& cost, std::function<void()> work) {
  emu().launch(gpu::current_stream(device), std::move(work), name, cost);
}

void unary(TensorIter& iter, kernels::UnaryKind kind, const kernels::OpParams& p) {
  launch(device_index(iter.operands[0]), "unary", cost_of(iter), [it = worker_iter(iter), kind, p]() mutable {
    cpu::unary_kernel(it, kind, p);
  });
}

void binary(TensorIter& iter, kernels::BinaryKind kind, const kernels::OpParams& p) {
  launch(device_index(iter.operands[0]), "binary", cost_of(iter), [it = worker_iter(iter), kind, p]() mutable {
    cpu::binary_kernel(it, kind, p);
  });
}

void where(TensorIter& iter) {
  launch(device_index(iter.operands[0]), "where", cost_of(iter), [it = worker_iter(iter)]() mutable { cpu::where_kernel(it); });
}

void copy(TensorIter& iter) {
  launch(device_index(iter.operands[0]), "copy_", cost_of(iter), [it = worker_iter(iter)]() mutable { cpu::copy_kernel(it); });
}

void fill(TensorIter& iter, const Scalar& value) {
  launch(device_index(iter.operands[0]), "fill_", cost_of(iter, Work::memset),
         [it = worker_iter(iter), value]() mutable { cpu::fill_kernel(it, value); });
}

void arange(const Tensor& out, double start, double step) {
  launch(device_index(out), "arange", cost_of({out}), [o = worker_view(out), start, step] { cpu::arange_kernel(o, start, step); });
}

void reduce(ReduceIter& iter, kernels::ReduceKind kind) {
  launch(device_index(iter.input), "reduce", cost_of({iter.input, iter.outputs[0]}, Work::reduction), [it = worker_iter(iter), kind]() mutable { cpu::reduce_kernel(it, kind); });
}

void arg_reduce(ReduceIter& iter, bool is_max) {
  launch(device_index(iter.input), "argmax",
         cost_of({iter.input, iter.outputs[0], iter.outputs[1]}, Work::reduction), [it = worker_iter(iter), is_max]() mutable { cpu::arg_reduce_kernel(it, is_max); });
}

// Column-major GEMM on device pointers: the worker reads them through its
// own mapping, with OpenBLAS given cuBLAS's arguments.
void gemm(Dtype dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const void* a, int64_t lda,
          const void* b, int64_t ldb, double beta, void* c, int64_t ldc) {
  const int device = emu().device_of(c);
  const void* wa = emu().worker_address(a);
  const void* wb = emu().worker_address(b);
  void* wc = emu().worker_address(c);
  // TF32 changes the modelled time and the counters only: the worker computes in float32.
  const bool tf32 = dtype == Dtype::Float32 && detail::float32_matmul_allows_tf32();
  launch(device, "gemm", gpu::model::gemm_cost(dtype, m, n, k, beta != 0, tf32), [=] { cpu::gemm_kernel(dtype, ta, tb, m, n, k, alpha, wa, lda, wb, ldb, beta, wc, ldc); });
}

void softmax(const Tensor& out, const Tensor& in, int64_t dim, bool log) {
  launch(device_index(out), log ? "log_softmax" : "softmax", cost_of({in, out}), [o = worker_view(out), i = worker_view(in), dim, log] { cpu::softmax_kernel(o, i, dim, log); });
}

void softmax_backward(const Tensor& grad_in, const Tensor& grad_out, const Tensor& out, int64_t dim, bool log) {
  launch(device_index(out), "softmax_backward", cost_of({grad_in, grad_out, out}),
         [gi = worker_view(grad_in), go = worker_view(grad_out), o = worker_view(out), dim, log] {
           cpu::softmax_backward_kernel(gi, go, o, dim, log);
         });
}

void nll_forward(const Tensor& losses, const Tensor& log_probs, const Tensor& target, int64_t ignore_index) {
  // One log-probability read per row, beside the target and the loss.
  KernelCost cost = cost_of({losses, target});
  cost.bytes += target.numel() * gpu::model::element_bytes(log_probs.dtype());
  launch(device_index(losses), "nll_loss", cost,
         [l = worker_view(losses), lp = worker_view(log_probs), t = worker_view(target), ignore_index] {
           cpu::nll_forward_kernel(l, lp, t, ignore_index);
         });
}

void nll_backward(const Tensor& grad_input, const Tensor& grad_losses, const Tensor& target, int64_t ignore_index) {
  launch(device_index(grad_input), "nll_loss_backward", cost_of({grad_input, grad_losses, target}),
         [gi = worker_view(grad_input), gl = worker_view(grad_losses), t = worker_view(target), ignore_index] {
           cpu::nll_backward_kernel(gi, gl, t, ignore_index);
         });
}

void random(const Tensor& out, RandomKind kind, PhiloxState state, double a, double b) {
  launch(device_index(out), "random", cost_of({out}),
         [o = worker_view(out), kind, state, a, b] { cpu::random_kernel(o, kind, state, a, b); });
}

void embedding(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const auto fn = embedding_stub.table[static_cast<int>(Backend::CPU)];
  launch(device_index(out), "embedding", cost_of({out, out, indices}),  // each row read, then written
         [fn, o = worker_view(out), w = worker_view(weight), i = worker_view(indices)] { fn(o, w, i); });
}

void embedding_backward(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices, int64_t padding_idx) {
  const auto fn = embedding_backward_stub.table[static_cast<int>(Backend::CPU)];
  launch(device_index(grad_weight), "embedding_backward", cost_of({grad_out, grad_out, grad_out, indices}),
         [fn, gw = worker_view(grad_weight), go = worker_view(grad_out), i = worker_view(indices), padding_idx] {
           fn(gw, go, i, padding_idx);
         });
}

// im2col reads each input element once (caches serve the overlapping
// windows) and writes every column entry; col2im reads every column entry and
// writes each input element. A convolution then costs its GEMMs plus these bytes.
void im2col(const Tensor& cols, const Tensor& input, const kernels::Conv2dGeometry& g) {
  const auto fn = im2col_stub.table[static_cast<int>(Backend::CPU)];
  launch(device_index(cols), "im2col", cost_of({input, cols}),
         [fn, c = worker_view(cols), i = worker_view(input), g] { fn(c, i, g); });
}

void col2im(const Tensor& grad_input, const Tensor& cols, const kernels::Conv2dGeometry& g) {
  const auto fn = col2im_stub.table[static_cast<int>(Backend::CPU)];
  launch(device_index(grad_input), "col2im", cost_of({cols, grad_input}),
         [fn, gi = worker_view(grad_input), c = worker_view(cols), g] { fn(gi, c, g); });
}

// Pooling reads its input once and writes its output (and max pooling's
// indices); the backward reads the output gradient (and indices) and writes
// the input gradient. Windows are summed or compared at one FLOP an element.
void pool2d(const Tensor& out, const Tensor& indices, const Tensor& input, const kernels::Pool2dGeometry& g) {
  const auto fn = pool2d_stub.table[static_cast<int>(Backend::CPU)];
  KernelCost cost = cost_of({input, out, indices});
  cost.flops = static_cast<double>(out.numel()) * static_cast<double>(g.kernel_h * g.kernel_w);
  const char* name = g.kind == kernels::PoolKind::Max ? "max_pool2d"
                     : g.kind == kernels::PoolKind::Avg ? "avg_pool2d" : "adaptive_avg_pool2d";
  launch(device_index(out), name, cost,
         [fn, o = worker_view(out), x = worker_view(indices), i = worker_view(input), g] { fn(o, x, i, g); });
}

void pool2d_backward(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                     const kernels::Pool2dGeometry& g) {
  const auto fn = pool2d_backward_stub.table[static_cast<int>(Backend::CPU)];
  const char* name = g.kind == kernels::PoolKind::Max ? "max_pool2d_backward"
                     : g.kind == kernels::PoolKind::Avg ? "avg_pool2d_backward" : "adaptive_avg_pool2d_backward";
  launch(device_index(grad_input), name, cost_of({grad_out, indices, grad_input}),
         [fn, gi = worker_view(grad_input), go = worker_view(grad_out), x = worker_view(indices), g] {
           fn(gi, go, x, g);
         });
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf, const kernels::SgdParams& p) {
  const auto fn = sgd_step_stub.table[static_cast<int>(Backend::CPU)];
  // Reads and writes the parameter (and the momentum buffer), reads the gradient.
  launch(device_index(param), "sgd_step", cost_of({param, param, grad, buf, buf}, Work::optimizer),
         [fn, pa = worker_view(param), g = worker_view(grad), b = worker_view(buf), p] { fn(pa, g, b, p); });
}

void adam_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, const Tensor& vmax,
               const kernels::AdamParams& p) {
  const auto fn = adam_step_stub.table[static_cast<int>(Backend::CPU)];
  // Reads and writes the parameter and both moments (and the max), reads the gradient.
  launch(device_index(param), "adam_step", cost_of({param, param, grad, m, m, v, v, vmax, vmax}, Work::optimizer),
         [fn, pa = worker_view(param), g = worker_view(grad), m1 = worker_view(m), v1 = worker_view(v),
          vx = worker_view(vmax), p] { fn(pa, g, m1, v1, vx, p); });
}

void rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& sq, const Tensor& ga, const Tensor& buf,
                  const kernels::RmspropParams& p) {
  const auto fn = rmsprop_step_stub.table[static_cast<int>(Backend::CPU)];
  // Reads and writes the parameter and square_avg (and grad_avg, the buffer), reads the gradient.
  const Tensor ga_used = p.centered ? ga : Tensor(), buf_used = p.momentum > 0.0 ? buf : Tensor();
  launch(device_index(param), "rmsprop_step",
         cost_of({param, param, grad, sq, sq, ga_used, ga_used, buf_used, buf_used}, Work::optimizer),
         [fn, pa = worker_view(param), g = worker_view(grad), s = worker_view(sq), a = worker_view(ga),
          b = worker_view(buf), p] { fn(pa, g, s, a, b, p); });
}

void non_finite_check_and_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                  const Tensor& inv_scale) {
  const auto fn = non_finite_check_and_unscale_stub.table[static_cast<int>(Backend::CPU)];
  std::vector<Tensor> views;
  views.reserve(grads.size());
  for (const Tensor& g : grads) views.push_back(worker_view(g));
  KernelCost cost;  // every gradient read and written, in one kernel
  for (const Tensor& g : grads) cost.bytes += 2 * moved_bytes(g);
  launch(device_index(found_inf), "_amp_foreach_non_finite_check_and_unscale_", cost,
         [fn, gs = std::move(views), f = worker_view(found_inf), s = worker_view(inv_scale)] { fn(gs, f, s); });
}

void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                  double backoff_factor, int64_t growth_interval) {
  const auto fn = update_scale_stub.table[static_cast<int>(Backend::CPU)];
  launch(device_index(scale), "_amp_update_scale_", cost_of({scale, growth_tracker, found_inf}),
         [fn, s = worker_view(scale), t = worker_view(growth_tracker), f = worker_view(found_inf), growth_factor,
          backoff_factor, growth_interval] { fn(s, t, f, growth_factor, backoff_factor, growth_interval); });
}

}  // namespace

// Registration never touches the emulator itself (it is created on first
// use), so a machine where it cannot start still runs every CPU op.
void register_emulated_kernels() {
  constexpr int emulated = static_cast<int>(Backend::Emulated);
  unary_stub.table[emulated] = &unary;
  binary_stub.table[emulated] = &binary;
  where_stub.table[emulated] = &where;
  copy_stub.table[emulated] = &copy;
  fill_stub.table[emulated] = &fill;
  arange_stub.table[emulated] = &arange;
  reduce_stub.table[emulated] = &reduce;
  arg_reduce_stub.table[emulated] = &arg_reduce;
  gemm_stub.table[emulated] = &gemm;
  softmax_stub.table[emulated] = &softmax;
  softmax_backward_stub.table[emulated] = &softmax_backward;
  nll_forward_stub.table[emulated] = &nll_forward;
  nll_backward_stub.table[emulated] = &nll_backward;
  random_stub.table[emulated] = &random;
  im2col_stub.table[emulated] = &im2col;
  col2im_stub.table[emulated] = &col2im;
  pool2d_stub.table[emulated] = &pool2d;
  pool2d_backward_stub.table[emulated] = &pool2d_backward;
  embedding_stub.table[emulated] = &embedding;
  embedding_backward_stub.table[emulated] = &embedding_backward;
  sgd_step_stub.table[emulated] = &sgd_step;
  adam_step_stub.table[emulated] = &adam_step;
  rmsprop_step_stub.table[emulated] = &rmsprop_step;
  non_finite_check_and_unscale_stub.table[emulated] = &non_finite_check_and_unscale;
  update_scale_stub.table[emulated] = &update_scale;
}

}  // namespace tiny
