// Collectives between the GPUs of one process. Each transfer is a peer copy
// (Tensor::to between devices, counted as bytes_device_to_device on the
// source device), on the emulated GPU and between real GPUs alike. PyTorch
// uses NCCL (ncclBroadcast, ncclReduce, ncclAllReduce) between real devices
// of one process; DataParallel moves few enough tensors that peer copies,
// with the sums computed on the destination, serve as well.
#include "tiny/nn/parallel/comm.h"

#include <set>
#include <string>

#include "tiny/autograd.h"
#include "tiny/cuda.h"
#include "tiny/error.h"
#include "tiny/ops.h"

namespace tiny::nn::parallel::comm {

namespace {

std::string device_names(const std::vector<int>& devices) {
  std::string s;
  for (size_t i = 0; i < devices.size(); ++i) s += (i ? ", cuda:" : "cuda:") + std::to_string(devices[i]);
  return s;
}

// Every device must exist and appear once.
void check_devices(const char* op, const std::vector<int>& devices) {
  TINY_CHECK(!devices.empty(), ValueError, op, ": expected at least one device, got an empty list");
  const int count = cuda::device_count();
  std::set<int> seen;
  for (int d : devices) {
    TINY_CHECK(d >= 0 && d < count, DeviceError, op, ": cuda:", d, " does not exist; this machine has ", count,
               " GPU", count == 1 ? "" : "s",
               count > 0 && !cuda::is_emulated(0) ? "" : " (set TINY_EMULATED_GPUS to emulate more)");
    TINY_CHECK(seen.insert(d).second, ValueError, op, ": device cuda:", d, " appears more than once in [",
               device_names(devices), "]: give each device once");
  }
}

Device resolve_destination(const std::optional<Device>& destination) {
  if (!destination) return Device(kCUDA, cuda::current_device());
  if (destination->is_cuda() && !destination->has_index()) return Device(kCUDA, cuda::current_device());
  return *destination;
}

void check_same_kind(const char* op, const std::vector<Tensor>& tensors, bool check_shape) {
  TINY_CHECK(!tensors.empty(), ValueError, op, ": expected at least one tensor, got an empty list");
  for (size_t i = 0; i < tensors.size(); ++i) {
    TINY_CHECK(tensors[i].defined(), ValueError, op, ": tensor ", i, " is undefined");
    TINY_CHECK(tensors[i].is_cuda(), DeviceError, op, ": expected all tensors on GPUs, but tensor ", i, " is on ",
               tensors[i].device(), " (move it with .to(\"cuda:N\") first)");
    TINY_CHECK(tensors[i].dtype() == tensors[0].dtype(), DtypeError, op, ": expected all tensors to have one dtype, "
               "but tensor 0 is ", dtype_name(tensors[0].dtype()), " and tensor ", i, " is ",
               dtype_name(tensors[i].dtype()));
    TINY_CHECK(!check_shape || tensors[i].sizes() == tensors[0].sizes(), ShapeError, op,
               ": expected all tensors to have one shape, but tensor 0 is ", shape_str(tensors[0].sizes()),
               " and tensor ", i, " is ", shape_str(tensors[i].sizes()));
  }
}

std::vector<int> devices_of(const std::vector<Tensor>& tensors) {
  std::vector<int> devices;
  for (const Tensor& t : tensors) devices.push_back(t.get_device());
  return devices;
}

int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim) {
  TINY_CHECK(dim >= -ndim && dim < ndim, IndexError, op, ": Dimension out of range (expected to be in range of [",
             -ndim, ", ", ndim - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + ndim : dim;
}

}  // namespace

std::vector<int64_t> split_sizes(int64_t size, int64_t parts, const char* what) {
  TINY_CHECK(parts > 0, ValueError, what, ": expected at least one device, got ", parts);
  TINY_CHECK(size >= parts, ValueError, what, ": cannot split ", size, " sample", size == 1 ? "" : "s", " across ",
             parts, " devices: each device needs at least one. Use a batch of at least ", parts,
             " samples, or fewer devices.");
  std::vector<int64_t> sizes(static_cast<size_t>(parts), size / parts);
  for (int64_t i = 0; i < size % parts; ++i) ++sizes[static_cast<size_t>(i)];
  return sizes;
}

std::vector<Tensor> broadcast(const Tensor& tensor, const std::vector<int>& devices) {
  TINY_CHECK(tensor.defined(), ValueError, "broadcast: the tensor is undefined");
  check_same_kind("broadcast", {tensor}, true);
  check_devices("broadcast", devices);
  NoGradGuard no_grad;
  const Tensor source = tensor.detach();
  std::vector<Tensor> out;
  out.reserve(devices.size());
  for (int d : devices) out.push_back(source.to(Device(kCUDA, d)));  // the source's own device: itself
  return out;
}

Tensor reduce_add(const std::vector<Tensor>& inputs, std::optional<Device> destination) {
  check_same_kind("reduce_add", inputs, true);
  check_devices("reduce_add", devices_of(inputs));
  const Device dst = resolve_destination(destination);
  NoGradGuard no_grad;
  // Start from the input already on the destination (no copy of it), else from a copy of the first.
  size_t first = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].device() == dst) first = i;
  }
  Tensor sum = inputs[first].device() == dst ? inputs[first].clone() : inputs[first].to(dst);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i != first) sum.add_(inputs[i].to(dst));
  }
  return sum.detach();
}

