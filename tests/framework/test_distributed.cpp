// tiny::distributed and DistributedDataParallel across processes. The ranks
// are tests/framework/distributed/worker.cpp, started directly (file:// or
// env:// rendezvous) or through tinyrun; every run has a deadline, so a hang
// fails the test instead of blocking CI. TINY_DIST_TIMEOUT=5 in the ranks.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "distributed/ranks.h"
#include "tiny/distributed/distributed.h"
#include "tiny/nn/parallel/distributed.h"

namespace fs = std::filesystem;
using namespace dist_test;

// ---- the TCP store ---------------------------------------------------------------

TEST(TCPStore, SetGetAddCheckAndTimeouts) {
  tiny::distributed::TCPStoreServer server("127.0.0.1", 0);
  tiny::distributed::TCPStore a("127.0.0.1", server.port(), std::chrono::milliseconds(2000));
  tiny::distributed::TCPStore b("127.0.0.1", server.port(), std::chrono::milliseconds(200));
  a.set("k", {'h', 'i'});
  EXPECT_EQ(b.get("k"), (std::vector<char>{'h', 'i'}));
  EXPECT_EQ(a.add("n", 3), 3);
  EXPECT_EQ(b.add("n", 4), 7);
  EXPECT_TRUE(b.check({"k", "n"}));
  EXPECT_FALSE(b.check({"k", "absent"}));
  auto start = Clock::now();
  try {
    b.wait({"k", "absent"}, std::chrono::milliseconds(100));
    ADD_FAILURE() << "wait for a missing key returned";
  } catch (const tiny::distributed::DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("absent"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 1.0);
  EXPECT_THROW(b.get("absent"), tiny::distributed::DistributedError);
  // A get waits for a set from another client.
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    tiny::distributed::TCPStore c("127.0.0.1", server.port(), std::chrono::milliseconds(1000));
    c.set("late", {'x'});
  });
  EXPECT_EQ(a.get("late"), std::vector<char>{'x'});
  later.join();
}

TEST(TCPStore, NamesTheRankWhoseConnectionClosed) {
  tiny::distributed::TCPStoreServer server("127.0.0.1", 0);
  tiny::distributed::TCPStore watcher("127.0.0.1", server.port(), std::chrono::milliseconds(1000));
  {
    tiny::distributed::TCPStore rank3("127.0.0.1", server.port(), std::chrono::milliseconds(1000));
    rank3.register_rank(3);
    EXPECT_TRUE(watcher.lost_ranks().empty());
  }
  std::vector<int> lost;
  for (int i = 0; i < 100 && lost.empty(); ++i) {
    lost = watcher.lost_ranks();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(lost, std::vector<int>{3});
}

TEST(TCPStore, NoServerIsAnErrorWithinTheTimeout) {
  int port;
  {
    tiny::distributed::TCPStoreServer server("127.0.0.1", 0);
    port = server.port();
  }
  auto start = Clock::now();
  try {
    tiny::distributed::TCPStore s("127.0.0.1", port, std::chrono::milliseconds(200));
    ADD_FAILURE() << "connected to a server that is gone";
  } catch (const tiny::distributed::DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
}

// ---- one process: the API and its errors -------------------------------------------

TEST(Distributed, ErrorsBeforeInitAndBadArguments) {
  using tiny::distributed::DistributedError;
  EXPECT_FALSE(tiny::distributed::is_initialized());
  try {
    tiny::distributed::get_rank();
    ADD_FAILURE() << "get_rank without a group returned";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("init_process_group"), std::string::npos);
  }
  EXPECT_THROW(tiny::distributed::init_process_group("mpi", "file:///tmp/x", 1, 0), tiny::ValueError);
  EXPECT_THROW(tiny::distributed::init_process_group("gloo", "ftp://x", 1, 0), tiny::ValueError);
  EXPECT_THROW(tiny::distributed::init_process_group("gloo", "file:///tmp/x", 2, 2), tiny::ValueError);
  try {
    tiny::distributed::init_process_group("nccl", file_init("nccl"), 1, 0);
    ADD_FAILURE() << "nccl without real GPUs initialized";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("\"gloo\""), std::string::npos) << e.what();
  }
  EXPECT_FALSE(tiny::distributed::is_initialized());
}

