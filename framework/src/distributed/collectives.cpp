// The collectives on tensors. On the emulated GPU (any backend) they go the
// NCCL way below, timed as NCCL's while Gloo moves the bytes
// (distributed/emulated_nccl.h). Gloo: each stages the tensor in contiguous host
// memory (a GPU tensor is copied to the host and back: Gloo moves host
// memory), runs the Gloo collective on the process group's thread and waits
// for it. NCCL: the tensor stays on its GPU (a contiguous copy when it is not
// contiguous, copied back on the same stream), the collective is enqueued on
// the calling thread's current stream and the call returns without waiting,
// as PyTorch's ProcessGroupNCCL: later work on that stream sees the result.
#include "distributed/emulated_nccl.h"
#include "distributed/process_group.h"
#include "tiny/autograd.h"
#include "tiny/ops.h"

#include <mutex>

namespace tiny::distributed {
namespace {

// Host memory holding `tensor`'s values in row-major order; write_back() copies them into `tensor`.
struct Staged {
  explicit Staged(const Tensor& t) : tensor(t) {
    TINY_CHECK(t.defined(), ValueError, "distributed: the tensor is undefined");
    TINY_CHECK(t.dtype() == kFloat32 || t.dtype() == kFloat64 || is_integral(t.dtype()), DtypeError,
               "distributed: unsupported dtype ", t.dtype(), " (use float32, float64, int64, int32 or uint8)");
    direct = t.is_cpu() && t.is_contiguous();
    host = direct ? t : t.detach().cpu().contiguous();
    if (host.is_same(t) && !direct) host = host.clone();
  }
  void* data() const { return host.raw_data_ptr(); }
  size_t bytes() const { return static_cast<size_t>(host.numel()) * host.element_size(); }
  void write_back() {
    if (direct) return;
    NoGradGuard no_grad;
    tensor.copy_(host);
  }
  Tensor tensor, host;
  bool direct = false;
};

// Backend "nccl" moves the memory of this rank's GPU only.
void check_on_device(const char* op, const Tensor& t, int device) {
  TINY_CHECK(t.defined(), ValueError, op, ": the tensor is undefined");
  TINY_CHECK(t.is_cuda(), DeviceError, op, ": Tensors must be CUDA and dense (got a tensor on ", t.device(),
             "): backend \"nccl\" moves GPU memory only; move it with .to(\"cuda:", device,
             "\"), or use backend \"gloo\" for CPU tensors");
  TINY_CHECK(t.get_device() == device, DeviceError, op, ": the tensor is on ", t.device(),
             " but this rank's NCCL communicator is on cuda:", device,
             " (the current device when init_process_group was called): call "
             "tiny::cuda::set_device(local_rank()) before init_process_group and keep the rank's tensors there");
}

// A tensor NCCL can use: on the communicator's GPU, contiguous (else a
// contiguous copy, written back into the caller's tensor by write_back()).
struct OnDevice {
  OnDevice(const char* op, const Tensor& t, int device) : tensor(t) {
    check_on_device(op, t, device);
    NoGradGuard no_grad;
    copied = !t.is_contiguous();
    buffer = copied ? t.detach().contiguous() : t.detach();
  }
  // A stream-ordered copy back (nothing when NCCL worked on the tensor itself).
  void write_back() {
    if (!copied) return;
    NoGradGuard no_grad;
    tensor.copy_(buffer);
  }
  Tensor tensor, buffer;
  bool copied = false;
};

// The counts of collective_counts(): a collective may be issued from backward's worker threads (DDP's hooks).
std::mutex g_counts_mutex;
CollectiveCounts g_counts;

int64_t nbytes(const Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

}  // namespace

namespace detail {
void count_collective(CollectiveCount CollectiveCounts::*kind, int64_t bytes) {
  std::lock_guard<std::mutex> lock(g_counts_mutex);
  CollectiveCount& c = g_counts.*kind;
  ++c.calls;
  c.bytes += bytes;
}
}  // namespace detail

CollectiveCount CollectiveCounts::total() const {
  CollectiveCount t;
  for (const CollectiveCount* c : {&all_reduce, &broadcast, &all_gather, &reduce_scatter, &barrier}) {
    t.calls += c->calls;
    t.bytes += c->bytes;
  }
  return t;
}

CollectiveCounts collective_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mutex);
  return g_counts;
}

void reset_collective_counts() {
  std::lock_guard<std::mutex> lock(g_counts_mutex);
  g_counts = CollectiveCounts();
}

void barrier() {
  auto& group = detail::default_group();
  detail::count_collective(&CollectiveCounts::barrier, 0);
  if (detail::NcclGroup* nccl = group.nccl()) return nccl->barrier();
  group.barrier();
}

void all_reduce(const Tensor& tensor, ReduceOp op) {
  auto& group = detail::default_group();
  TINY_CHECK(tensor.defined(), ValueError, "all_reduce: the tensor is undefined");
  detail::count_collective(&CollectiveCounts::all_reduce, nbytes(tensor));
  if (detail::NcclGroup* nccl = detail::gpu_collectives(group, tensor)) {
    OnDevice d("all_reduce", tensor, nccl->device());
    nccl->all_reduce(d.buffer, op);
    d.write_back();
    return;
  }
  Staged s(tensor);
  group.all_reduce(s.data(), static_cast<size_t>(tensor.numel()), tensor.dtype(), op);
  s.write_back();
}

