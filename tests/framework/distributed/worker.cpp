// One rank of the multi-process tests of tiny::distributed (test_distributed.cpp
// starts it, directly or through tinyrun). Usage: tiny_dist_worker SCENARIO [args].
//   collectives DEVICE        every collective on tensors of DEVICE (cpu; cuda: cuda:LOCAL_RANK;
//                             cuda0: cuda:0 in every rank, ranks sharing one GPU as gloo allows)
//   ddp DEVICE OUT [accum]    DDP training; rank 0 writes the final parameters to OUT
//   no_sync_counts DEVICE     DDP gradient accumulation: the all-reduces each backward makes with and without no_sync()
//   overlap OUT               DDP with small buckets; rank 0 writes the events to OUT
//   die [DEVICE]              DDP training (on DEVICE, default cpu) in which the last rank kills itself mid-step
//   mismatch                  DDP over models that differ between ranks
//   sizes                     rank 0 all-reduces 2 elements, the others 41
//   leave                     rank 1 exits (status 0) at once; the others then all-reduce
//   join                      init_process_group only
//   clock DEVICE OUT LATE_NS  modelled time: rank r's host clock is r x LATE_NS ahead, then an
//                             all_reduce, broadcast, all_gather and reduce_scatter of 1 MiB on DEVICE,
//                             each followed by a synchronize; each rank writes its clock (ns) before
//                             and after each to OUT.RANK
//   ddp_time OUT BUCKET_MB [lesson6]  modelled time of one DDP step (forward, backward, synchronize) on
//                             cuda:LOCAL_RANK; each rank writes the step's ns to OUT.RANK and its
//                             profiler trace to OUT.RANK.json (lesson6: lesson 6's MLP, batch 64)
// TINY_TEST_EARLY_NS: rank r's modelled clock is r x that many ns ahead when it joins.
// TINY_TEST_SLEEP_SEED: real sleeps of random lengths between the calls (modelled times must not change).
// The rendezvous is TINY_TEST_INIT (default env://), the backend TINY_TEST_BACKEND
// (default gloo; with nccl each rank first makes cuda:LOCAL_RANK its device).
// Errors go to stderr, exit code 1.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "gpu/model/timeline.h"
#include "scenario.h"
#include "tiny/profiler.h"
#include "tiny/distributed/distributed.h"
#include "tiny/nn/parallel/distributed.h"

namespace dist = tiny::distributed;
using tiny::nn::parallel::DistributedDataParallel;

namespace {

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

tiny::Device device_for(const std::string& kind) {
  if (kind == "cuda") return tiny::Device("cuda:" + std::to_string(dist::local_rank()));
  if (kind == "cuda0") return tiny::Device("cuda:0");
  expect(kind == "cpu", "the device is cpu, cuda or cuda0, not " + kind);
  return tiny::Device("cpu");
}

void collectives(const std::string& kind) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  tiny::Device device = device_for(kind);
  tiny::Tensor t = tiny::full({3}, rank + 1.0).to(device);
  dist::all_reduce(t);
  const double sum = world * (world + 1) / 2.0;
  expect(t.cpu().to_vector<float>() == std::vector<float>(3, static_cast<float>(sum)), "all_reduce SUM");
  tiny::Tensor m = tiny::full({2}, static_cast<double>(rank)).to(device);
  dist::all_reduce(m, dist::ReduceOp::MAX);
  expect(m.cpu().to_vector<float>()[0] == world - 1, "all_reduce MAX");
  tiny::Tensor a = tiny::full({2}, static_cast<double>(rank), tiny::kFloat64).to(device);
  dist::all_reduce(a, dist::ReduceOp::AVG);
  expect(std::abs(a.cpu().to_vector<double>()[1] - (world - 1) / 2.0) < 1e-12, "all_reduce AVG");
  tiny::Tensor i = tiny::full({1}, 1.0, tiny::kInt64).to(device);
  dist::all_reduce(i);
  expect(i.item<int64_t>() == world, "all_reduce int64");
  tiny::Tensor i32 = tiny::full({2}, rank + 1, tiny::kInt32).to(device);
  dist::all_reduce(i32, dist::ReduceOp::MAX);
  expect(i32.dtype() == tiny::kInt32 && i32.cpu().to_vector<int32_t>()[1] == world, "all_reduce int32 MAX");
  tiny::Tensor u8 = tiny::full({3}, 200, tiny::kUInt8).to(device);
  dist::all_reduce(u8);  // wraps modulo 256, as NCCL and Gloo add uint8
  expect(u8.cpu().to_vector<uint8_t>()[2] == static_cast<uint8_t>(200 * world), "all_reduce uint8 SUM");

