// The process group behind tiny::distributed: a Gloo context, one
// communication thread that runs the collectives in the order they were
// submitted (so every rank issues them in the same order), and the diagnosis
// that turns a Gloo failure into an error naming the rank that is gone.
// With backend "nccl" it also holds the NCCL communicator (distributed/nccl.h),
// which runs the collectives on GPU tensors; Gloo stays for the little the
// framework exchanges on the host (DDP's check that every rank has the same model).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "distributed/nccl.h"
#include "gpu/model/collective_cost.h"
#include "tiny/distributed/distributed.h"
#include "tiny/dtype.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
}  // namespace gloo

namespace tiny::distributed::detail {

/// A collective queued on the communication thread; wait() rethrows its error
/// and moves the waiting thread's modelled clock to the collective's end.
class Work {
 public:
  void wait();
  bool completed();
  /// When the collective ends in modelled time (0 for one that is not modelled).
  int64_t end_ns();

 private:
  friend class ProcessGroup;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
  int64_t end_ns_ = 0;
};

/// How a collective on host memory is timed (Gloo: gloo_collective_ns), or not
/// at all (the bytes of a collective that the emulated GPU times as NCCL's).
struct GlooTiming {
  bool modelled = true;
  gpu::model::Collective kind = gpu::model::Collective::all_reduce;
  int64_t bytes = 0;  // nccl-tests' size (collective_cost.h)
};

/// Where a rank's process runs, published at the rendezvous (for the diagnosis of failures).
struct PeerInfo {
  std::string host;
  long pid = 0;
};

class ProcessGroup {
 public:
  /// `store` (keys under their own prefix) is where, after a collective failed,
  /// the ranks compare what each of them was calling.
  ProcessGroup(std::shared_ptr<gloo::Context> context, std::vector<PeerInfo> peers, std::string backend,
               std::chrono::milliseconds timeout, std::shared_ptr<TCPStore> tcp_store,
               std::shared_ptr<gloo::rendezvous::Store> store, std::vector<std::shared_ptr<void>> keep_alive);
  ~ProcessGroup();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& backend() const { return backend_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  /// In-place all-reduce of `count` elements of `dtype` at `data` (host memory that
  /// must stay alive until the Work completes).
  /// `on_start` runs on the communication thread before the bytes move (it may wait for them to be staged).
  std::shared_ptr<Work> all_reduce_async(void* data, size_t count, Dtype dtype, ReduceOp op,
                                         std::function<void()> on_start = {}, std::function<void()> on_end = {},
                                         bool modelled = true);
  void all_reduce(void* data, size_t count, Dtype dtype, ReduceOp op);
  std::shared_ptr<Work> broadcast_async(void* data, size_t bytes, int root, std::function<void()> on_start = {},
                                        bool modelled = true);
  void broadcast(void* data, size_t bytes, int root);
  /// `out` holds size() * bytes; rank r's `in` lands at out + r * bytes.
  std::shared_ptr<Work> all_gather_async(const void* in, void* out, size_t bytes, std::function<void()> on_start = {},
                                         bool modelled = true);
  void all_gather(const void* in, void* out, size_t bytes);
  /// The latest of every rank's `mine` (a modelled time: DESIGN.md 4a, "Several
  /// processes"), exchanged in the order of the collectives; `mine` with one rank.
  /// `what` and `call` name the collective the time is agreed for ("all_reduce",
  /// "all_reduce of 3 float32 elements"; `what` must outlive the call): ranks
  /// that disagree are named with it, not with the agreement.
  int64_t agree_on_time(int64_t mine, const char* what = "init_process_group",
                        const std::string& call = "init_process_group");
  /// The NCCL-like collectives of the emulated GPU on `device` (distributed/emulated_nccl.h), made on first use.
  NcclGroup* emulated_nccl(int device);
  void barrier();
  /// Every rank's string, in rank order.
  std::vector<std::string> all_gather_strings(const std::string& mine);

  /// Hands the group its NCCL communicator (backend "nccl"), made after the group so it can name lost peers.
  void attach_nccl(std::unique_ptr<NcclGroup> nccl) { nccl_ = std::move(nccl); }
  /// The NCCL communicator, or nullptr (backend "gloo").
  NcclGroup* nccl() const { return nccl_.get(); }
  /// "rank 1 is gone (its process exited or was killed)" for the peers that are gone now, or "".
  std::string lost_peers();

 private:
  // `call` describes the collective ("all_reduce of 2 float32 elements"); it is
  // folded into the Gloo tag, so that ranks calling different collectives (or
  // the same one on other sizes) never exchange data: their wait times out
  // instead of Gloo aborting the process on a size check in its I/O thread.
  // `timing`: the job first agrees with the other ranks on when the collective
  // can start (the latest of the submitting threads' modelled clocks), then
  // runs on the communication thread's modelled clock.
  std::shared_ptr<Work> submit(const char* what, std::string call, std::function<void(uint32_t tag)> fn,
                               GlooTiming timing = {});
  void run();
  std::string diagnose(const char* what, uint64_t sequence, const std::string& call, const std::string& cause);
  // What the other ranks published for their collective number `sequence`, after this rank published `call`.
  // `silent` gets the ranks that did not publish their call in time (stuck elsewhere, or gone).
  std::string find_mismatch(uint64_t sequence, const std::string& call, bool wait_for_peers,
                            std::vector<int>* silent = nullptr);
  // The peers that are gone: the store saw their connection close, or (same host) their process exited.
  std::set<int> gone_ranks();

  std::shared_ptr<gloo::Context> context_;
  std::vector<PeerInfo> peers_;
  std::string backend_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<TCPStore> tcp_store_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::vector<std::shared_ptr<void>> keep_alive_;  // the stores and the server, when this rank hosts it
  int rank_ = 0;
  int size_ = 1;

  std::mutex mutex_;
  std::condition_variable queue_cv_;
  std::deque<std::pair<std::shared_ptr<Work>, std::function<void()>>> queue_;
  bool stopping_ = false;
  uint64_t next_sequence_ = 1;  // the same on every rank that calls the same collectives
  std::string broken_;  // the first failure: every later collective fails with it
  std::thread thread_;
  std::unique_ptr<NcclGroup> nccl_;
  std::map<int, std::unique_ptr<NcclGroup>> emulated_nccl_;  // by device; guarded by mutex_
  int64_t comm_clock_ = 0;  // the communication thread's modelled clock: the end of its last Gloo collective
};

/// Counts one collective of `kind` and `bytes` (its nccl-tests size) in collective_counts().
void count_collective(CollectiveCount CollectiveCounts::*kind, int64_t bytes);

/// The group set up by init_process_group(); throws when there is none.
ProcessGroup& default_group();

}  // namespace tiny::distributed::detail
