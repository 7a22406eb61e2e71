/// @file distributed/distributed.h
/// @brief Several processes training together: the process group and its collectives (PyTorch's `torch.distributed`).
///
/// Each process (a "rank") calls init_process_group() once; the ranks find each
/// other through a rendezvous (a key-value store) and connect to each other.
/// Then every rank calls the same collectives in the same order:
/// @code
/// tiny::distributed::init_process_group("gloo");       // RANK, WORLD_SIZE, MASTER_ADDR/PORT from tinyrun
/// tiny::Tensor loss_sum = tiny::tensor({epoch_loss});
/// tiny::distributed::all_reduce(loss_sum);              // now the sum over every rank
/// tiny::distributed::destroy_process_group();
/// @endcode
///
/// Backends: "gloo" (CPU tensors and tensors on the emulated GPU, which are
/// staged through host memory; every call waits until its collective is done)
/// and "nccl" (tensors on real NVIDIA GPUs only; every call enqueues its
/// collective on the calling thread's current stream and returns at once, as
/// in PyTorch: later work on that stream sees the result, and `.cpu()` or
/// `item()` wait for it). Every collective has a timeout: a peer that died, or
/// never joined, gives a DistributedError naming its rank, never a hang.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tiny/distributed/store.h"
#include "tiny/tensor.h"

