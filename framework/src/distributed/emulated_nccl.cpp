#include "distributed/emulated_nccl.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/tensor_impl.h"
#include "distributed/process_group.h"
#include "gpu/device_context.h"
#include "gpu/emulated/emulated_runtime.h"
#include "gpu/model/collective_cost.h"
#include "tiny/cuda.h"

namespace tiny::distributed::detail {
namespace {

using gpu::model::Collective;

// The host buffer a collective's bytes go through, shared by the stream's
// work item (which fills it) and the communication thread (which waits for it).
struct Exchange {
  explicit Exchange(size_t bytes) : host(bytes) {}
  std::vector<char> host;
  std::mutex mutex;
  std::condition_variable staged_cv;
  bool staged = false;
};

class EmulatedWork final : public NcclWork {
 public:
  EmulatedWork(gpu::EmulatedRuntime& rt, int device, int64_t end_ns, std::shared_ptr<Work> bytes)
      : rt_(rt), device_(device), end_ns_(end_ns), bytes_(std::move(bytes)) {}
  // NCCL's work.wait(): the current stream waits (in modelled time; its real
  // order is the stream's own, the collective's item being queued on it).
  void wait() override { rt_.stream_wait_until(gpu::current_stream(device_), end_ns_); }
  void synchronize() override {
    bytes_->wait();  // rethrows a Gloo failure
    rt_.host_wait_until(device_, end_ns_);
  }

 private:
  gpu::EmulatedRuntime& rt_;
  int device_;
  int64_t end_ns_;
  std::shared_ptr<Work> bytes_;
};

// Where the work item reads and writes the tensor's bytes.
char* worker_bytes(gpu::EmulatedRuntime& rt, const Tensor& t) {
  return static_cast<char*>(rt.worker_address(t.unsafe_impl()->data()));
}

class EmulatedNcclGroup final : public NcclGroup {
 public:
  EmulatedNcclGroup(ProcessGroup& group, int device)
      : group_(group), device_(device), rt_(*gpu::emulated_runtime()) {}

  int device() const override { return device_; }

  std::shared_ptr<NcclWork> all_reduce(const Tensor& tensor, ReduceOp op) override {
    return waited(all_reduce_overlapped(tensor, op));
  }
  std::shared_ptr<NcclWork> all_reduce_overlapped(const Tensor& tensor, ReduceOp op) override {
    check_dtype("all_reduce", tensor);
    const size_t bytes = nbytes(tensor);
    const size_t count = static_cast<size_t>(tensor.numel());
    const Dtype dtype = tensor.dtype();
    return issue(Collective::all_reduce, "all_reduce of " + std::to_string(count) + " " + dtype_name(dtype) + " elements",
                 tensor, tensor, bytes, bytes, 0, static_cast<int64_t>(bytes),
                 [this, count, dtype, op](char* host, std::function<void()> staged) {
                   return group_.all_reduce_async(host, count, dtype, op, std::move(staged), {}, false);
                 });
  }
  std::shared_ptr<NcclWork> broadcast(const Tensor& tensor, int root) override {
    const size_t bytes = nbytes(tensor);
    return waited(issue(Collective::broadcast,
                        "broadcast of " + std::to_string(bytes) + " bytes from rank " + std::to_string(root), tensor,
                        tensor, bytes, bytes, 0, static_cast<int64_t>(bytes),
                        [this, bytes, root](char* host, std::function<void()> staged) {
                          return group_.broadcast_async(host, bytes, root, std::move(staged), false);
                        }));
  }
  std::shared_ptr<NcclWork> all_gather(const Tensor& input, const Tensor& output) override {
    // The host buffer holds the input, then every rank's input in rank order.
    const size_t in = nbytes(input), out = nbytes(output);
    return waited(issue(Collective::all_gather, "all_gather of " + std::to_string(in) + " bytes per rank", input,
                        output, in + out, out, in, static_cast<int64_t>(out),
                        [this, in](char* host, std::function<void()> staged) {
                          return group_.all_gather_async(host, host + in, in, std::move(staged), false);
                        }));
  }
  std::shared_ptr<NcclWork> reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override {
    // Gloo's reduce-scatter is the older algorithm API: an all-reduce of the whole input gives the same slot.
    check_dtype("reduce_scatter", input);
    const size_t in = nbytes(input), out = nbytes(output);
    const size_t count = static_cast<size_t>(input.numel());
    const Dtype dtype = input.dtype();
    return waited(issue(Collective::reduce_scatter,
                        "reduce_scatter of " + std::to_string(count) + " " + dtype_name(dtype) + " elements", input,
                        output, in, out, out * group_.rank(),
                        static_cast<int64_t>(in), [this, count, dtype, op](char* host, std::function<void()> staged) {
                          return group_.all_reduce_async(host, count, dtype, op, std::move(staged), {}, false);
                        }));
  }
  void barrier() override { group_.barrier(); }

