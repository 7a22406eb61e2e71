// NcclGroup on libnccl: one communicator per rank on one device, collectives
// enqueued on the calling thread's current tiny stream, and a watchdog.
//
// Each collective gets a sequence number and a CUDA event recorded after it.
// It is registered with the watchdog before NCCL is called (so that a call
// that blocks in NCCL's connection setup is timed too); the watchdog thread
// looks every 50 ms: finished events leave the list; an asynchronous NCCL
// error (ncclCommGetAsyncError), or a collective older than the timeout,
// marks the group broken with a message naming the oldest unfinished
// collective and the peers that are gone, then aborts the communicator
// (ncclCommAbort makes the stuck kernels return, so the streams drain). The
// abort first gives a thread that is entering an NCCL call a moment to leave
// it, since the abort frees the communicator that call is using.
// From then on every call, NcclWork::wait and synchronize included, throws
// DistributedError with that message, as PyTorch's ProcessGroupNCCL with
// async error handling (which would also end the process; tiny throws).
#include <cuda_runtime_api.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>

#include "core/tensor_impl.h"
#include "distributed/nccl.h"
#include "distributed/nccl/library.h"
#include "gpu/cuda/cuda_runtime.h"
#include "gpu/device_context.h"
#include "tiny/error.h"
#include "tiny/ops.h"

namespace tiny::distributed::detail {
namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_dtype(const char* op, Dtype dtype) {
  switch (dtype) {
    case kFloat32: return ncclFloat32;
    case kFloat64: return ncclFloat64;
    case kFloat16: return ncclFloat16;
    case kBFloat16: return ncclBfloat16;
    case kInt64: return ncclInt64;
    case kInt32: return ncclInt32;
    case kUInt8: return ncclUint8;
    default:
      TINY_THROW(DtypeError, op, ": backend \"nccl\" does not reduce ", dtype_name(dtype),
                 " tensors (use float32, float64, float16, bfloat16, int64, int32 or uint8)");
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return ncclSum;
    case ReduceOp::AVG: return ncclAvg;
    case ReduceOp::PRODUCT: return ncclProd;
    case ReduceOp::MIN: return ncclMin;
    case ReduceOp::MAX: return ncclMax;
  }
  return ncclSum;
}

// A CUDA event, destroyed with the last owner (the watchdog's entry or the Work).
struct EventBox {
  cudaEvent_t event = nullptr;
  ~EventBox() {
    if (event != nullptr) (void)cudaEventDestroy(event);
  }
};

struct Pending {
  uint64_t sequence;
  std::string call;  // "all_reduce of 4 float32 elements"
  Clock::time_point start;
  std::shared_ptr<EventBox> done;  // its event is null until recorded
};

// What the group, its Works and its watchdog share (a Work may outlive the group).
struct State {
  int rank = 0, size = 1, device = 0;
  std::chrono::milliseconds timeout{0};
  std::function<std::string()> lost_peers;
  ncclComm_t comm = nullptr;

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Pending> pending;
  uint64_t next_sequence = 1;
  std::string broken;                // the first failure; every later call throws it
  uint64_t failed_from = UINT64_MAX;  // collectives from this sequence on did not complete
  bool aborted = false;              // comm was aborted and must not be used again
  bool stopping = false;
  int callers = 0;                   // threads between the broken check and the end of their NCCL call
  std::condition_variable callers_done;

  // Throws the failure if collective `sequence` is among the failed ones (callers hold no lock).
  void check(uint64_t sequence) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!broken.empty() && sequence >= failed_from) throw DistributedError(broken);
  }

  // Marks the group broken and aborts the communicator; `lock` holds `mutex`
  // and is released while waiting for the threads inside an NCCL call.
  void fail_locked(std::unique_lock<std::mutex>& lock, const Pending& oldest, const std::string& reason) {
    const std::string gone = lost_peers ? lost_peers() : std::string();
    const std::string what = oldest.call.substr(0, oldest.call.find(' '));
    broken = what + " failed on rank " + std::to_string(rank) + " (NCCL collective #" +
             std::to_string(oldest.sequence) + ", " + oldest.call + "): " +
             (gone.empty() ? reason : gone + "; " + reason) +
             ". The NCCL communicator was aborted: every later collective of this process group fails; call "
             "destroy_process_group()";
    failed_from = oldest.sequence;
    std::cerr << "[rank " << rank << "] tiny NCCL watchdog: " << broken << std::endl;
    if (!aborted) {
      aborted = true;
      // ncclCommAbort frees the communicator. A thread that passed the broken
      // check just before is about to call NCCL with it, or is inside a call
      // that returns at once (collectives only enqueue): let it finish first.
      // One stuck inside NCCL (connecting to a dead peer) needs the abort to
      // return, so the wait is short.
      callers_done.wait_for(lock, kCallerGrace, [this] { return callers == 0; });
      (void)nccl().comm_abort(comm);  // the stuck kernels return; the streams drain
    }
  }

  static constexpr std::chrono::milliseconds kCallerGrace{1000};
};