namespace tiny::distributed {

/// @brief How a collective combines the ranks' values (PyTorch's `ReduceOp`).
enum class ReduceOp {
  SUM,      ///< element-wise sum
  AVG,      ///< element-wise mean over the ranks
  PRODUCT,  ///< element-wise product
  MIN,      ///< element-wise minimum
  MAX,      ///< element-wise maximum
};

/// @brief The timeout used when none is given: `TINY_DIST_TIMEOUT` seconds if set, else 300 s.
///
/// PyTorch's default is 30 minutes; a few minutes is enough for a workbook,
/// and tests set `TINY_DIST_TIMEOUT=5` so that a failure shows within seconds.
std::chrono::milliseconds default_timeout();

/// @brief Joins the process group of this run (PyTorch's `init_process_group`).
///
/// `backend`: "gloo" or "nccl". "nccl" needs real GPUs (elsewhere it throws
/// DistributedError saying to use "gloo") and NCCL's library, libnccl.so.2,
/// which is loaded now (from the loader's path, else beside the CUDA runtime;
/// `TINY_NCCL_LIBRARY` names another file): a DistributedError names it when
/// it cannot be loaded. Each rank's communicator is made on the calling
/// thread's current device: as in PyTorch, pick it first, one GPU per rank:
/// @code
/// tiny::cuda::set_device(tiny::distributed::local_rank());
/// tiny::distributed::init_process_group("nccl");
/// @endcode
/// With "nccl", a collective that fails, or is not done within `timeout`
/// (a peer died, or calls other collectives), is noticed by a watchdog
/// thread, which aborts the communicator and prints the reason; from then on
/// every collective, and barrier(), throws DistributedError naming the
/// collective that failed and the peers that are gone. barrier() waits on the
/// host, so it is where a failure shows at the latest.
/// `init_method` says where the rendezvous is:
/// - "env://" (default): `MASTER_ADDR` and `MASTER_PORT` from the environment;
///   `tinyrun` serves the store there; without tinyrun, rank 0 serves it.
///   Under `tinyrun --rdzv redis://...` or `--rdzv file://...`, tinyrun sets
///   `TINY_INIT_METHOD` to that URL instead, and "env://" uses it;
/// - "tcp://HOST:PORT": the same with the address given here;
/// - "file:///path/to/dir": a Gloo FileStore in that directory, which must be
///   fresh for each run (a directory with keys of an earlier run is refused);
/// - "redis://HOST[:PORT]/RUN_ID": a Gloo RedisStore on a Redis server (port
///   6379 by default), the keys under RUN_ID; keys stay in Redis after a job,
///   so every job needs a fresh RUN_ID (as torchrun's `--rdzv-id`), and a
///   reused one is refused.
/// `world_size` and `rank` (-1: from the environment: `RANK`/`WORLD_SIZE` as
/// tinyrun and torchrun set them, else those of `mpirun` (OMPI_COMM_WORLD_*,
/// PMI_*) or SLURM (SLURM_PROCID, SLURM_NTASKS)). `timeout` bounds the
/// rendezvous and every later collective (0: default_timeout()).
/// Throws DistributedError when a rank does not join in time, naming it.
/// SIGPIPE is ignored from then on (unless a handler was installed), so that a
/// peer that died gives an error, not a silent death by that signal.
void init_process_group(const std::string& backend, const std::string& init_method = "env://", int world_size = -1,
                        int rank = -1, std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

/// @brief True between init_process_group() and destroy_process_group() (PyTorch's `is_initialized`).
bool is_initialized();
/// @brief This process's rank, 0..world_size-1 (PyTorch's `get_rank`); throws unless initialized.
int get_rank();
/// @brief The number of processes in the group (PyTorch's `get_world_size`); throws unless initialized.
int get_world_size();
/// @brief The backend in use, "gloo" or "nccl" (PyTorch's `get_backend`).
std::string get_backend();
/// @brief This process's index on its machine: `LOCAL_RANK` (or mpirun's/SLURM's), 0 when unset.
///
/// Use it to pick the GPU: `tiny::Device device("cuda:" + std::to_string(local_rank()))`.
int local_rank();

/// @brief Waits until every rank has reached this call (PyTorch's `barrier`).
///
/// With "nccl": an all-reduce of one element on the GPU, then a wait on the host for it.
void barrier();
/// @brief Combines `tensor` over every rank with `op`, in place, on every rank (PyTorch's `all_reduce`).
///
/// Supports float32, float64 and int64 tensors on the CPU or a GPU ("nccl" also
/// float16 and bfloat16; "nccl" needs the tensor on this rank's GPU: with a CPU
/// tensor it throws DeviceError, "Tensors must be CUDA and dense").
void all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::SUM);
/// @brief Copies rank `src`'s `tensor` into `tensor` on every other rank (PyTorch's `broadcast`).
void broadcast(const Tensor& tensor, int src);
/// @brief Fills `tensor_list` (world_size tensors shaped like `tensor`) with every rank's `tensor` (PyTorch's `all_gather`).
///
/// `tensor_list` may be empty: it is then filled with new tensors.
void all_gather(std::vector<Tensor>& tensor_list, const Tensor& tensor);
/// @brief Reduces `input_list[i]` over the ranks with `op` and leaves the result of slot `rank` in `output` (PyTorch's `reduce_scatter`).
void reduce_scatter(const Tensor& output, const std::vector<Tensor>& input_list, ReduceOp op = ReduceOp::SUM);
/// @brief How many collectives of one kind this process issued, and their size.
struct CollectiveCount {
  int64_t calls = 0;  ///< collectives issued by this process
  /// @brief Their sizes added up, in bytes, as nccl-tests counts a collective's size: the tensor of an
  /// all_reduce or a broadcast, the whole gathered output of an all_gather (world_size x the tensor),
  /// the whole input of a reduce_scatter (world_size x the output); 0 for a barrier.
  int64_t bytes = 0;
};

/// @brief The collectives this process issued in its process group, by kind (see collective_counts()).
struct CollectiveCounts {
  CollectiveCount all_reduce;      ///< all_reduce() calls, and the all-reduces of DDP's buckets
  CollectiveCount broadcast;       ///< broadcast() calls (DDP's broadcasts of rank 0's weights and buffers too)
  CollectiveCount all_gather;      ///< all_gather() calls
  CollectiveCount reduce_scatter;  ///< reduce_scatter() calls
  CollectiveCount barrier;         ///< barrier() calls
  /// @brief Every kind added up.
  CollectiveCount total() const;
};

/// @brief The collectives this process issued since it joined its process group, or since
/// reset_collective_counts(): calls and bytes per kind.
///
/// tiny has one process group, the default one, so these are that group's.
/// Every call of all_reduce(), broadcast(), all_gather(), reduce_scatter() and
/// barrier() counts once, whatever the backend, and so does each all-reduce of
/// a DistributedDataParallel bucket (one per bucket per synchronized backward).
/// What the framework exchanges for itself on the host (DDP's check that every
/// rank built the same model, the modelled clocks' agreement) is not counted.
/// The counts stay readable after destroy_process_group(); init_process_group()
/// resets them. Lessons and tests read them to see, without a clock, that a
/// training step made the collectives it needed and no more (PyTorch shows the
/// same in its profiler, as `nccl:all_reduce` events, and with
/// `TORCH_DISTRIBUTED_DEBUG=DETAIL`). Thread-safe.
CollectiveCounts collective_counts();
/// @brief Sets every count of collective_counts() to zero.
void reset_collective_counts();

/// @brief Leaves the process group and frees its connections (PyTorch's `destroy_process_group`).
void destroy_process_group();

}  // namespace tiny::distributed