  tiny::Tensor b = tiny::full({2, 2}, rank == 1 ? 7.0 : -1.0).to(device);
  dist::broadcast(b, 1 % world);
  expect(b.cpu().to_vector<float>()[3] == (world > 1 ? 7.0f : -1.0f), "broadcast from rank 1");

  std::vector<tiny::Tensor> gathered;
  dist::all_gather(gathered, tiny::full({2}, 10.0 * rank).to(device));
  expect(static_cast<int>(gathered.size()) == world, "all_gather size");
  for (int r = 0; r < world; ++r) expect(gathered[r].cpu().to_vector<float>()[1] == 10.0f * r, "all_gather values");

  std::vector<tiny::Tensor> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(tiny::full({2}, 100.0 * r + rank).to(device));
  tiny::Tensor out = tiny::zeros({2}).to(device);
  dist::reduce_scatter(out, inputs);
  expect(out.cpu().to_vector<float>()[0] == static_cast<float>(100.0 * rank * world + sum - world), "reduce_scatter");
  dist::barrier();
  // Each call above counted once, with its nccl-tests size (init_process_group reset the counts).
  const dist::CollectiveCounts c = dist::collective_counts();
  expect(c.all_reduce.calls == 6 && c.all_reduce.bytes == 3 * 4 + 2 * 4 + 2 * 8 + 8 + 2 * 4 + 3,
         "all_reduce counted 6 calls of 55 bytes, not " + std::to_string(c.all_reduce.calls) + " of " +
             std::to_string(c.all_reduce.bytes));
  expect(c.broadcast.calls == 1 && c.broadcast.bytes == 16, "broadcast counted once, 16 bytes");
  expect(c.all_gather.calls == 1 && c.all_gather.bytes == world * 8, "all_gather counted once, world x 8 bytes");
  expect(c.reduce_scatter.calls == 1 && c.reduce_scatter.bytes == world * 8,
         "reduce_scatter counted once, world x 8 bytes");
  expect(c.barrier.calls == 1 && c.barrier.bytes == 0, "barrier counted once");
  expect(c.total().calls == 10, "10 collectives in all, not " + std::to_string(c.total().calls));
  dist::reset_collective_counts();
  expect(dist::collective_counts().total().calls == 0, "reset_collective_counts zeroes the counts");
  std::cout << "collectives ok on " << device << std::endl;
}

// The sum of every gradient of `model`, on every rank (one all_gather).
std::vector<float> grad_sums(tiny::nn::Module& model) {
  double sum = 0;
  for (const tiny::Tensor& p : model.parameters()) sum += p.grad().sum().item<double>();
  std::vector<tiny::Tensor> all;
  dist::all_gather(all, tiny::full({1}, sum));
  std::vector<float> out;
  for (const tiny::Tensor& t : all) out.push_back(t.item<float>());
  return out;
}