// ncclCommInitRank, bounded by the timeout. It blocks until every rank has
// joined NCCL's bootstrap and has no timeout of its own, so a rank that is
// gone after the store's barrier (it crashed, or chose another backend) would
// hang the others forever. The call runs on a helper thread; the caller waits
// up to the timeout and then fails naming the lost peers. The helper is left
// inside NCCL (nothing can interrupt it), and aborts the communicator itself
// should it ever be made.
ncclComm_t init_communicator(const ncclUniqueId& id, const NcclSetup& setup) {
  struct Call {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false, abandoned = false;
    ncclComm_t comm = nullptr;
    std::string error;  // NCCL's message, read on the thread that made the call (it is per thread)
  };
  auto call = std::make_shared<Call>();
  try {
    std::thread([call, id, rank = setup.rank, size = setup.size, device = setup.device] {
      (void)cudaSetDevice(device);  // NCCL takes CUDA's current device
      ncclComm_t comm = nullptr;
      const ncclResult_t result = nccl().comm_init_rank(&comm, size, id, rank);
      std::string error = result == ncclSuccess ? "" : nccl_error_message(result, "ncclCommInitRank", nullptr);
      std::lock_guard<std::mutex> lock(call->mutex);
      if (call->abandoned) {
        if (result == ncclSuccess) (void)nccl().comm_abort(comm);
        return;
      }
      call->done = true;
      call->comm = comm;
      call->error = std::move(error);
      call->done_cv.notify_all();
    }).detach();
  } catch (const std::system_error& e) {
    TINY_THROW(distributed::DistributedError, "init_process_group: could not start a thread for ncclCommInitRank (",
               e.what(), ")");
  }
  std::unique_lock<std::mutex> lock(call->mutex);
  if (!call->done_cv.wait_for(lock, setup.timeout, [&] { return call->done; })) {
    call->abandoned = true;
    lock.unlock();
    const std::string gone = setup.lost_peers ? setup.lost_peers() : std::string();
    // With peers, one that is gone is the likely cause; alone, or with every
    // peer alive, NCCL's own set-up was this slow (under compute-sanitizer, say).
    const std::string peers =
        setup.size == 1 ? std::string(". ")
                        : " (ncclCommInitRank waits for every rank)" + (gone.empty() ? std::string() : ": " + gone) +
                              ". Did every rank call init_process_group(\"nccl\", ...), and is each one alive? If so, ";
    TINY_THROW(distributed::DistributedError, "init_process_group: rank ", setup.rank, " on cuda:", setup.device,
               ": NCCL's communicator of ", setup.size, setup.size == 1 ? " rank" : " ranks",
               " was not complete within the timeout of ", setup.timeout.count(), " ms", peers,
               "ncclCommInitRank itself may be this slow here (under compute-sanitizer or a debugger, say): give "
               "init_process_group a longer timeout, or set TINY_DIST_TIMEOUT (seconds)");
  }
  TINY_CHECK(call->error.empty(), distributed::DistributedError, "init_process_group: rank ", setup.rank, " on cuda:",
             setup.device, ": ", call->error,
             " (every rank needs its own GPU: call tiny::cuda::set_device(local_rank()) before init_process_group)");
  return call->comm;
}

// The caller's current stream of `device`, as CUDA's stream.
cudaStream_t native_current_stream(int device) {
  gpu::CudaRuntime* runtime = gpu::CudaRuntime::instance();
  TINY_CHECK(runtime != nullptr, distributed::DistributedError,
             "backend \"nccl\": there is no CUDA runtime (no usable GPU)");
  return runtime->native_stream(gpu::current_stream(device));
}

class NcclWorkImpl final : public NcclWork {
 public:
  NcclWorkImpl(std::shared_ptr<State> state, uint64_t sequence, std::shared_ptr<EventBox> done)
      : state_(std::move(state)), sequence_(sequence), done_(std::move(done)) {}

  void wait() override {
    state_->check(sequence_);
    gpu::CudaDeviceGuard guard(state_->device);
    const cudaError_t err = cudaStreamWaitEvent(native_current_stream(state_->device), done_->event, 0);
    if (err != cudaSuccess) gpu::throw_cuda_error(err, "cudaStreamWaitEvent", state_->device);
  }

