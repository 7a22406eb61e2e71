#include "distributed/process_group.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/math.h>
#include <gloo/rendezvous/store.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "distributed/emulated_nccl.h"
#include "gpu/model/device_model.h"
#include "gpu/model/timeline.h"

namespace tiny::distributed::detail {
namespace {

std::string this_host() {
  char name[256] = {0};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// A process that exited but was not reaped yet is a zombie: kill(pid, 0) still succeeds.
bool process_gone(long pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return false;
  char state = text[close + 2];
  return state == 'Z' || state == 'X';
}

// FNV-1a: the same 32 bits on every rank for the same collective call.
uint32_t fingerprint(uint64_t sequence, const std::string& call) {
  uint32_t h = 2166136261u;
  auto mix = [&](unsigned char c) { h = (h ^ c) * 16777619u; };
  for (int i = 0; i < 8; ++i) mix(static_cast<unsigned char>(sequence >> (8 * i)));
  for (char c : call) mix(static_cast<unsigned char>(c));
  return h;
}

// "rank 1 is gone (its process exited or was killed)", or the same for several.
std::string describe_gone(const std::set<int>& gone) {
  std::string names;
  for (int r : gone) names += (names.empty() ? "" : ", ") + std::to_string(r);
  return (gone.size() == 1 ? "rank " : "ranks ") + names +
         (gone.size() == 1 ? " is gone (its process exited or was killed)"
                           : " are gone (their processes exited or were killed)");
}

template <typename T>
gloo::AllreduceOptions::Func reduce_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::PRODUCT:
      return [](void* c, const void* a, const void* b, size_t n) { gloo::product<T>(c, a, b, n); };
    case ReduceOp::MIN:
      return [](void* c, const void* a, const void* b, size_t n) { gloo::min<T>(c, a, b, n); };
    case ReduceOp::MAX:
      return [](void* c, const void* a, const void* b, size_t n) { gloo::max<T>(c, a, b, n); };
    default:
      return [](void* c, const void* a, const void* b, size_t n) { gloo::sum<T>(c, a, b, n); };
  }
}

template <typename T>
void run_all_reduce(const std::shared_ptr<gloo::Context>& context, void* data, size_t count, ReduceOp op,
                    uint32_t tag, std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions opts(context);
  opts.setOutput(static_cast<T*>(data), count);
  opts.setReduceFunction(reduce_function<T>(op));
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
  if (op == ReduceOp::AVG) {
    T* p = static_cast<T*>(data);
    for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / context->size);
  }
}

}  // namespace

void Work::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
  gpu::model::host_wait_until(end_ns_);  // the waiting thread's modelled clock
}

int64_t Work::end_ns() {
  std::lock_guard<std::mutex> lock(mutex_);
  return end_ns_;
}

bool Work::completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

ProcessGroup::ProcessGroup(std::shared_ptr<gloo::Context> context, std::vector<PeerInfo> peers, std::string backend,
                           std::chrono::milliseconds timeout, std::shared_ptr<TCPStore> tcp_store,
                           std::shared_ptr<gloo::rendezvous::Store> store,
                           std::vector<std::shared_ptr<void>> keep_alive)
    : context_(std::move(context)),
      peers_(std::move(peers)),
      backend_(std::move(backend)),
      timeout_(timeout),
      tcp_store_(std::move(tcp_store)),
      store_(std::move(store)),
      keep_alive_(std::move(keep_alive)),
      rank_(context_->rank),
      size_(context_->size) {
  thread_ = std::thread([this] { run(); });
}

ProcessGroup::~ProcessGroup() {
  nccl_.reset();  // waits for its queued collectives (bounded by the timeout)
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  thread_.join();
}

void ProcessGroup::run() {
  for (;;) {
    std::pair<std::shared_ptr<Work>, std::function<void()>> item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything submitted has run
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    item.second();
  }
}

