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
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "distributed/nccl.h"
#include "tiny/distributed/distributed.h"
#include "tiny/dtype.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
}  // namespace gloo

namespace tiny::distributed::detail {

/// A collective queued on the communication thread; wait() rethrows its error.
class Work {
 public:
  void wait();
  bool completed();

 private:
  friend class ProcessGroup;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
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
  std::shared_ptr<Work> all_reduce_async(void* data, size_t count, Dtype dtype, ReduceOp op,
                                         std::function<void()> on_start = {}, std::function<void()> on_end = {});
  void all_reduce(void* data, size_t count, Dtype dtype, ReduceOp op);
  void broadcast(void* data, size_t bytes, int root);
  /// `out` holds size() * bytes; rank r's `in` lands at out + r * bytes.
  void all_gather(const void* in, void* out, size_t bytes);
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
  std::shared_ptr<Work> submit(const char* what, std::string call, std::function<void(uint32_t tag)> fn);
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
};

/// The group set up by init_process_group(); throws when there is none.
ProcessGroup& default_group();

}  // namespace tiny::distributed::detail