  void synchronize() override {
    // Polls, so that an abort by the watchdog (which ends the wait) is seen as the failure it is.
    for (;;) {
      const cudaError_t err = cudaEventQuery(done_->event);
      if (err == cudaSuccess) break;
      if (err != cudaErrorNotReady) gpu::throw_cuda_error(err, "cudaEventQuery", state_->device);
      state_->check(sequence_);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    state_->check(sequence_);  // an aborted collective also "finishes"
  }

 private:
  std::shared_ptr<State> state_;
  uint64_t sequence_;
  std::shared_ptr<EventBox> done_;
};

class NcclGroupImpl final : public NcclGroup {
 public:
  NcclGroupImpl(const std::vector<char>& unique_id, const NcclSetup& setup) : state_(std::make_shared<State>()) {
    state_->rank = setup.rank;
    state_->size = setup.size;
    state_->device = setup.device;
    state_->timeout = setup.timeout;
    state_->lost_peers = setup.lost_peers;
    ncclUniqueId id;
    TINY_CHECK(unique_id.size() == sizeof id.internal, distributed::DistributedError,
               "init_process_group: the NCCL unique id from the store has ", unique_id.size(), " bytes, expected ",
               sizeof id.internal, " (do all ranks run the same NCCL?)");
    std::memcpy(id.internal, unique_id.data(), sizeof id.internal);
    state_->comm = init_communicator(id, setup);
    watchdog_ = std::thread([state = state_] { watch(*state); });
  }

  ~NcclGroupImpl() override {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->stopping = true;
    }
    state_->wake.notify_all();
    watchdog_.join();
    // Queued collectives finish first (within the timeout, unless NCCL reports
    // an error); then the communicator is aborted, as PyTorch 1.13's
    // ~ProcessGroupNCCL does: unlike ncclCommDestroy, ncclCommAbort never
    // waits for a peer, so a rank whose peers are gone still leaves.
    const auto deadline = Clock::now() + state_->timeout;
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->aborted) return;
    // At exit without destroy_process_group(), the CUDA runtime may be gone
    // already: leave the communicator to the process's end.
    int current = 0;
    if (cudaGetDevice(&current) == cudaErrorCudartUnloading) return;
    for (const Pending& p : state_->pending) {
      ncclResult_t async = ncclSuccess;
      while (p.done != nullptr && cudaEventQuery(p.done->event) == cudaErrorNotReady && Clock::now() < deadline &&
             nccl().comm_get_async_error(state_->comm, &async) == ncclSuccess &&
             (async == ncclSuccess || async == ncclInProgress))
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    gpu::CudaDeviceGuard guard(state_->device);
    state_->aborted = true;
    (void)nccl().comm_abort(state_->comm);
  }

  int device() const override { return state_->device; }

  std::shared_ptr<NcclWork> all_reduce(const Tensor& tensor, ReduceOp op) override {
    const ncclDataType_t type = nccl_dtype("all_reduce", tensor.dtype());
    const size_t count = static_cast<size_t>(tensor.numel());
    return enqueue("all_reduce of " + std::to_string(count) + " " + dtype_name(tensor.dtype()) + " elements",
                   count, [&](ncclComm_t comm, cudaStream_t stream) {
                     void* data = tensor.unsafe_impl()->data();
                     return nccl().all_reduce(data, data, count, type, nccl_op(op), comm, stream);
                   });
  }

  std::shared_ptr<NcclWork> broadcast(const Tensor& tensor, int root) override {
    const ncclDataType_t type = nccl_dtype("broadcast", tensor.dtype());
    const size_t count = static_cast<size_t>(tensor.numel());
    return enqueue("broadcast of " + std::to_string(count) + " " + dtype_name(tensor.dtype()) +
                       " elements from rank " + std::to_string(root),
                   count, [&](ncclComm_t comm, cudaStream_t stream) {
                     void* data = tensor.unsafe_impl()->data();
                     return nccl().broadcast(data, data, count, type, root, comm, stream);
                   });
  }

  std::shared_ptr<NcclWork> all_gather(const Tensor& input, const Tensor& output) override {
    const ncclDataType_t type = nccl_dtype("all_gather", input.dtype());
    const size_t count = static_cast<size_t>(input.numel());
    return enqueue("all_gather of " + std::to_string(count) + " " + dtype_name(input.dtype()) + " elements per rank",
                   count, [&](ncclComm_t comm, cudaStream_t stream) {
                     return nccl().all_gather(input.unsafe_impl()->data(), output.unsafe_impl()->data(), count, type,
                                              comm, stream);
                   });
  }

  std::shared_ptr<NcclWork> reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override {
    const ncclDataType_t type = nccl_dtype("reduce_scatter", output.dtype());
    const size_t count = static_cast<size_t>(output.numel());
    return enqueue("reduce_scatter of " + std::to_string(count) + " " + dtype_name(output.dtype()) +
                       " elements per rank",
                   count, [&](ncclComm_t comm, cudaStream_t stream) {
                     return nccl().reduce_scatter(input.unsafe_impl()->data(), output.unsafe_impl()->data(), count,
                                                  type, nccl_op(op), comm, stream);
                   });
  }

