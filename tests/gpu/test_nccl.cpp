// Backend "nccl" on real GPUs: every collective in a world of one, two ranks
// on two GPUs (the worker of tests/framework/distributed with
// TINY_TEST_BACKEND=nccl), DDP against single-process training, and a peer
// that dies or never joins the communicator. Without a GPU (or NCCL, or a
// second GPU) each test skips and says why.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/cuda/probe.h"
#include "distributed/nccl.h"
#include "distributed/ranks.h"
#include "tiny/cuda.h"
#include "tiny/distributed/distributed.h"
#include "tiny/nn/parallel/distributed.h"

namespace {

namespace dist = tiny::distributed;
using dist::DistributedError;
using dist::ReduceOp;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Skips unless `gpus` real GPUs and libnccl are there.
#define REQUIRE_NCCL(gpus)                                                                                        \
  do {                                                                                                            \
    const int found = tiny::cuda_backend::real_device_count();                                                    \
    if (found < (gpus))                                                                                           \
      GTEST_SKIP() << "needs " << (gpus) << " NVIDIA GPU" << ((gpus) > 1 ? "s" : "") << ", found " << found       \
                   << ": run ./workbook test --gpu on a GPU machine";                                             \
    if (!tiny::distributed::detail::nccl_built())                                                                 \
      GTEST_SKIP() << "this build has no NCCL path (built without the CUDA toolkit's nccl.h)";                    \
    try {                                                                                                         \
      tiny::distributed::detail::nccl_version();                                                                  \
    } catch (const DistributedError& e) {                                                                         \
      GTEST_SKIP() << "libnccl.so.2 could not be loaded: " << e.what();                                           \
    }                                                                                                             \
  } while (0)

std::vector<float> values(const tiny::Tensor& t) { return t.detach().cpu().contiguous().to_vector<float>(); }

// The worker's environment for backend nccl.
std::vector<std::string> nccl_env(std::vector<std::string> more = {}) {
  more.push_back("TINY_TEST_BACKEND=nccl");
  return more;
}

}  // namespace

TEST(Nccl, WorldOfOneRunsEveryCollectiveOnTheGpu) {
  REQUIRE_NCCL(1);
  tiny::cuda::set_device(0);
  dist::init_process_group("nccl", dist_test::file_init("nccl_one"), 1, 0, std::chrono::seconds(10));
  EXPECT_EQ(dist::get_backend(), "nccl");
  const tiny::Device gpu("cuda:0");

  tiny::Tensor t = tiny::tensor({1.0, -2.0, 3.0}).to(gpu);
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::MAX, ReduceOp::MIN, ReduceOp::PRODUCT}) {
    dist::all_reduce(t, op);  // one rank: every op leaves the values as they are
    EXPECT_EQ(values(t), (std::vector<float>{1.0f, -2.0f, 3.0f})) << "op " << static_cast<int>(op);
  }
  tiny::Tensor d = tiny::full({4}, 0.25, tiny::kFloat64).to(gpu);
  dist::all_reduce(d, ReduceOp::AVG);
  EXPECT_EQ(d.cpu().to_vector<double>(), std::vector<double>(4, 0.25));
  tiny::Tensor i = tiny::full({2}, 7.0, tiny::kInt64).to(gpu);
  dist::all_reduce(i);
  EXPECT_EQ(i.cpu().to_vector<int64_t>(), (std::vector<int64_t>{7, 7}));
  tiny::Tensor h = tiny::full({3}, 1.5).to(tiny::kFloat16).to(gpu);
  dist::all_reduce(h);
  EXPECT_EQ(values(h.to(tiny::kFloat32)), std::vector<float>(3, 1.5f));

  // Not contiguous: NCCL works on a contiguous copy, written back.
  tiny::Tensor m = tiny::arange(6).to(tiny::kFloat32).view({2, 3}).to(gpu).t();
  dist::all_reduce(m, ReduceOp::MAX);
  EXPECT_EQ(values(m), (std::vector<float>{0, 3, 1, 4, 2, 5}));

  tiny::Tensor b = tiny::full({2, 2}, 9.0).to(gpu);
  dist::broadcast(b, 0);
  EXPECT_EQ(values(b), std::vector<float>(4, 9.0f));

  std::vector<tiny::Tensor> gathered;
  dist::all_gather(gathered, tiny::tensor({4.0, 5.0}).to(gpu));
  ASSERT_EQ(gathered.size(), 1u);
  EXPECT_TRUE(gathered[0].is_cuda());
  EXPECT_EQ(values(gathered[0]), (std::vector<float>{4.0f, 5.0f}));

  tiny::Tensor out = tiny::zeros({2}).to(gpu);
  dist::reduce_scatter(out, {tiny::tensor({6.0, 8.0}).to(gpu)});
  EXPECT_EQ(values(out), (std::vector<float>{6.0f, 8.0f}));

  dist::barrier();

  // CPU tensors are refused in PyTorch's words.
  try {
    dist::all_reduce(tiny::ones({2}));
    ADD_FAILURE() << "all_reduce of a CPU tensor with nccl returned";
  } catch (const tiny::DeviceError& e) {
    EXPECT_TRUE(contains(e.what(), "Tensors must be CUDA and dense")) << e.what();
  }
  // A tensor on another GPU than the communicator's.
  if (tiny::cuda_backend::real_device_count() >= 2) {
    try {
      dist::all_reduce(tiny::ones({2}).to(tiny::Device("cuda:1")));
      ADD_FAILURE() << "all_reduce of a tensor on cuda:1 with a communicator on cuda:0 returned";
    } catch (const tiny::DeviceError& e) {
      EXPECT_TRUE(contains(e.what(), "communicator is on cuda:0")) << e.what();
    }
  }
  dist::destroy_process_group();
}