// Gradient accumulation over 3 micro-batches: inside no_sync() the gradients
// stay local (they differ between ranks) and no all-reduce is made; the last
// backward, outside it, all-reduces each bucket once. Without no_sync every
// micro-batch's backward all-reduces every bucket.
void no_sync_counts(const std::string& kind) {
  const int rank = dist::get_rank();
  tiny::Device device = device_for(kind);
  auto model = dist_scenario::make_model(100);
  model->to(device);
  auto ddp = std::make_shared<DistributedDataParallel>(model);
  const int64_t buckets = static_cast<int64_t>(ddp->bucket_indices().size());
  auto data = dist_scenario::make_data();
  tiny::Tensor x = data.x.narrow(0, 6 * rank, 6).to(device), y = data.y.narrow(0, 6 * rank, 6).to(device);
  auto micro = [&](int i) {
    tiny::nn::functional::mse_loss((*ddp)(x.narrow(0, 2 * i, 2)), y.narrow(0, 2 * i, 2)).backward();
  };
  dist::reset_collective_counts();
  {
    auto guard = ddp->no_sync();
    micro(0);
    micro(1);
  }
  expect(dist::collective_counts().total().calls == 0,
         "no collective inside no_sync(), not " + std::to_string(dist::collective_counts().total().calls));
  const std::vector<float> local = grad_sums(*model);
  expect(local[0] != local[1], "inside no_sync() the gradients stay local (they differ between the ranks)");
  dist::reset_collective_counts();
  micro(2);
  const dist::CollectiveCounts synced = dist::collective_counts();
  expect(synced.all_reduce.calls == buckets && synced.total().calls == buckets,
         "the backward after no_sync() all-reduces each of the " + std::to_string(buckets) + " buckets once, not " +
             std::to_string(synced.all_reduce.calls) + " all-reduces");
  const std::vector<float> averaged = grad_sums(*model);
  expect(std::abs(averaged[0] - averaged[1]) <= 1e-5f * std::abs(averaged[0]) + 1e-6f,
         "after the synchronized backward every rank holds the same gradients");
  ddp->zero_grad();
  dist::reset_collective_counts();
  for (int i = 0; i < 3; ++i) micro(i);
  expect(dist::collective_counts().all_reduce.calls == 3 * buckets,
         "without no_sync() every backward all-reduces every bucket: " + std::to_string(3 * buckets) + ", not " +
             std::to_string(dist::collective_counts().all_reduce.calls));
  std::cout << "no_sync counts ok on " << device << " (" << buckets << " buckets)" << std::endl;
}

void write_floats(const std::string& path, const std::vector<float>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
}

void ddp(const std::string& kind, const std::string& path, bool accum, bool die) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  tiny::Device device = device_for(kind);
  auto model = dist_scenario::make_model(100 + rank);  // different on every rank: DDP must broadcast rank 0's
  model->to(device);
  auto ddp = std::make_shared<DistributedDataParallel>(model);
  tiny::optim::SGDOptions options;
  options.lr = dist_scenario::kLr;
  tiny::optim::SGD optimizer(ddp->parameters(), options);
  auto data = dist_scenario::make_data();
  tiny::data::DistributedSampler sampler(dist_scenario::kExamples, world, rank, /*shuffle=*/false);
  auto indices = sampler.indices();
  tiny::Tensor x = dist_scenario::rows(data.x, indices).to(device), y = dist_scenario::rows(data.y, indices).to(device);
  const int steps = die ? 1000 : dist_scenario::kSteps;
  const char* die_at = std::getenv("TINY_TEST_DIE_STEP");
  const int die_step = die_at != nullptr ? std::atoi(die_at) : 2;
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    if (accum) {
      const int64_t half = x.size(0) / 2;
      {
        auto guard = ddp->no_sync();
        tiny::nn::functional::mse_loss((*ddp)(x.narrow(0, 0, half)), y.narrow(0, 0, half)).mul(0.5).backward();
      }
      tiny::nn::functional::mse_loss((*ddp)(x.narrow(0, half, half)), y.narrow(0, half, half)).mul(0.5).backward();
    } else {
      tiny::Tensor loss = tiny::nn::functional::mse_loss((*ddp)(x), y);
      // The last rank dies mid-step (after forward, before backward) at step TINY_TEST_DIE_STEP (default 2).
      if (die && rank == dist::get_world_size() - 1 && step == die_step) ::kill(::getpid(), SIGKILL);
      loss.backward();
    }
    optimizer.step();
  }
  if (rank == 0) write_floats(path, dist_scenario::flat_parameters(*model));
}

void overlap(const std::string& path) {
  const int rank = dist::get_rank();
  tiny::manual_seed(7);
  auto model = std::make_shared<tiny::nn::Sequential>();
  for (int i = 0; i < 6; ++i) {
    model->push_back(std::make_shared<tiny::nn::Linear>(256, 256));
    model->push_back(std::make_shared<tiny::nn::Tanh>());
  }
  tiny::nn::parallel::DistributedDataParallelOptions options;
  options.first_bucket_cap_mb = 0.25;  // one 256x256 weight (+ its bias) per bucket
  options.bucket_cap_mb = 0.25;
  auto ddp = std::make_shared<DistributedDataParallel>(model, options);
  tiny::Tensor x = tiny::randn({512, 256});
  for (int step = 0; step < 2; ++step) {
    ddp->zero_grad();
    (*ddp)(x).pow(2.0).mean().backward();
  }
  if (rank != 0) return;
  std::ofstream out(path);
  out << ddp->bucket_indices().size() << "\n";
  for (const auto& e : ddp->comm_events()) out << static_cast<int>(e.kind) << " " << e.index << " " << e.microseconds << "\n";
}

