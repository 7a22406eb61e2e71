// DistributedDataParallel: the shape check and broadcast at construction, the
// buckets, and the reducer driven by the post-accumulate-grad hooks (the shape
// of PyTorch's reducer.cpp, much smaller).
#include "tiny/nn/parallel/distributed.h"

#include <chrono>

#include "distributed/emulated_nccl.h"
#include "distributed/process_group.h"
#include "tiny/autograd.h"
#include "tiny/distributed/distributed.h"
#include "tiny/ops.h"

namespace tiny::nn::parallel {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t next = text.find(sep, pos);
    if (next == std::string::npos) next = text.size();
    if (next > pos) out.push_back(text.substr(pos, next - pos));
    pos = next + 1;
  }
  return out;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, DistributedDataParallelOptions options)
    : module_(std::move(module)), options_(options) {
  TINY_CHECK(module_, ValueError, "DistributedDataParallel: the module is null");
  TINY_CHECK(distributed::is_initialized(), distributed::DistributedError,
             "DistributedDataParallel: Default process group has not been initialized, please make sure to call "
             "init_process_group.");
  TINY_CHECK(options.bucket_cap_mb > 0 && options.first_bucket_cap_mb > 0, ValueError,
             "DistributedDataParallel: bucket_cap_mb (", options.bucket_cap_mb, ") and first_bucket_cap_mb (",
             options.first_bucket_cap_mb, ") must be positive");
  register_module("module", module_);
  auto& group = distributed::detail::default_group();
  world_size_ = group.size();

  // Every rank must hold the same model: compare names, shapes and dtypes with rank 0's.
  std::string mine;
  std::vector<std::pair<std::string, Tensor>> named = module_->named_parameters();
  for (const auto& [name, p] : named) {
    std::ostringstream entry;
    entry << name << " " << shape_str(p.sizes()) << " " << p.dtype();
    mine += entry.str() + "\n";
  }
  std::vector<std::string> all = group.all_gather_strings(mine);
  const auto reference = split(all[0], '\n');
  for (int r = 1; r < group.size(); ++r) {
    const auto theirs = split(all[r], '\n');
    if (theirs == reference) continue;
    std::string detail;
    for (size_t i = 0; i < std::max(theirs.size(), reference.size()); ++i) {
      const std::string a = i < reference.size() ? reference[i] : "(nothing)";
      const std::string b = i < theirs.size() ? theirs[i] : "(nothing)";
      if (a != b) {
        detail = "parameter " + std::to_string(i) + " is '" + a + "' on rank 0 but '" + b + "' on rank " +
                 std::to_string(r);
        break;
      }
    }
    TINY_THROW(distributed::DistributedError, "DDP expects same model across all ranks, but Rank ", r, " has ",
               theirs.size(), " params, while rank 0 has ", reference.size(), " params: ", detail,
               ". Build the same model on every rank.");
  }

  // Every replica starts from rank 0's values.
  {
    NoGradGuard no_grad;
    for (const auto& [name, p] : named) distributed::broadcast(p, 0);
    for (const Tensor& b : module_->buffers()) distributed::broadcast(b, 0);
  }

  for (const auto& [name, p] : named) {
    if (!p.requires_grad()) continue;
    TINY_CHECK(p.dtype() == kFloat32 || p.dtype() == kFloat64, DtypeError, "DistributedDataParallel: parameter '",
               name, "' has dtype ", p.dtype(), "; only float32 and float64 gradients are all-reduced");
    TINY_CHECK(params_.empty() || p.device() == params_[0].device(), DeviceError,
               "DistributedDataParallel: the module's parameters are on ", params_[0].device(), " and ", p.device(),
               "; move the whole model to one device (model->to(device)) before wrapping it");
    params_.push_back(p);
  }
  build_buckets(options);
  ready_.assign(params_.size(), 0);
  for (size_t i = 0; i < params_.size(); ++i)
    hooks_.push_back(params_[i].register_post_accumulate_grad_hook(
        [this, i](Tensor&) { on_grad_ready(static_cast<int64_t>(i)); }));
}