TEST(Distributed, WorldOfOneRunsEveryCollectiveInProcess) {
  tiny::distributed::init_process_group("gloo", file_init("one"), 1, 0, std::chrono::seconds(5));
  EXPECT_EQ(tiny::distributed::get_rank(), 0);
  EXPECT_EQ(tiny::distributed::get_world_size(), 1);
  EXPECT_EQ(tiny::distributed::get_backend(), "gloo");
  EXPECT_THROW(tiny::distributed::init_process_group("gloo", "env://"), tiny::distributed::DistributedError);
  tiny::Tensor t = tiny::tensor({1.0, 2.0});
  tiny::distributed::all_reduce(t, tiny::distributed::ReduceOp::AVG);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2}));
  std::vector<tiny::Tensor> list;
  tiny::distributed::all_gather(list, t);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].to_vector<float>(), (std::vector<float>{1, 2}));
  tiny::distributed::barrier();
  // DDP over one rank leaves the gradients as they are.
  auto model = dist_scenario::make_model(1);
  auto ddp = std::make_shared<tiny::nn::parallel::DistributedDataParallel>(model);
  auto data = dist_scenario::make_data();
  tiny::nn::functional::mse_loss((*ddp)(data.x), data.y).backward();
  auto ddp_grad = model->parameters()[0].grad().to_vector<float>();
  auto plain = dist_scenario::make_model(1);
  tiny::nn::functional::mse_loss((*plain)(data.x), data.y).backward();
  EXPECT_EQ(ddp_grad, plain->parameters()[0].grad().to_vector<float>());
  EXPECT_EQ(ddp->named_parameters()[0].first, "module.0.weight");
  ddp.reset();
  tiny::distributed::destroy_process_group();
  EXPECT_FALSE(tiny::distributed::is_initialized());
}

TEST(Distributed, UnusedParameterIsReportedAtTheNextForward) {
  tiny::distributed::init_process_group("gloo", file_init("unused"), 1, 0, std::chrono::seconds(5));
  auto model = dist_scenario::make_model(1);
  auto ddp = std::make_shared<tiny::nn::parallel::DistributedDataParallel>(model);
  auto data = dist_scenario::make_data();
  // Only the last layer's output feeds the loss through its bias: the other parameters get no gradient.
  (*ddp)(data.x);
  model->parameters().back().sum().backward();
  try {
    (*ddp)(data.x);
    ADD_FAILURE() << "the unfinished reduction was not reported";
  } catch (const tiny::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Expected to have finished reduction"), std::string::npos) << e.what();
  }
  ddp.reset();
  tiny::distributed::destroy_process_group();
}

// ---- several processes ---------------------------------------------------------------

TEST(Distributed, CollectivesAcrossTwoAndThreeRanks) {
  for (int world : {2, 3}) {
    auto outcomes = run_ranks(world, {"collectives", "cpu"}, file_init("coll"));
    for (const auto& o : outcomes) EXPECT_TRUE(o.ok() && o.out.find("collectives ok") != std::string::npos)
                                       << describe(outcomes);
  }
}

TEST(Distributed, CollectivesOnTheEmulatedGpu) {
  auto outcomes = run_ranks(2, {"collectives", "cuda"}, file_init("collgpu"));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok() && o.out.find("on cuda:") != std::string::npos) << describe(outcomes);
}

TEST(Distributed, RanksSharingOneGpuRunCollectivesAndDdp) { expect_two_ranks_sharing_cuda0_work(); }

TEST(Distributed, EnvRendezvousServedByRankZero) {
  int port;
  {
    tiny::distributed::TCPStoreServer probe("127.0.0.1", 0);  // a port that was free a moment ago
    port = probe.port();
  }
  auto outcomes = run_ranks(2, {"collectives", "cpu"}, "env://",
                            {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)});
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << describe(outcomes);
}

TEST(Distributed, StaleRendezvousDirectoryIsRefused) {
  const std::string init = file_init("stale");
  auto first = run_ranks(2, {"join"}, init);
  for (const auto& o : first) ASSERT_TRUE(o.ok()) << describe(first);
  auto second = run_ranks(2, {"join"}, init);
  for (const auto& o : second) {
    EXPECT_FALSE(o.ok());
    EXPECT_NE(o.err.find("use a fresh directory for every run"), std::string::npos) << describe(second);
  }
}