std::shared_ptr<Work> ProcessGroup::submit(const char* what, std::string call, std::function<void(uint32_t)> fn,
                                           GlooTiming timing) {
  auto work = std::make_shared<Work>();
  // Timed on the submitting thread's clock, from the model's Gloo parameters
  // (a bad TINY_EMULATED_GPU_MODEL throws here, on the caller's thread).
  const int64_t ready = gpu::model::host_now();
  const int64_t cost =
      timing.modelled ? gpu::model::gloo_collective_ns(gpu::model::selected_model(), timing.kind, size_, timing.bytes) : 0;
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t sequence = next_sequence_++;
  uint32_t tag = fingerprint(sequence, call);
  if (timing.modelled) {
    // Before the bytes: agree on the latest ready time (one more int64 over
    // Gloo, tagged apart from the data), then run after the communication
    // thread's previous collective. Every rank computes the same end.
    auto data = std::move(fn);
    const uint32_t clock_tag = fingerprint(sequence, call + " (modelled clock)");
    fn = [this, work, data = std::move(data), ready, cost, clock_tag](uint32_t data_tag) {
      int64_t latest = ready;
      if (size_ > 1) run_all_reduce<int64_t>(context_, &latest, 1, ReduceOp::MAX, clock_tag, timeout_);
      comm_clock_ = std::max(latest, comm_clock_) + cost;
      {
        std::lock_guard<std::mutex> guard(work->mutex_);
        work->end_ns_ = comm_clock_;
      }
      data(data_tag);
    };
  }
  queue_.emplace_back(work, [this, work, what, sequence, tag, call = std::move(call), fn = std::move(fn)] {
    std::exception_ptr error;
    std::string broken;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      broken = broken_;
    }
    if (!broken.empty()) {
      error = std::make_exception_ptr(distributed::DistributedError(std::string(what) + " on rank " + std::to_string(rank_) +
                                                       ": the process group is broken by an earlier failure: " +
                                                       broken));
    } else {
      try {
        fn(tag);
      } catch (const distributed::DistributedError&) {
        error = std::current_exception();
      } catch (const std::exception& e) {
        std::string message = diagnose(what, sequence, call, e.what());
        {
          std::lock_guard<std::mutex> guard(mutex_);
          broken_ = message;
        }
        error = std::make_exception_ptr(distributed::DistributedError(message));
      }
    }
    std::lock_guard<std::mutex> guard(work->mutex_);
    work->error_ = error;
    work->done_ = true;
    work->done_cv_.notify_all();
  });
  queue_cv_.notify_one();
  return work;
}

std::string ProcessGroup::diagnose(const char* what, uint64_t sequence, const std::string& call,
                                   const std::string& cause) {
  // Publish this rank's call first: a peer diagnosing the same failure compares with it.
  if (store_) {
    try {
      store_->set(std::to_string(sequence) + "." + std::to_string(rank_), std::vector<char>(call.begin(), call.end()));
    } catch (const std::exception&) {
      // the store's server went away with its host (rank 0, or the launcher)
    }
  }
  // A killed peer closes its sockets a moment before it becomes a zombie: look for a while.
  std::set<int> gone;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  do {
    gone = gone_ranks();
    if (!gone.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < until);

  // Different calls are the cause even when the peer has left since: it failed on them first.
  std::vector<int> silent;
  std::string mismatch = find_mismatch(sequence, call, /*wait_for_peers=*/gone.empty(), &silent);
  std::string message = std::string(what) + " failed on rank " + std::to_string(rank_) + ": ";
  if (!mismatch.empty()) {
    message += mismatch;
  } else if (!gone.empty()) {
    message += describe_gone(gone);
  } else if (size_ == 2) {
    message += "rank " + std::to_string(1 - rank_) + " did not answer within the timeout of " +
               std::to_string(timeout_.count()) +
               " ms (is it stuck, or calling other collectives, or the same ones on other sizes, in another order?)";
  } else if (!silent.empty() && silent.size() < static_cast<size_t>(size_ - 1)) {
    // The others reached this collective (they published it): the silent ones are the cause.
    std::string names;
    for (int r : silent) names += (names.empty() ? "" : ", ") + std::to_string(r);
    message += (silent.size() == 1 ? "rank " : "ranks ") + names + " did" +
               " not reach this collective within the timeout of " + std::to_string(timeout_.count()) +
               " ms while the other ranks did (is it stuck, or calling other collectives?)";
  } else {
    message += "a peer did not answer within the timeout of " + std::to_string(timeout_.count()) +
               " ms (does every rank call the same collectives with the same shapes, in the same order?)";
  }
  return message + ". Gloo said: " + cause;
}

std::set<int> ProcessGroup::gone_ranks() {
  std::set<int> gone;
  if (tcp_store_) {
    try {
      for (int r : tcp_store_->lost_ranks()) gone.insert(r);
    } catch (const std::exception&) {
      // the store's server went away with its host (rank 0, or the launcher)
    }
  }
  const std::string host = this_host();
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && peers_[r].host == host && process_gone(peers_[r].pid)) gone.insert(r);
  return gone;
}

std::string ProcessGroup::lost_peers() {
  const std::set<int> gone = gone_ranks();
  return gone.empty() ? std::string() : describe_gone(gone);
}

std::string ProcessGroup::find_mismatch(uint64_t sequence, const std::string& call, bool wait_for_peers,
                                        std::vector<int>* silent) {
  if (!store_) return "";
  // A peer that called other collectives times out on them about when this rank did: give it a moment.
  const auto grace = std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(3));
  const auto deadline = std::chrono::steady_clock::now() + (wait_for_peers ? grace : std::chrono::milliseconds(50));
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const std::string key = std::to_string(sequence) + "." + std::to_string(r);
    std::string theirs;
    try {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      store_->wait({key}, std::max(left, std::chrono::milliseconds(1)));
      auto bytes = store_->get(key);
      theirs.assign(bytes.begin(), bytes.end());
    } catch (const std::exception&) {
      if (silent) silent->push_back(r);
      continue;  // it did not publish in time (it is stuck elsewhere, or gone), or the store is gone
    }
    if (theirs != call)
      return "Detected mismatch between collectives on ranks. Rank " + std::to_string(rank_) +
             " is running collective " + call + ", but Rank " + std::to_string(r) + " is running collective " +
             theirs + ": every rank must call the same collectives with the same shapes, in the same order";
  }
  return "";
}