DistributedDataParallel::~DistributedDataParallel() {
  for (size_t i = 0; i < hooks_.size(); ++i) params_[i].remove_hook(hooks_[i]);
  // The communication thread may still write into the buckets' buffers.
  for (Bucket& b : buckets_) {
    if (!b.work) continue;
    try {
      b.work->wait();
    } catch (const std::exception&) {
    }
  }
}

void DistributedDataParallel::build_buckets(const DistributedDataParallelOptions& options) {
  // Backward produces the last parameters' gradients first: fill buckets in reverse order.
  const double mib = 1024.0 * 1024.0;
  double cap = options.first_bucket_cap_mb * mib;
  Bucket current;
  int64_t bytes = 0;
  Dtype dtype = params_.empty() ? kFloat32 : params_.back().dtype();
  // Gloo all-reduces host memory; NCCL (and the emulated GPU's NCCL) all-reduces
  // the buckets where the gradients are, on the GPU.
  const bool on_device =
      !params_.empty() && distributed::detail::gpu_collectives(distributed::detail::default_group(), params_[0]);
  const TensorOptions where = on_device ? TensorOptions(params_[0].device()) : TensorOptions();
  auto close = [&] {
    if (current.params.empty()) return;
    current.flat = zeros({bytes / static_cast<int64_t>(dtype == kFloat64 ? 8 : 4)}, where.dtype(dtype));
    buckets_.push_back(std::move(current));
    current = Bucket();
    bytes = 0;
    cap = options.bucket_cap_mb * mib;
  };
  bucket_of_.assign(params_.size(), -1);
  for (int64_t i = static_cast<int64_t>(params_.size()) - 1; i >= 0; --i) {
    const Tensor& p = params_[i];
    if (p.dtype() != dtype) {
      close();
      dtype = p.dtype();
    }
    current.offsets.push_back(bytes / static_cast<int64_t>(p.element_size()));
    current.params.push_back(i);
    bucket_of_[i] = static_cast<int64_t>(buckets_.size());
    bytes += p.numel() * static_cast<int64_t>(p.element_size());
    if (static_cast<double>(bytes) >= cap) close();
  }
  close();
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    if (expect_reduction_ && ready_count_ > 0) {
      std::string unused;
      for (size_t i = 0; i < params_.size(); ++i)
        if (!ready_[i]) unused += (unused.empty() ? "" : ", ") + std::to_string(i);
      TINY_THROW(Error,
                 "Expected to have finished reduction in the prior iteration before starting a new one. This error "
                 "indicates that your module has parameters that were not used in producing loss (parameter "
                 "indices that got no gradient: ",
                 unused, "). Every parameter of a DistributedDataParallel model must take part in the loss.");
    }
    const bool sync = sync_enabled_ && is_grad_enabled() && is_training();
    sync_this_backward_ = sync;
    expect_reduction_ = sync;
    ready_count_ = 0;
    next_bucket_ = 0;
    std::fill(ready_.begin(), ready_.end(), 0);
    for (Bucket& b : buckets_) {
      b.pending = static_cast<int64_t>(b.params.size());
      b.work.reset();
      b.nccl_work.reset();
    }
    start_ns_ = now_ns();
    std::lock_guard<std::mutex> events(events_mutex_);
    events_.clear();
  }
  if (options_.broadcast_buffers && sync_enabled_ && world_size_ > 1) {
    NoGradGuard no_grad;
    for (const Tensor& b : module_->buffers()) distributed::broadcast(b, 0);
  }
  return module_->forward(input);
}

void DistributedDataParallel::record(CommEvent::Kind kind, int64_t index) {
  std::lock_guard<std::mutex> lock(events_mutex_);
  events_.push_back({kind, index, static_cast<double>(now_ns() - start_ns_) / 1000.0});
}