  void barrier() override {
    // A new one-element tensor each time: the caching allocator serves it from its pool.
    Tensor one = zeros({1}, TensorOptions(kFloat32).device(Device(kCUDA, state_->device)));
    all_reduce(one, ReduceOp::SUM)->synchronize();
  }

 private:
  template <typename Call>
  std::shared_ptr<NcclWork> enqueue(std::string call, size_t count, Call&& fn) {
    gpu::CudaDeviceGuard guard(state_->device);
    const cudaStream_t stream = native_current_stream(state_->device);
    auto done = std::make_shared<EventBox>();
    cudaError_t err = cudaEventCreateWithFlags(&done->event, cudaEventDisableTiming);
    if (err != cudaSuccess) gpu::throw_cuda_error(err, "cudaEventCreateWithFlags", state_->device);
    const std::string what = call.substr(0, call.find(' '));  // "all_reduce"
    uint64_t sequence = 0;
    ncclComm_t comm = nullptr;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (!state_->broken.empty()) throw DistributedError(state_->broken);
      sequence = state_->next_sequence++;
      comm = state_->comm;
      // Registered before NCCL is called: a call that blocks inside NCCL is timed too.
      state_->pending.push_back({sequence, std::move(call), Clock::now(), nullptr});
      ++state_->callers;  // the watchdog does not free comm under this call (State::fail_locked)
    }
    std::string failure;  // NCCL's message, read while comm is still ours
    {
      struct CallerGuard {
        State& state;
        ~CallerGuard() {
          std::lock_guard<std::mutex> lock(state.mutex);
          if (--state.callers == 0) state.callers_done.notify_all();
        }
      } caller{*state_};
      if (count > 0) {
        const ncclResult_t result = fn(comm, stream);
        if (result != ncclSuccess) failure = nccl_error_message(result, "nccl " + what, comm);
      }
    }
    if (!failure.empty()) {
      const std::string described = forget(sequence);
      state_->check(sequence);  // the watchdog aborted the communicator under this call
      TINY_THROW(distributed::DistributedError, what, " on rank ", state_->rank, " (", described, "): ", failure);
    }
    err = cudaEventRecord(done->event, stream);
    if (err != cudaSuccess) {
      forget(sequence);
      gpu::throw_cuda_error(err, "cudaEventRecord", state_->device);
    }
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      for (Pending& p : state_->pending)
        if (p.sequence == sequence) p.done = done;
    }
    return std::make_shared<NcclWorkImpl>(state_, sequence, done);
  }

  // Takes collective `sequence` off the watchdog's list (it was never enqueued); returns its description.
  std::string forget(uint64_t sequence) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (auto it = state_->pending.begin(); it != state_->pending.end(); ++it)
      if (it->sequence == sequence) {
        std::string call = it->call;
        state_->pending.erase(it);
        return call;
      }
    return "";
  }

  static void watch(State& state) {
    // cudaEventQuery and ncclCommAbort need no current device, but keep CUDA's calls on the group's.
    (void)cudaSetDevice(state.device);
    std::unique_lock<std::mutex> lock(state.mutex);
    while (!state.stopping) {
      state.wake.wait_for(lock, std::chrono::milliseconds(50));
      if (state.stopping || state.aborted) continue;
      while (!state.pending.empty()) {
        const Pending& p = state.pending.front();
        if (p.done == nullptr || cudaEventQuery(p.done->event) != cudaSuccess) break;
        state.pending.pop_front();
      }
      if (state.pending.empty()) continue;
      const Pending& oldest = state.pending.front();
      ncclResult_t async = ncclSuccess;
      const ncclResult_t got = nccl().comm_get_async_error(state.comm, &async);
      if (got != ncclSuccess) async = got;
      if (async != ncclSuccess && async != ncclInProgress) {
        state.fail_locked(lock, oldest, nccl_error_message(async, "reported by ncclCommGetAsyncError", state.comm));
      } else if (Clock::now() - oldest.start > state.timeout) {
        state.fail_locked(lock, oldest, "it did not complete within the timeout of " + std::to_string(state.timeout.count()) +
                                      " ms (is a peer stuck, or calling other collectives, or the same ones on other "
                                      "sizes, in another order?)");
      }
    }
  }

  std::shared_ptr<State> state_;
  std::thread watchdog_;
};

}  // namespace

std::unique_ptr<NcclGroup> nccl_create_group(const std::vector<char>& unique_id, const NcclSetup& setup) {
  return std::make_unique<NcclGroupImpl>(unique_id, setup);
}

}  // namespace tiny::distributed::detail