void all_reduce(const std::vector<Tensor>& tensors) {
  check_same_kind("all_reduce", tensors, true);
  check_devices("all_reduce", devices_of(tensors));
  NoGradGuard no_grad;
  const Tensor sum = reduce_add(tensors, tensors[0].device());
  for (const Tensor& t : tensors) {
    t.copy_(sum);  // the first: a copy within its device
  }
}

std::vector<Tensor> scatter(const Tensor& tensor, const std::vector<int>& devices,
                            const std::vector<int64_t>& chunk_sizes, int64_t dim) {
  TINY_CHECK(tensor.defined(), ValueError, "scatter: the tensor is undefined");
  check_devices("scatter", devices);
  TINY_CHECK(tensor.dim() > 0, ValueError, "scatter: cannot split a 0-dimensional tensor; give it a batch dimension");
  dim = wrap_dim("scatter", dim, tensor.dim());
  const int64_t size = tensor.size(dim);
  std::vector<int64_t> sizes = chunk_sizes;
  if (sizes.empty()) {
    sizes = split_sizes(size, static_cast<int64_t>(devices.size()), "scatter");
  } else {
    TINY_CHECK(sizes.size() == devices.size(), ValueError, "scatter: expected one chunk size per device (",
               devices.size(), "), got ", sizes.size());
    int64_t total = 0;
    for (int64_t s : sizes) {
      TINY_CHECK(s > 0, ValueError, "scatter: chunk sizes must be positive, got ", shape_str(sizes));
      total += s;
    }
    TINY_CHECK(total == size, ValueError, "scatter: chunk sizes ", shape_str(sizes), " add up to ", total,
               ", but the tensor has ", size, " elements along dim ", dim);
  }
  NoGradGuard no_grad;
  std::vector<Tensor> out;
  out.reserve(devices.size());
  int64_t start = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    out.push_back(tensor.detach().narrow(dim, start, sizes[i]).to(Device(kCUDA, devices[i]), /*non_blocking=*/true));
    start += sizes[i];
  }
  return out;
}

Tensor gather(const std::vector<Tensor>& tensors, int64_t dim, std::optional<Device> destination) {
  TINY_CHECK(!tensors.empty(), ValueError, "gather: expected at least one tensor, got an empty list");
  for (size_t i = 0; i < tensors.size(); ++i) {
    TINY_CHECK(tensors[i].defined(), ValueError, "gather: tensor ", i, " is undefined");
    TINY_CHECK(tensors[i].dim() == tensors[0].dim(), ShapeError, "gather: tensor 0 has ", tensors[0].dim(),
               " dimensions but tensor ", i, " has ", tensors[i].dim());
  }
  TINY_CHECK(tensors[0].dim() > 0, ValueError, "gather: cannot concatenate 0-dimensional tensors");
  dim = wrap_dim("gather", dim, tensors[0].dim());
  const Device dst = resolve_destination(destination);
  std::set<int> sources;  // a device may hold several of the tensors
  for (const Tensor& t : tensors) {
    if (t.is_cuda()) sources.insert(t.get_device());
  }
  if (!sources.empty()) check_devices("gather", std::vector<int>(sources.begin(), sources.end()));
  NoGradGuard no_grad;
  std::vector<Tensor> moved;
  moved.reserve(tensors.size());
  for (const Tensor& t : tensors) moved.push_back(t.detach().to(dst));
  return cat(moved, dim).detach();  // cat checks dtypes and the other dimensions
}

}  // namespace tiny::nn::parallel::comm