 private:
  static size_t nbytes(const Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

  static void check_dtype(const char* op, const Tensor& t) {
    TINY_CHECK(t.dtype() == kFloat32 || t.dtype() == kFloat64 || is_integral(t.dtype()), DtypeError, op,
               ": unsupported dtype ", t.dtype(), " on the emulated GPU (its bytes move over Gloo: use float32, "
               "float64, int64, int32 or uint8)");
  }

  std::shared_ptr<NcclWork> waited(std::shared_ptr<NcclWork> work) {
    work->wait();  // the collective was enqueued on the current stream: later work there follows it
    return work;
  }

  // One collective: `input`'s bytes go to the start of a host buffer of
  // `host_bytes`, `gloo` runs on it, and `out_bytes` from `out_offset` go to
  // `output`. `size` is nccl-tests' size of the collective (its cost).
  // `call` describes it as the process group does ("all_reduce of 3 float32
  // elements"): ranks that call different ones are named with it when they
  // agree on its start time, on the host, before anything is queued.
  template <typename Gloo>
  std::shared_ptr<NcclWork> issue(Collective kind, const std::string& call, const Tensor& input, const Tensor& output,
                                  size_t host_bytes, size_t out_bytes, size_t out_offset, int64_t size, Gloo gloo) {
    const gpu::Stream stream = gpu::current_stream(device_);
    const int64_t ready = group_.agree_on_time(rt_.collective_ready(stream), gpu::model::collective_name(kind), call);
    const int64_t duration =
        gpu::model::nccl_collective_ns(rt_.model(), kind, group_.size(), size);
    auto exchange = std::make_shared<Exchange>(host_bytes);
    // The stream reaches the collective after the work queued before it, which
    // may take long on a slow host: that is not a lost peer, so the wait is
    // bounded by NCCL's watchdog default (10 minutes), not the group's timeout.
    const auto timeout = std::max<std::chrono::milliseconds>(group_.timeout(), std::chrono::minutes(10));
    auto staged = [exchange, timeout] {
      std::unique_lock<std::mutex> lock(exchange->mutex);
      TINY_CHECK(exchange->staged_cv.wait_for(lock, timeout, [&] { return exchange->staged; }),
                 distributed::DistributedError, "the emulated GPU did not reach a collective within ",
                 timeout.count(), " ms (its stream is held up by earlier work)");
    };
    std::shared_ptr<Work> bytes = gloo(exchange->host.data(), staged);
    const size_t in_bytes = nbytes(input);
    char* from = in_bytes > 0 ? worker_bytes(rt_, input) : nullptr;
    char* to = out_bytes > 0 ? worker_bytes(rt_, output) : nullptr;
    auto work = [exchange, bytes, from, in_bytes, to, out_bytes, out_offset] {
      if (in_bytes > 0) std::memcpy(exchange->host.data(), from, in_bytes);
      {
        std::lock_guard<std::mutex> lock(exchange->mutex);
        exchange->staged = true;
      }
      exchange->staged_cv.notify_all();
      bytes->wait();  // a Gloo failure becomes the device's sticky error
      if (out_bytes > 0) std::memcpy(to, exchange->host.data() + out_offset, out_bytes);
    };
    // The item holds the tensors' memory until it has run (as a kernel's closure does).
    auto keep = [work = std::move(work), input, output] { work(); };
    const gpu::model::Span span =
        rt_.collective(stream, ready, duration, gpu::model::nccl_kernel_name(kind), size, std::move(keep));
    return std::make_shared<EmulatedWork>(rt_, device_, span.end, std::move(bytes));
  }

  ProcessGroup& group_;
  int device_;
  gpu::EmulatedRuntime& rt_;
};

}  // namespace

std::unique_ptr<NcclGroup> make_emulated_nccl(ProcessGroup& group, int device) {
  return std::make_unique<EmulatedNcclGroup>(group, device);
}

NcclGroup* gpu_collectives(ProcessGroup& group, const Tensor& tensor) {
  if (NcclGroup* nccl = group.nccl()) return nccl;
  if (!tensor.defined() || !tensor.is_cuda() || !cuda::is_emulated(tensor.get_device())) return nullptr;
  return group.emulated_nccl(tensor.get_device());
}

}  // namespace tiny::distributed::detail