TEST(Nccl, CollectivesAcrossTwoRanksOnTwoGpus) {
  REQUIRE_NCCL(2);
  auto outcomes = dist_test::run_ranks(2, {"collectives", "cuda"}, dist_test::file_init("nccl_coll"), nccl_env(),
                                       -1, 60);
  for (const auto& o : outcomes) {
    EXPECT_TRUE(o.ok()) << dist_test::describe(outcomes);
    EXPECT_TRUE(contains(o.out, "collectives ok on cuda:")) << dist_test::describe(outcomes);
  }
}

TEST(Nccl, DdpOnOneGpuMatchesSingleProcessTraining) {
  REQUIRE_NCCL(1);
  dist_test::expect_ddp_matches_single_process(1, "cuda", false, nccl_env());
}

TEST(Nccl, DdpOnTwoGpusMatchesSingleProcessTraining) {
  REQUIRE_NCCL(2);
  dist_test::expect_ddp_matches_single_process(2, "cuda", false, nccl_env());
  dist_test::expect_ddp_matches_single_process(2, "cuda", true, nccl_env());  // with no_sync() accumulation
}

TEST(Nccl, PeerThatDiesIsNamedWithinTheTimeout) {
  REQUIRE_NCCL(2);
  // TINY_DIST_TIMEOUT=5 in the ranks: the survivor's watchdog aborts the hung all-reduce by then.
  auto outcomes = dist_test::run_ranks(2, {"die", "cuda"}, dist_test::file_init("nccl_die"), nccl_env(), -1, 60);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_TRUE(WIFSIGNALED(outcomes[1].status)) << dist_test::describe(outcomes);
  EXPECT_FALSE(outcomes[0].ok()) << dist_test::describe(outcomes);
  EXPECT_TRUE(contains(outcomes[0].err, "rank 1 is gone")) << dist_test::describe(outcomes);
  EXPECT_TRUE(contains(outcomes[0].err, "all_reduce failed on rank 0")) << dist_test::describe(outcomes);
  EXPECT_LT(outcomes[0].seconds, 5.0 + 10.0) << "the survivor must fail within the timeout (plus start-up)";
}

TEST(Nccl, RankThatNeverJoinsTheCommunicatorIsNamedWithinTheTimeout) {
  REQUIRE_NCCL(1);
  // Rank 1 picks gloo: it passes the store's barrier and leaves, and rank 0's
  // ncclCommInitRank waits for it; TINY_DIST_TIMEOUT=5 bounds that wait.
  auto outcomes = dist_test::run_ranks(2, {"leave"}, dist_test::file_init("nccl_init_lost"),
                                       nccl_env({"TINY_TEST_RANK1_BACKEND=gloo"}), -1, 60);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_TRUE(outcomes[1].ok()) << dist_test::describe(outcomes);
  EXPECT_FALSE(outcomes[0].ok()) << dist_test::describe(outcomes);
  EXPECT_TRUE(contains(outcomes[0].err, "ncclCommInitRank waits for every rank")) << dist_test::describe(outcomes);
  EXPECT_TRUE(contains(outcomes[0].err, "rank 1 is gone")) << dist_test::describe(outcomes);
  EXPECT_LT(outcomes[0].seconds, 5.0 + 10.0) << "rank 0 must fail within the timeout (plus start-up)";
}