// A private redis-server on a free port for one test; skips (with the reason)
// where Debian's redis-server is not installed (./workbook setup installs it).
class RedisServer {
 public:
  RedisServer() {
    for (const char* path : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"})
      if (::access(path, X_OK) == 0) binary_ = path;
    if (binary_.empty()) return;
    {
      tiny::distributed::TCPStoreServer probe("127.0.0.1", 0);  // a port that was free a moment ago
      port_ = probe.port();
    }
    dir_ = fresh_dir("redis");
    pid_ = spawn({binary_, "--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                  "--dir", dir_.string()},
                 {}, dir_, "redis");
    // Ready when it accepts connections.
    for (int i = 0; i < 400 && !ready(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~RedisServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  bool installed() const { return !binary_.empty(); }
  bool ready() const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
  }
  std::string url(const std::string& run_id) const { return "redis://127.0.0.1:" + std::to_string(port_) + "/" + run_id; }
  int port() const { return port_; }

 private:
  std::string binary_;
  fs::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

TEST(Distributed, RedisRendezvousRunsCollectivesAndRefusesAReusedRunId) {
  RedisServer redis;
  if (!redis.installed()) GTEST_SKIP() << "redis-server is not installed (apt-get install redis-server): redis:// untested";
  ASSERT_TRUE(redis.ready()) << "redis-server did not start on port " << redis.port();
  auto outcomes = run_ranks(3, {"collectives", "cpu"}, redis.url("coll"));
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok() && o.out.find("collectives ok") != std::string::npos)
                                     << describe(outcomes);
  // Another job on the same server with its own run id is independent of the first.
  auto other = run_ranks(2, {"join"}, redis.url("job2"));
  for (const auto& o : other) EXPECT_TRUE(o.ok()) << describe(other);
  // The same run id again: its keys are still in Redis.
  auto again = run_ranks(2, {"join"}, redis.url("job2"));
  for (const auto& o : again) {
    EXPECT_FALSE(o.ok());
    EXPECT_NE(o.err.find("Redis already holds run id 'job2'"), std::string::npos) << describe(again);
    EXPECT_NE(o.err.find("use a fresh run id"), std::string::npos) << describe(again);
  }
}

TEST(Distributed, RedisUrlWithoutRunIdOrServerIsAClearError) {
  try {
    tiny::distributed::init_process_group("gloo", "redis://127.0.0.1:6379", 1, 0);
    ADD_FAILURE() << "a redis:// URL without a run id was accepted";
  } catch (const tiny::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("redis://HOST[:PORT]/RUN_ID"), std::string::npos) << e.what();
  }
  int port;
  {
    tiny::distributed::TCPStoreServer probe("127.0.0.1", 0);  // nothing listens there afterwards
    port = probe.port();
  }
  try {
    tiny::distributed::init_process_group("gloo", "redis://127.0.0.1:" + std::to_string(port) + "/x", 1, 0);
    ADD_FAILURE() << "init_process_group returned without a Redis server";
  } catch (const tiny::distributed::DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reach Redis at 127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(tiny::distributed::is_initialized());
}

TEST(Distributed, RankThatNeverJoinsIsNamedWithinTheTimeout) {
  auto outcomes = run_ranks(3, {"join"}, file_init("never"), {"TINY_DIST_TIMEOUT=1.5"}, /*started=*/2);
  for (const auto& o : outcomes) {
    EXPECT_FALSE(o.ok());
    EXPECT_NE(o.err.find("rank 2 never joined"), std::string::npos) << describe(outcomes);
    EXPECT_LT(o.seconds, 1.5 + 3.0);
  }
}

TEST(Distributed, RankKilledMidStepIsNamedByTheOthers) {
  auto outcomes = run_ranks(2, {"die"}, file_init("die"));
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_TRUE(WIFSIGNALED(outcomes[1].status)) << describe(outcomes);
  EXPECT_FALSE(outcomes[0].ok());
  EXPECT_NE(outcomes[0].err.find("rank 1 is gone"), std::string::npos) << describe(outcomes);
  EXPECT_LT(outcomes[0].seconds, 5.0) << "the survivor should notice at once, well within the timeout";
}

// Fault injection: the last rank is killed at a random step (seeded; TINY_TEST_SEED repeats it).
TEST(Distributed, RankKilledAtARandomStepIsNamedAndNobodyHangs) {
  const char* fixed = std::getenv("TINY_TEST_SEED");
  const uint64_t seed = fixed != nullptr ? std::strtoull(fixed, nullptr, 10) : std::random_device{}();
  const int step = static_cast<int>(seed % 12);
  SCOPED_TRACE("seed " + std::to_string(seed) + ": rank 2 of 3 killed at step " + std::to_string(step));
  auto outcomes = run_ranks(3, {"die"}, file_init("die_random"), {"TINY_TEST_DIE_STEP=" + std::to_string(step)});
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_TRUE(WIFSIGNALED(outcomes[2].status)) << describe(outcomes);
  for (int r : {0, 1}) {
    EXPECT_FALSE(outcomes[r].ok());
    EXPECT_NE(outcomes[r].err.find("rank 2 is gone"), std::string::npos) << describe(outcomes);
    EXPECT_LT(outcomes[r].seconds, 5.0) << "the survivors should notice at once, well within the timeout";
  }
}

TEST(Distributed, LivePeerThatNeverReachesTheCollectiveIsNamedAmongThree) {
  auto outcomes = run_ranks(3, {"stuck"}, file_init("stuck"), {"TINY_DIST_TIMEOUT=1.5"});
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_TRUE(outcomes[2].ok()) << describe(outcomes);
  for (int r : {0, 1}) {
    EXPECT_FALSE(outcomes[r].ok());
    EXPECT_NE(outcomes[r].err.find("rank 2 did not reach this collective within the timeout of 1500 ms"),
              std::string::npos)
        << describe(outcomes);
  }
}

// Before the call was folded into Gloo's tag, rank 0 died here of an uncatchable
// gloo::EnforceNotMet (SIGABRT) thrown in Gloo's I/O thread.
TEST(Distributed, CollectivesOfDifferentSizesAreAnErrorNotAnAbort) {
  auto start = Clock::now();
  auto outcomes = run_ranks(2, {"sizes"}, file_init("sizes"), {"TINY_DIST_TIMEOUT=1.5"});
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_EQ(outcomes.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const Outcome& o = outcomes[r];
    EXPECT_TRUE(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 1) << "rank " << r << " aborted\n" << describe(outcomes);
    EXPECT_EQ(o.err.find("EnforceNotMet"), std::string::npos) << describe(outcomes);
    EXPECT_NE(o.err.find("Detected mismatch between collectives on ranks. Rank " + std::to_string(r) +
                         " is running collective all_reduce of " + (r == 0 ? "2" : "41") +
                         " float32 elements, but Rank " + std::to_string(1 - r) +
                         " is running collective all_reduce of " + (r == 0 ? "41" : "2") + " float32 elements"),
              std::string::npos)
        << describe(outcomes);
    EXPECT_NE(o.err.find("every rank must call the same collectives with the same shapes"), std::string::npos);
  }
  // The timeout, the 0.5 s look for a gone peer, and well under the 3 s given to the peer to publish its call.
  EXPECT_LT(seconds, 1.5 + 0.5 + 2.0) << describe(outcomes);
}

// On the emulated GPU the ranks agree on each collective's start before it is
// queued: a disagreement is named there, on the host, with the process
// group's words (never a CUDA device-side assert from the collective's kernel).
TEST(Distributed, CollectivesOfDifferentSizesOnEmulatedGpusNameTheCallsNotADeviceAssert) {
  auto outcomes = run_ranks(2, {"sizes", "cuda"}, file_init("sizes_gpu"), {"TINY_DIST_TIMEOUT=1.5"});
  ASSERT_EQ(outcomes.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const Outcome& o = outcomes[r];
    EXPECT_FALSE(o.ok()) << describe(outcomes);
    EXPECT_NE(o.err.find("all_reduce failed on rank " + std::to_string(r) +
                         ": Detected mismatch between collectives on ranks. Rank " + std::to_string(r) +
                         " is running collective all_reduce of " + (r == 0 ? "2" : "41") +
                         " float32 elements, but Rank " + std::to_string(1 - r) +
                         " is running collective all_reduce of " + (r == 0 ? "41" : "2") + " float32 elements"),
              std::string::npos)
        << describe(outcomes);
    EXPECT_EQ(o.err.find("device-side assert"), std::string::npos) << describe(outcomes);
    EXPECT_EQ(o.err.find("TINY_LAUNCH_BLOCKING"), std::string::npos) << describe(outcomes);
  }
}

// Lesson 6's newcomer called all_reduce on rank 0 only: each rank names what
// the other called (rank 1 went on to the barrier).
TEST(Distributed, CollectiveCalledOnOneRankOnlyNamesWhatEachRankCalled) {
  for (const std::string device : {"cpu", "cuda"}) {
    SCOPED_TRACE(device);
    auto outcomes = run_ranks(2, {"one_rank", device}, file_init("one_rank_" + device), {"TINY_DIST_TIMEOUT=1.5"});
    ASSERT_EQ(outcomes.size(), 2u);
    const std::string rank0 = "Rank 0 is running collective all_reduce of 3 float32 elements, but Rank 1 is "
                              "running collective barrier";
    const std::string rank1 = "Rank 1 is running collective barrier, but Rank 0 is running collective all_reduce "
                              "of 3 float32 elements";
    EXPECT_NE(outcomes[0].err.find(rank0), std::string::npos) << describe(outcomes);
    EXPECT_NE(outcomes[1].err.find(rank1), std::string::npos) << describe(outcomes);
    for (const Outcome& o : outcomes) {
      EXPECT_FALSE(o.ok()) << describe(outcomes);
      EXPECT_EQ(o.err.find("device-side assert"), std::string::npos) << describe(outcomes);
    }
  }
}

TEST(DistributedDataParallel, MatchesSingleProcessTrainingOnTwoAndThreeCpuRanks) {
  expect_ddp_matches_single_process(2, "cpu", false);
  expect_ddp_matches_single_process(3, "cpu", false);
}

TEST(DistributedDataParallel, MatchesSingleProcessTrainingOnEmulatedGpus) {
  expect_ddp_matches_single_process(2, "cuda", false);
  expect_ddp_matches_single_process(3, "cuda", false, {"TINY_EMULATED_GPUS=3"});
}

TEST(DistributedDataParallel, NoSyncAccumulationMatchesSingleProcessTraining) {
  expect_ddp_matches_single_process(2, "cpu", true);
}

// Gradient accumulation: the micro-batches inside no_sync() make no collective
// and keep their gradients local; the last backward all-reduces each bucket once.
TEST(DistributedDataParallel, NoSyncDefersTheAllReduceToTheLastMicroBatch) {
  for (const char* device : {"cpu", "cuda"}) {
    auto outcomes = run_ranks(2, {"no_sync_counts", device}, file_init(std::string("nosync_") + device));
    for (const auto& o : outcomes) {
      EXPECT_TRUE(o.ok() && o.out.find("no_sync counts ok") != std::string::npos) << device << "\n"
                                                                                   << describe(outcomes);
    }
  }
}

TEST(DistributedDataParallel, DifferentModelsOnTheRanksAreNamed) {
  auto outcomes = run_ranks(2, {"mismatch"}, file_init("mismatch"));
  for (const auto& o : outcomes) {
    EXPECT_FALSE(o.ok());
    EXPECT_NE(o.err.find("DDP expects same model across all ranks, but Rank 1"), std::string::npos)
        << describe(outcomes);
    EXPECT_NE(o.err.find("'0.weight [5, 4] float32' on rank 0 but '0.weight [6, 4] float32' on rank 1"),
              std::string::npos)
        << describe(outcomes);
  }
}

// Real threads on a real clock: on a loaded machine a rank can be descheduled
// long enough that one step shows no overlap, so the step is run up to three
// times; a DDP that all-reduced only after backward would fail all three.
TEST(DistributedDataParallel, FirstAllReduceStartsBeforeTheLastGradientIsReady) {
  std::string why;
  for (int attempt = 0; attempt < 3; ++attempt) {
    fs::path out = fresh_dir("overlap") / "events.txt";
    auto outcomes = run_ranks(2, {"overlap", out.string()}, file_init("overlap"));
    for (const auto& o : outcomes) ASSERT_TRUE(o.ok()) << describe(outcomes);
    std::ifstream in(out);
    size_t buckets = 0;
    in >> buckets;
    EXPECT_GE(buckets, 3u);
    double first_start = -1, last_ready = -1;
    int kind;
    int64_t index;
    double us;
    size_t ends = 0;
    while (in >> kind >> index >> us) {
      if (kind == 1 && first_start < 0) first_start = us;
      if (kind == 0) last_ready = std::max(last_ready, us);
      if (kind == 2) ++ends;
    }
    EXPECT_EQ(ends, buckets);
    ASSERT_GE(first_start, 0);
    fs::remove_all(out.parent_path());
    if (first_start < last_ready) return;
    why += "attempt " + std::to_string(attempt + 1) + ": bucket 0's all-reduce started at " +
           std::to_string(first_start) + " us, after the last gradient (" + std::to_string(last_ready) + " us)\n";
  }
  ADD_FAILURE() << "no overlap in three steps:\n" << why;
}

// ---- tinyrun -----------------------------------------------------------------------

TEST(Tinyrun, StartsTheRanksAndPrefixesTheirOutput) {
  auto o = run_tinyrun(2, {"collectives", "cpu"});
  EXPECT_TRUE(o.ok()) << o.out << o.err;
  EXPECT_NE(o.out.find("[rank0]: collectives ok"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("[rank1]: collectives ok"), std::string::npos) << o.out;
}

TEST(Tinyrun, StopsTheOthersAndNamesTheRankThatFailed) {
  auto o = run_tinyrun(2, {"die"});
  EXPECT_FALSE(o.ok());
  EXPECT_NE(o.err.find("tinyrun: rank 1"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("signal 9"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("[rank0]: rank 0 error: "), std::string::npos) << o.err;
  EXPECT_LT(o.seconds, 8.0);
}

// Through tinyrun the store is the agent's TCP store, not a directory: the same diagnosis.
TEST(Tinyrun, CollectivesOfDifferentSizesAreNamedThroughTheAgentStore) {
  auto o = run_tinyrun(2, {"sizes"}, {"TINY_DIST_TIMEOUT=1.5"});
  EXPECT_FALSE(o.ok());
  EXPECT_EQ(o.err.find("EnforceNotMet"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("[rank0]: rank 0 error: all_reduce failed on rank 0: Detected mismatch between collectives"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("but Rank 0 is running collective all_reduce of 2 float32 elements"), std::string::npos) << o.err;
  EXPECT_LT(o.seconds, 1.5 + 0.5 + 2.0 + 1.0) << o.err;
}

TEST(Tinyrun, NamesTheRankThatExitedEarlyWithStatusZero) {
  // Rank 1 returns 0 at once; ranks 0 and 2 then all-reduce without it.
  auto o = run_tinyrun(3, {"leave"}, {"TINY_DIST_TIMEOUT=3"});
  EXPECT_FALSE(o.ok());
  EXPECT_NE(o.err.find("tinyrun: rank 1 exited (status 0) while ranks 0, 2 were still running; rank "),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("then failed: rank "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("rank 1 is gone"), std::string::npos) << o.err;
  EXPECT_LT(o.seconds, 3.0) << "the run must end within the collective timeout\n" << o.err;
}

// --rdzv file:// and redis://: no agent store; the ranks meet in the directory or the Redis server.
TEST(Tinyrun, RanksMeetInARendezvousDirectoryThatMustBeFresh) {
  const std::string init = file_init("tinyrun_rdzv");
  auto o = run_tinyrun(2, {"collectives", "cpu"}, {}, 20, {"--rdzv", init});
  EXPECT_TRUE(o.ok()) << o.out << o.err;
  EXPECT_NE(o.out.find("[rank1]: collectives ok"), std::string::npos) << o.out;
  auto again = run_tinyrun(2, {"join"}, {"TINY_DIST_TIMEOUT=3"}, 20, {"--rdzv", init});
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.err.find("use a fresh directory for every run"), std::string::npos) << again.err;
  fs::remove_all(init.substr(7));
}

TEST(Tinyrun, RanksMeetThroughRedis) {
  RedisServer redis;
  if (!redis.installed()) GTEST_SKIP() << "redis-server is not installed (apt-get install redis-server): redis:// untested";
  ASSERT_TRUE(redis.ready()) << "redis-server did not start on port " << redis.port();
  auto o = run_tinyrun(3, {"collectives", "cpu"}, {}, 20, {"--rdzv", redis.url("tinyrun")});
  EXPECT_TRUE(o.ok()) << o.out << o.err;
  EXPECT_NE(o.out.find("[rank2]: collectives ok"), std::string::npos) << o.out;
}

TEST(Tinyrun, UnknownOrIncompleteRendezvousIsRefusedBeforeStarting) {
  for (const std::string& url : {std::string("etcd://10.0.0.1:2379"), std::string("redis://10.0.0.1:6379"),
                                 std::string("file://")}) {
    auto o = run_tinyrun(2, {"join"}, {}, 10, {"--rdzv", url});
    EXPECT_TRUE(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 2) << url << "\n" << o.err;
    EXPECT_NE(o.err.find("tinyrun: --rdzv '" + url + "'"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("redis://HOST[:PORT]/RUN_ID"), std::string::npos) << o.err;
    EXPECT_EQ(o.out.find("[rank0]"), std::string::npos) << "no rank may start: " << o.out;
  }
}