// A real sleep of 0-3 ms when TINY_TEST_SLEEP_SEED is set: the host's real speed, which modelled time ignores.
void maybe_sleep() {
  static const char* seed = std::getenv("TINY_TEST_SLEEP_SEED");
  if (seed == nullptr) return;
  static unsigned state = static_cast<unsigned>(std::strtoul(seed, nullptr, 10)) * 7919u + dist::get_rank() * 104729u;
  state = state * 1103515245u + 12345u;
  std::this_thread::sleep_for(std::chrono::microseconds((state >> 8) % 3000));
}

void clock(const std::string& kind, const std::string& path, int64_t late_ns) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  tiny::Device device = device_for(kind);
  std::ofstream out(path + "." + std::to_string(rank));
  out << tiny::gpu::model::host_now() << "\n";  // just after init_process_group: the aligned clocks
  const int64_t n = 262144;  // 1 MiB of float32
  tiny::Tensor t = tiny::full({n}, rank + 1.0).to(device);
  std::vector<tiny::Tensor> parts;
  for (int r = 0; r < world; ++r) parts.push_back(tiny::zeros({n / world}).to(device));
  tiny::Tensor part = tiny::zeros({n / world}).to(device);
  std::vector<tiny::Tensor> slots;
  for (int r = 0; r < world; ++r) slots.push_back(tiny::full({n / world}, 1.0).to(device));
  if (device.is_cuda()) tiny::cuda::synchronize();
  tiny::gpu::model::host_advance(rank * late_ns);
  auto timed = [&](auto&& call) {
    maybe_sleep();
    out << tiny::gpu::model::host_now() << " ";
    call();
    if (device.is_cuda()) tiny::cuda::synchronize();
    out << tiny::gpu::model::host_now() << "\n";
  };
  timed([&] { dist::all_reduce(t); });
  timed([&] { dist::broadcast(t, world - 1); });
  timed([&] { dist::all_gather(parts, part); });
  timed([&] { dist::reduce_scatter(part, slots); });
  expect(t.cpu().to_vector<float>()[0] == world * (world + 1) / 2.0f, "all_reduce's sum");
  expect(part.cpu().to_vector<float>()[0] == static_cast<float>(world), "reduce_scatter's sum");
}

