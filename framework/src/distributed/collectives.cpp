// The collectives on tensors: each stages the tensor in contiguous host memory
// (a GPU tensor is copied to the host and back: Gloo moves host memory), runs
// the Gloo collective on the process group's thread and waits for it.
#include "distributed/process_group.h"
#include "tiny/autograd.h"
#include "tiny/ops.h"

namespace tiny::distributed {
namespace {

// Host memory holding `tensor`'s values in row-major order; write_back() copies them into `tensor`.
struct Staged {
  explicit Staged(const Tensor& t) : tensor(t) {
    TINY_CHECK(t.defined(), ValueError, "distributed: the tensor is undefined");
    TINY_CHECK(t.dtype() == kFloat32 || t.dtype() == kFloat64 || t.dtype() == kInt64, DtypeError,
               "distributed: unsupported dtype ", t.dtype(), " (use float32, float64 or int64)");
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

}  // namespace

void barrier() { detail::default_group().barrier(); }

void all_reduce(const Tensor& tensor, ReduceOp op) {
  auto& group = detail::default_group();
  Staged s(tensor);
  group.all_reduce(s.data(), static_cast<size_t>(tensor.numel()), tensor.dtype(), op);
  s.write_back();
}

void broadcast(const Tensor& tensor, int src) {
  auto& group = detail::default_group();
  TINY_CHECK(src >= 0 && src < group.size(), ValueError, "broadcast: src ", src, " is not a rank of the group of ",
             group.size());
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
  Staged s(tensor);
  Tensor gathered = empty({static_cast<int64_t>(n) * tensor.numel()}, TensorOptions(tensor.dtype()));
  group.all_gather(s.data(), gathered.raw_data_ptr(), s.bytes());
  NoGradGuard no_grad;
  for (int r = 0; r < n; ++r) {
    TINY_CHECK(tensor_list[r].sizes() == tensor.sizes(), ShapeError, "all_gather: tensor_list[", r, "] has shape ",
               shape_str(tensor_list[r].sizes()), ", expected ", shape_str(tensor.sizes()));
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
  // Gloo's reduce-scatter is the older algorithm API; an all-reduce of the
  // whole list gives the same values, and these tensors are small.
  NoGradGuard no_grad;
  Tensor all = empty({static_cast<int64_t>(n) * output.numel()}, TensorOptions(output.dtype()));
  for (int r = 0; r < n; ++r) all.narrow(0, r * output.numel(), output.numel()).view(output.sizes()).copy_(input_list[r]);
  group.all_reduce(all.raw_data_ptr(), static_cast<size_t>(all.numel()), output.dtype(), op);
  output.copy_(all.narrow(0, group.rank() * output.numel(), output.numel()).view(output.sizes()));
}

}  // namespace tiny::distributed
