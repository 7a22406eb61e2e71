/// @file nn/parallel/distributed.h
/// @brief `DistributedDataParallel`: one model replica per process, gradients averaged during backward
/// (PyTorch's `torch.nn.parallel.DistributedDataParallel`).
///
/// Every rank builds the same model, wraps it, and trains on its own share of
/// the data (a DistributedSampler). The wrapper
/// - copies rank 0's parameters and buffers to every rank when it is built, so
///   all replicas start equal, after checking that every rank has the same
///   parameter shapes;
/// - groups the gradients into buckets (the last parameters first, since
///   backward produces their gradients first; the first bucket holds up to
///   1 MiB, the others up to 25 MiB, as PyTorch's) and all-reduces each bucket
///   as soon as all of its gradients are ready, while backward goes on with the
///   rest of the model;
/// - leaves every rank with the mean of the ranks' gradients, so the optimizer
///   steps stay identical on every rank.
/// @code
/// tiny::distributed::init_process_group("gloo");
/// auto model = std::make_shared<Net>();
/// model->to(device);
/// auto ddp = std::make_shared<tiny::nn::parallel::DistributedDataParallel>(model);
/// tiny::optim::SGD optimizer(ddp->parameters(), 0.1);
/// loss = F::cross_entropy((*ddp)(x), y); loss.backward(); optimizer.step();
/// @endcode
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tiny/nn/module.h"

namespace tiny::distributed::detail {
class ProcessGroup;
class Work;
class NcclWork;
}  // namespace tiny::distributed::detail

namespace tiny::nn::parallel {

/// @brief Settings of DistributedDataParallel (PyTorch's constructor arguments).
struct DistributedDataParallelOptions {
  /// @brief Capacity of every bucket but the first, in MiB (PyTorch's `bucket_cap_mb`, default 25).
  double bucket_cap_mb = 25;
  /// @brief Capacity of the first bucket, in MiB (PyTorch's `dist._DEFAULT_FIRST_BUCKET_BYTES`, 1 MiB).
  ///
  /// Small so that the first all-reduce starts early in backward.
  double first_bucket_cap_mb = 1;
  /// @brief Copy rank 0's buffers (running statistics) to every rank before each forward (PyTorch's `broadcast_buffers`).
  bool broadcast_buffers = true;
};

/// @brief One moment in the life of a backward pass, recorded for profiling and tests.
struct CommEvent {
  /// @brief What happened.
  enum class Kind {
    GradReady,       ///< backward finished the gradient of parameter `index`
    /// the all-reduce of bucket `index` started on the communication thread
    /// (backend "nccl": was enqueued on the GPU stream; the host does not see it start)
    AllReduceStart,
    /// the all-reduce of bucket `index` finished (backend "nccl": the stream was
    /// made to wait for it at the end of backward, before the gradients are copied back)
    AllReduceEnd,
  };
  Kind kind;              ///< what happened
  int64_t index;          ///< the parameter (GradReady) or the bucket
  double microseconds;    ///< time since the forward of this iteration began
};

/// @brief A model replicated over processes whose gradients are averaged during backward (PyTorch's `DistributedDataParallel`).
///
/// Needs tiny::distributed::init_process_group() first. The model lives on one
/// device (the CPU or `cuda:LOCAL_RANK`). Every parameter that requires a
/// gradient must receive one in every backward (PyTorch's default
/// `find_unused_parameters=False`). Its parameters(), state_dict() (with the
/// prefix "module.") and train()/eval() are those of the wrapped module;
/// save `ddp.module()->state_dict()` to get the plain model's keys.
class DistributedDataParallel : public Module {
 public:
  /// @brief Wraps `module`: checks the shapes on every rank, broadcasts rank 0's parameters and buffers, builds the buckets.
  ///
  /// Throws tiny::distributed::DistributedError when the ranks' models differ,
  /// naming the rank and the first parameter that differs.
  explicit DistributedDataParallel(std::shared_ptr<Module> module, DistributedDataParallelOptions options = {});
  /// @brief Unregisters the gradient hooks.
  ~DistributedDataParallel() override;

  /// @brief The wrapped model's forward; readies this iteration's gradient synchronization.
  ///
  /// Throws tiny::Error when the previous backward left a reduction unfinished
  /// (a parameter got no gradient), in PyTorch's words.
  Tensor forward(const Tensor& input) override;

  /// @brief The wrapped model (PyTorch's `ddp.module`).
  std::shared_ptr<Module> module() const { return module_; }

  /// @brief Turns gradient synchronization off while alive (PyTorch's `with ddp.no_sync():`).
  ///
  /// The forward and backward passes run inside the guard's scope only
  /// accumulate gradients locally; the first backward after it all-reduces
  /// the accumulated sums. Use it for gradient accumulation:
  /// @code
  /// { auto guard = ddp->no_sync(); loss1.backward(); }   // local only
  /// loss2.backward();                                     // synchronizes both
  /// @endcode
  class NoSyncGuard {
   public:
    /// @brief Turns synchronization off for `ddp` (use DistributedDataParallel::no_sync()).
    explicit NoSyncGuard(DistributedDataParallel& ddp);
    /// @brief Turns it back to what it was.
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool previous_;
  };
  /// @brief A guard that turns gradient synchronization off for its scope (PyTorch's `no_sync()`).
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  /// @brief The parameter indices (into parameters()) of each bucket, in the order they are all-reduced.
  std::vector<std::vector<int64_t>> bucket_indices() const;
  /// @brief What happened during the last backward (gradients ready, all-reduces started and finished), in time order.
  std::vector<CommEvent> comm_events() const;

  /// @brief "DistributedDataParallel".
  std::string name() const override { return "DistributedDataParallel"; }

 private:
  struct Bucket {
    std::vector<int64_t> params;  // indices into params_
    std::vector<int64_t> offsets; // element offset of each parameter in `flat`
    Tensor flat;                  // gloo: a host staging buffer; nccl: on the parameters' GPU
    int64_t pending = 0;
    std::shared_ptr<distributed::detail::Work> work;            // gloo
    std::shared_ptr<distributed::detail::NcclWork> nccl_work;   // nccl
  };
  void build_buckets(const DistributedDataParallelOptions& options);
  void on_grad_ready(int64_t param);
  void launch_ready_buckets();
  void finish_reduction();
  void record(CommEvent::Kind kind, int64_t index);

  std::shared_ptr<Module> module_;
  DistributedDataParallelOptions options_;
  std::vector<Tensor> params_;
  std::vector<int64_t> bucket_of_;
  std::vector<Bucket> buckets_;
  std::vector<HookHandle> hooks_;
  bool sync_enabled_ = true;      // false inside no_sync()
  bool sync_this_backward_ = true;
  bool expect_reduction_ = false; // set by forward, cleared when the reduction finished
  int64_t ready_count_ = 0;
  size_t next_bucket_ = 0;
  double world_size_ = 1;
  int64_t start_ns_ = 0;
  std::vector<char> ready_;       // per parameter: its gradient arrived in this backward
  std::mutex state_mutex_;        // hooks may run on backward's worker threads
  mutable std::mutex events_mutex_;
  std::vector<CommEvent> events_;
};

}  // namespace tiny::nn::parallel
