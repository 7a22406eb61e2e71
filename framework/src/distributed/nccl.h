// The NCCL side of a process group with backend "nccl": what the rest of
// tiny::distributed (plain C++, no CUDA headers) asks of it.
//
// libnccl is loaded with dlopen on first use, never linked (as cuBLAS in
// backend/cuda/gemm.cu): linking it would make every program that uses tiny
// load a 200 MB library at start, GPU or not. The implementation lives in
// distributed/nccl/ (compiled with the CUDA toolkit and nccl.h, into
// tiny_cuda); builds without them get distributed/nccl_stub.cpp, whose calls
// throw DistributedError saying so.
//
// Collectives are enqueued on the calling thread's current tiny stream of the
// communicator's device and return at once (asynchronous to the host, as
// PyTorch's ProcessGroupNCCL); a watchdog thread aborts the communicator when
// a collective fails or outlives the timeout, after which every call throws
// DistributedError naming the collective that failed.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tiny/distributed/distributed.h"
#include "tiny/tensor.h"

namespace tiny::distributed::detail {

/// The variable that names the NCCL library to load instead of libnccl.so.2
/// (a path or a file name; tests point it at a library that does not exist).
inline constexpr const char* kNcclLibraryVariable = "TINY_NCCL_LIBRARY";

/// True when this build has the NCCL path (built with the CUDA toolkit and nccl.h).
bool nccl_built();

/// Loads libnccl once (TINY_NCCL_LIBRARY if set, else libnccl.so.2 from the
/// loader's path, then the one beside libcudart) and returns its version,
/// e.g. "2.28.9". Throws DistributedError naming the library and the fix.
std::string nccl_version();

/// Tries to load `library` now, without caching: its version, or a
/// DistributedError naming it and what dlopen said (the loader's check, for tests).
std::string nccl_try_load(const std::string& library);

/// A collective enqueued by NCCL on a stream.
class NcclWork {
 public:
  virtual ~NcclWork() = default;
  /// Makes the calling thread's current stream of the device wait for the
  /// collective (the host does not wait); throws if the communicator failed.
  virtual void wait() = 0;
  /// Waits on the host until the collective has finished; throws
  /// DistributedError if it failed or the communicator was aborted.
  virtual void synchronize() = 0;
};

/// One rank's NCCL communicator on one device.
class NcclGroup {
 public:
  virtual ~NcclGroup() = default;
  /// The device the communicator was created on.
  virtual int device() const = 0;
  /// In-place all-reduce of a contiguous tensor on device().
  virtual std::shared_ptr<NcclWork> all_reduce(const Tensor& tensor, ReduceOp op) = 0;
  /// The same, on a stream of its own where the backend has one (the emulated
  /// GPU's NCCL): the current stream does not wait for it until the work's
  /// wait(), so DDP's all-reduces overlap the rest of backward.
  virtual std::shared_ptr<NcclWork> all_reduce_overlapped(const Tensor& tensor, ReduceOp op) {
    return all_reduce(tensor, op);
  }
  /// In-place broadcast of a contiguous tensor on device() from rank `root`.
  virtual std::shared_ptr<NcclWork> broadcast(const Tensor& tensor, int root) = 0;
  /// `output` (contiguous, size() times the elements of `input`) gets every rank's `input`, in rank order.
  virtual std::shared_ptr<NcclWork> all_gather(const Tensor& input, const Tensor& output) = 0;
  /// `output` gets slot `rank` of the reduction of `input` (contiguous, size() times the elements of `output`).
  virtual std::shared_ptr<NcclWork> reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) = 0;
  /// An all-reduce of one element, then a wait on the host (PyTorch's NCCL barrier).
  virtual void barrier() = 0;
};

/// What a communicator needs to know about its rank.
struct NcclSetup {
  int rank = 0;
  int size = 1;
  int device = 0;
  std::chrono::milliseconds timeout{0};
  /// Names the peers that are gone ("rank 1 is gone (...)"), or "" (the watchdog's diagnosis).
  std::function<std::string()> lost_peers;
};

/// A fresh ncclUniqueId's bytes (rank 0 makes it and shares it through the store).
std::vector<char> nccl_unique_id();

/// This rank's communicator (ncclCommInitRank on `setup.device`, which waits
/// until every rank has called it with the same id: a DistributedError naming
/// the lost peers when that takes longer than `setup.timeout`).
std::unique_ptr<NcclGroup> nccl_create_group(const std::vector<char>& unique_id, const NcclSetup& setup);

}  // namespace tiny::distributed::detail