void DistributedDataParallel::on_grad_ready(int64_t param) {
  std::lock_guard<std::mutex> lock(state_mutex_);
  if (!sync_this_backward_ || !expect_reduction_) return;
  TINY_CHECK(!ready_[param], Error, "Expected to mark a variable ready only once (parameter index ", param,
             " got its gradient twice in one backward). Call forward on the DistributedDataParallel model once per "
             "backward.");
  ready_[param] = 1;
  record(CommEvent::Kind::GradReady, param);
  Bucket& bucket = buckets_[bucket_of_[param]];
  const Tensor& p = params_[param];
  size_t slot = 0;
  while (bucket.params[slot] != param) ++slot;
  {
    NoGradGuard no_grad;
    // Divide before summing, as PyTorch does: the sum of the shares is the mean.
    Tensor view = bucket.flat.narrow(0, bucket.offsets[slot], p.numel()).view(p.sizes());
    view.copy_(p.grad());
    view.mul_(1.0 / world_size_);
  }
  --bucket.pending;
  ++ready_count_;
  launch_ready_buckets();
  if (ready_count_ == static_cast<int64_t>(params_.size())) finish_reduction();
}

void DistributedDataParallel::launch_ready_buckets() {
  auto& group = distributed::detail::default_group();
  // Buckets go out in order, so that every rank issues the same all-reduces in the same order.
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& b = buckets_[next_bucket_];
    const int64_t index = static_cast<int64_t>(next_bucket_);
    distributed::detail::count_collective(&distributed::CollectiveCounts::all_reduce,
                                          b.flat.numel() * static_cast<int64_t>(b.flat.element_size()));
    if (distributed::detail::NcclGroup* nccl = distributed::detail::gpu_collectives(group, b.flat)) {
      // Issued after the copies that filled the bucket; it overlaps the rest of
      // backward where NCCL has a stream of its own (finish_reduction waits).
      record(CommEvent::Kind::AllReduceStart, index);
      b.nccl_work = nccl->all_reduce_overlapped(b.flat, distributed::ReduceOp::SUM);
      ++next_bucket_;
      continue;
    }
    b.work = group.all_reduce_async(
        b.flat.raw_data_ptr(), static_cast<size_t>(b.flat.numel()), b.flat.dtype(), distributed::ReduceOp::SUM,
        [this, index] { record(CommEvent::Kind::AllReduceStart, index); },
        [this, index] { record(CommEvent::Kind::AllReduceEnd, index); });
    ++next_bucket_;
  }
}

void DistributedDataParallel::finish_reduction() {
  expect_reduction_ = false;
  NoGradGuard no_grad;
  for (size_t index = 0; index < buckets_.size(); ++index) {
    Bucket& b = buckets_[index];
    if (b.nccl_work) {
      // The stream waits for the all-reduce (the host does not): the copies below run after it.
      b.nccl_work->wait();
      record(CommEvent::Kind::AllReduceEnd, static_cast<int64_t>(index));
    } else {
      b.work->wait();
    }
    for (size_t slot = 0; slot < b.params.size(); ++slot) {
      Tensor& p = params_[b.params[slot]];
      p.grad().copy_(b.flat.narrow(0, b.offsets[slot], p.numel()).view(p.sizes()));
    }
  }
}

std::vector<std::vector<int64_t>> DistributedDataParallel::bucket_indices() const {
  std::vector<std::vector<int64_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

std::vector<CommEvent> DistributedDataParallel::comm_events() const {
  std::lock_guard<std::mutex> lock(events_mutex_);
  return events_;
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel& ddp)
    : ddp_(ddp), previous_(ddp.sync_enabled_) {
  ddp_.sync_enabled_ = false;
}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() { ddp_.sync_enabled_ = previous_; }

}  // namespace tiny::nn::parallel