void broadcast(const Tensor& tensor, int src) {
  auto& group = detail::default_group();
  TINY_CHECK(src >= 0 && src < group.size(), ValueError, "broadcast: src ", src, " is not a rank of the group of ",
             group.size());
  TINY_CHECK(tensor.defined(), ValueError, "broadcast: the tensor is undefined");
  detail::count_collective(&CollectiveCounts::broadcast, nbytes(tensor));
  if (detail::NcclGroup* nccl = detail::gpu_collectives(group, tensor)) {
    OnDevice d("broadcast", tensor, nccl->device());
    nccl->broadcast(d.buffer, src);
    d.write_back();
    return;
  }
  Staged s(tensor);
  group.broadcast(s.data(), s.bytes(), src);
  s.write_back();
}

void all_gather(std::vector<Tensor>& tensor_list, const Tensor& tensor) {
  auto& group = detail::default_group();
  const int n = group.size();
  if (tensor_list.empty())
    for (int r = 0; r < n; ++r) tensor_list.push_back(empty_like(tensor));
  TINY_CHECK(static_cast<int>(tensor_list.size()) == n, ValueError, "all_gather: tensor_list has ",
             tensor_list.size(), " tensors, expected one per rank (", n, ")");
  for (int r = 0; r < n; ++r)
    TINY_CHECK(tensor_list[r].sizes() == tensor.sizes(), ShapeError, "all_gather: tensor_list[", r, "] has shape ",
               shape_str(tensor_list[r].sizes()), ", expected ", shape_str(tensor.sizes()));
  detail::count_collective(&CollectiveCounts::all_gather, n * nbytes(tensor));
  if (detail::NcclGroup* nccl = detail::gpu_collectives(group, tensor)) {
    OnDevice d("all_gather", tensor, nccl->device());
    for (int r = 0; r < n; ++r) check_on_device("all_gather", tensor_list[r], nccl->device());
    NoGradGuard no_grad;
    Tensor gathered =
        empty({static_cast<int64_t>(n) * tensor.numel()}, TensorOptions(tensor.dtype()).device(tensor.device()));
    nccl->all_gather(d.buffer, gathered);
    for (int r = 0; r < n; ++r)
      tensor_list[r].copy_(gathered.narrow(0, r * tensor.numel(), tensor.numel()).view(tensor.sizes()));
    return;
  }
  Staged s(tensor);
  Tensor gathered = empty({static_cast<int64_t>(n) * tensor.numel()}, TensorOptions(tensor.dtype()));
  group.all_gather(s.data(), gathered.raw_data_ptr(), s.bytes());
  NoGradGuard no_grad;
  for (int r = 0; r < n; ++r) {
    tensor_list[r].copy_(gathered.narrow(0, r * tensor.numel(), tensor.numel()).view(tensor.sizes()));
  }
}

void reduce_scatter(const Tensor& output, const std::vector<Tensor>& input_list, ReduceOp op) {
  auto& group = detail::default_group();
  const int n = group.size();
  TINY_CHECK(static_cast<int>(input_list.size()) == n, ValueError, "reduce_scatter: input_list has ",
             input_list.size(), " tensors, expected one per rank (", n, ")");
  for (int r = 0; r < n; ++r)
    TINY_CHECK(input_list[r].sizes() == output.sizes() && input_list[r].dtype() == output.dtype(), ShapeError,
               "reduce_scatter: input_list[", r, "] has shape ", shape_str(input_list[r].sizes()), " and dtype ",
               input_list[r].dtype(), ", expected those of the output, ", shape_str(output.sizes()), " and ",
               output.dtype());
  detail::count_collective(&CollectiveCounts::reduce_scatter, n * nbytes(output));
  if (detail::NcclGroup* nccl = detail::gpu_collectives(group, output)) {
    OnDevice out("reduce_scatter", output, nccl->device());
    for (int r = 0; r < n; ++r) check_on_device("reduce_scatter", input_list[r], nccl->device());
    NoGradGuard no_grad;
    Tensor all =
        empty({static_cast<int64_t>(n) * output.numel()}, TensorOptions(output.dtype()).device(output.device()));
    for (int r = 0; r < n; ++r)
      all.narrow(0, r * output.numel(), output.numel()).view(output.sizes()).copy_(input_list[r]);
    nccl->reduce_scatter(all, out.buffer, op);
    out.write_back();
    return;
  }
  // Gloo's reduce-scatter is the older algorithm API; an all-reduce of the
  // whole list gives the same values, and these tensors are small.
  NoGradGuard no_grad;
  Tensor all = empty({static_cast<int64_t>(n) * output.numel()}, TensorOptions(output.dtype()));
  for (int r = 0; r < n; ++r) all.narrow(0, r * output.numel(), output.numel()).view(output.sizes()).copy_(input_list[r]);
  group.all_reduce(all.raw_data_ptr(), static_cast<size_t>(all.numel()), output.dtype(), op);
  output.copy_(all.narrow(0, group.rank() * output.numel(), output.numel()).view(output.sizes()));
}

}  // namespace tiny::distributed