void ddp_time(const std::string& path, double bucket_mb, bool lesson6) {
  const int rank = dist::get_rank();
  tiny::Device device("cuda:" + std::to_string(dist::local_rank()));
  tiny::cuda::set_device(device.index());
  tiny::manual_seed(3);
  auto model = std::make_shared<tiny::nn::Sequential>();
  for (int i = 0; i < (lesson6 ? 0 : 4); ++i) {
    model->push_back(std::make_shared<tiny::nn::Linear>(1024, 1024));
    model->push_back(std::make_shared<tiny::nn::ReLU>());
  }
  if (lesson6) {  // lesson 6's MLP on the 8x8 digits, batch 64 per rank
    model->push_back(std::make_shared<tiny::nn::Linear>(64, 128));
    model->push_back(std::make_shared<tiny::nn::ReLU>());
    model->push_back(std::make_shared<tiny::nn::Linear>(128, 10));
  }
  model->to(device);
  tiny::nn::parallel::DistributedDataParallelOptions options;
  options.first_bucket_cap_mb = bucket_mb;
  options.bucket_cap_mb = bucket_mb;
  auto ddp = std::make_shared<DistributedDataParallel>(model, options);
  tiny::Tensor x = lesson6 ? tiny::randn({64, 64}).to(device) : tiny::randn({1024, 1024}).to(device);
  auto step = [&] {
    ddp->zero_grad();
    maybe_sleep();
    tiny::Tensor loss = (*ddp)(x).pow(2.0).mean();
    maybe_sleep();
    loss.backward();
    tiny::cuda::synchronize();
  };
  step();  // warm-up: the allocator's first allocations
  tiny::profiler::profile prof;
  const int64_t start = tiny::gpu::model::host_now();
  step();
  const int64_t end = tiny::gpu::model::host_now();
  prof.stop();
  std::ofstream(path + "." + std::to_string(rank)) << end - start << "\n" << ddp->bucket_indices().size() << "\n"
                                                   << start << "\n" << end << "\n";
  prof.export_chrome_trace(path + "." + std::to_string(rank) + ".json");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  const char* init = std::getenv("TINY_TEST_INIT");
  const char* backend = std::getenv("TINY_TEST_BACKEND");
  // A rank that picks another backend than the others (a test of the survivors' error).
  const char* rank1_backend = std::getenv("TINY_TEST_RANK1_BACKEND");
  const char* my_rank = std::getenv("RANK");
  if (rank1_backend != nullptr && my_rank != nullptr && std::string(my_rank) == "1") backend = rank1_backend;
  int rank = -1;
  try {
    // As in PyTorch, picking each rank's GPU is the program's job, before the process group.
    if (backend != nullptr && std::string(backend) == "nccl") tiny::cuda::set_device(dist::local_rank());
    // TINY_TEST_EARLY_NS: rank r did r x that much modelled work before joining (init_process_group aligns the clocks).
    if (const char* early = std::getenv("TINY_TEST_EARLY_NS"); early != nullptr && my_rank != nullptr)
      tiny::gpu::model::host_advance(std::atoll(early) * std::atoi(my_rank));
    dist::init_process_group(backend != nullptr && *backend ? backend : "gloo", init ? init : "env://");
    rank = dist::get_rank();
    if (scenario == "collectives") {
      collectives(argc > 2 ? argv[2] : "cpu");
    } else if (scenario == "ddp") {
      ddp(argv[2], argv[3], argc > 4 && std::string(argv[4]) == "accum", false);
    } else if (scenario == "no_sync_counts") {
      no_sync_counts(argc > 2 ? argv[2] : "cpu");
    } else if (scenario == "overlap") {
      overlap(argv[2]);
    } else if (scenario == "clock") {
      clock(argv[2], argv[3], std::atoll(argv[4]));
    } else if (scenario == "ddp_time") {
      ddp_time(argv[2], std::atof(argv[3]), argc > 4 && std::string(argv[4]) == "lesson6");
    } else if (scenario == "die") {
      ddp(argc > 2 ? argv[2] : "cpu", "/dev/null", false, true);
    } else if (scenario == "mismatch") {  // rank 1 builds a wider first layer
      auto model = std::make_shared<tiny::nn::Sequential>(std::make_shared<tiny::nn::Linear>(4, rank == 1 ? 6 : 5));
      DistributedDataParallel ddp(model);
    } else if (scenario == "sizes") {  // the same collective on different sizes: must not abort
      tiny::Tensor t = tiny::ones({rank == 0 ? 2 : 41}).to(device_for(argc > 2 ? argv[2] : "cpu"));
      dist::all_reduce(t);
      (void)t.cpu();  // waits for the collective: its failure is raised here
    } else if (scenario == "one_rank") {  // only rank 0 all-reduces (lesson 6's all_reduce_mean under `if rank == 0`)
      tiny::Tensor t = tiny::ones({3}).to(device_for(argc > 2 ? argv[2] : "cpu"));
      if (rank == 0) dist::all_reduce(t);
      (void)t.cpu();
      dist::barrier();
    } else if (scenario == "leave") {  // a rank that returns early, as if its loop had fewer steps
      if (rank == 1) {
        std::cout << "rank 1 leaves early" << std::endl;
        return 0;
      }
      tiny::Tensor t = tiny::ones({3});
      for (int step = 0; step < 3; ++step) dist::all_reduce(t);
    } else if (scenario == "stuck") {  // the last rank is alive but never reaches the collective
      if (rank == dist::get_world_size() - 1) {
        std::this_thread::sleep_for(std::chrono::seconds(4));
        std::cout << "rank " << rank << " woke up" << std::endl;
        return 0;
      }
      tiny::Tensor t = tiny::ones({3});
      dist::all_reduce(t);
    } else if (scenario != "join") {
      throw std::runtime_error("unknown scenario '" + scenario + "'");
    }
    dist::destroy_process_group();
  } catch (const std::exception& e) {
    std::cerr << "rank " << rank << " error: " << e.what() << std::endl;
    return 1;
  }
  std::cout << "rank " << rank << " done" << std::endl;
  return 0;
}