std::shared_ptr<Work> ProcessGroup::all_reduce_async(void* data, size_t count, Dtype dtype, ReduceOp op,
                                                     std::function<void()> on_start, std::function<void()> on_end,
                                                     bool modelled) {
  std::string call = "all_reduce of " + std::to_string(count) + " " + dtype_name(dtype) + " elements";
  const GlooTiming timing{modelled, gpu::model::Collective::all_reduce,
                          static_cast<int64_t>(count * element_size(dtype))};
  return submit("all_reduce", std::move(call), [=](uint32_t tag) {
    if (on_start) on_start();
    if (size_ > 1 && count > 0) {
      switch (dtype) {
        case kFloat32: run_all_reduce<float>(context_, data, count, op, tag, timeout_); break;
        case kFloat64: run_all_reduce<double>(context_, data, count, op, tag, timeout_); break;
        case kInt64: run_all_reduce<int64_t>(context_, data, count, op, tag, timeout_); break;
        case kInt32: run_all_reduce<int32_t>(context_, data, count, op, tag, timeout_); break;
        case kUInt8: run_all_reduce<uint8_t>(context_, data, count, op, tag, timeout_); break;
        default:
          TINY_THROW(DtypeError, "all_reduce: unsupported dtype ", dtype,
                     " (use float32, float64, int64, int32 or uint8)");
      }
    }
    if (on_end) on_end();
  }, timing);
}

void ProcessGroup::all_reduce(void* data, size_t count, Dtype dtype, ReduceOp op) {
  all_reduce_async(data, count, dtype, op)->wait();
}

void ProcessGroup::broadcast(void* data, size_t bytes, int root) { broadcast_async(data, bytes, root)->wait(); }

std::shared_ptr<Work> ProcessGroup::broadcast_async(void* data, size_t bytes, int root, std::function<void()> on_start,
                                                    bool modelled) {
  const GlooTiming timing{modelled, gpu::model::Collective::broadcast, static_cast<int64_t>(bytes)};
  return submit("broadcast", "broadcast of " + std::to_string(bytes) + " bytes from rank " + std::to_string(root),
         [=](uint32_t tag) {
    if (on_start) on_start();
    if (size_ == 1 || bytes == 0) return;
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<char*>(data), bytes);
    opts.setRoot(root);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::broadcast(opts);
  }, timing);
}

void ProcessGroup::all_gather(const void* in, void* out, size_t bytes) { all_gather_async(in, out, bytes)->wait(); }

std::shared_ptr<Work> ProcessGroup::all_gather_async(const void* in, void* out, size_t bytes,
                                                     std::function<void()> on_start, bool modelled) {
  const GlooTiming timing{modelled, gpu::model::Collective::all_gather, static_cast<int64_t>(bytes) * size_};
  return submit("all_gather", "all_gather of " + std::to_string(bytes) + " bytes per rank", [=](uint32_t tag) {
    if (on_start) on_start();
    if (size_ == 1 || bytes == 0) {
      std::memcpy(out, in, bytes);
      return;
    }
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<char*>(static_cast<const char*>(in)), bytes);
    opts.setOutput(static_cast<char*>(out), bytes * size_);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::allgather(opts);
  }, timing);
}

int64_t ProcessGroup::agree_on_time(int64_t mine, const char* what, const std::string& call) {
  if (size_ == 1) return mine;
  auto latest = std::make_shared<int64_t>(mine);
  // The call is the collective's own name: a rank that called another one, or
  // the same on another size, is named here, before any bytes move.
  submit(what, call, [this, latest](uint32_t tag) {
    run_all_reduce<int64_t>(context_, latest.get(), 1, ReduceOp::MAX, tag, timeout_);
  }, GlooTiming{false})->wait();
  return *latest;
}

NcclGroup* ProcessGroup::emulated_nccl(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& group = emulated_nccl_[device];
  if (!group) group = make_emulated_nccl(*this, device);
  return group.get();
}

void ProcessGroup::barrier() {
  submit("barrier", "barrier", [=](uint32_t tag) {
    if (size_ == 1) return;
    gloo::BarrierOptions opts(context_);
    opts.setTag(tag);
    opts.setTimeout(timeout_);
    gloo::barrier(opts);
  }, GlooTiming{true, gpu::model::Collective::all_reduce, 0})->wait();
}

std::vector<std::string> ProcessGroup::all_gather_strings(const std::string& mine) {
  int64_t length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(size_);
  all_gather(&length, lengths.data(), sizeof length);
  size_t longest = static_cast<size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::string padded = mine;
  padded.resize(longest);
  std::string all(longest * size_, '\0');
  all_gather(padded.data(), all.data(), longest);
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.push_back(all.substr(r * longest, static_cast<size_t>(lengths[r])));
  return out;
}

}  // namespace tiny::distributed::detail
