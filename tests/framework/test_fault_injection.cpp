// Fault injection (core/fault_injection.h): an out-of-memory at a random
// device allocation, a checkpoint write killed midway, a DDP rank killed at a
// random step (test_distributed.cpp), corrupt data files. Each must end in a
// clear error with nothing lost. The random points come from a seed printed
// with every failure (TINY_TEST_SEED repeats one).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/fault_injection.h"
#include "test_util.h"
#include "tiny/tiny.h"

namespace {

namespace fs = std::filesystem;

uint64_t test_seed() {
  const char* fixed = std::getenv("TINY_TEST_SEED");
  return fixed != nullptr ? std::strtoull(fixed, nullptr, 10) : std::random_device{}();
}

// Clears any plan when the test ends, pass or fail.
struct Disarm {
  ~Disarm() { tiny::fault::arm(""); }
};

std::shared_ptr<tiny::nn::Sequential> mlp() {
  tiny::manual_seed(11);
  return std::make_shared<tiny::nn::Sequential>(
      std::make_shared<tiny::nn::Linear>(64, 512), std::make_shared<tiny::nn::ReLU>(),
      std::make_shared<tiny::nn::Linear>(512, 512), std::make_shared<tiny::nn::ReLU>(),
      std::make_shared<tiny::nn::Linear>(512, 10));
}

std::vector<tiny::Tensor> cpu_copies(const std::vector<tiny::Tensor>& params) {
  std::vector<tiny::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().cpu().clone());
  return out;
}

tiny::optim::AdamOptions adam_options() {
  tiny::optim::AdamOptions options;
  options.lr = 1e-2;
  return options;
}

void step(tiny::nn::Module& model, tiny::optim::Optimizer& optimizer, const tiny::Tensor& x, const tiny::Tensor& y) {
  optimizer.zero_grad();
  tiny::nn::functional::cross_entropy(model.forward(x), y).backward();
  optimizer.step();
}

}  // namespace

TEST(FaultInjection, BadPlansAreRefused) {
  Disarm disarm;
  EXPECT_THROW(tiny::fault::arm("device_malloc"), tiny::ValueError);
  EXPECT_THROW(tiny::fault::arm("device_malloc@0"), tiny::ValueError);
  EXPECT_THROW(tiny::fault::arm("disk@3"), tiny::ValueError);
  EXPECT_NO_THROW(tiny::fault::arm("device_malloc@3,file_write@10"));
}

// An out-of-memory at a random device allocation of a training step: a clear
// OutOfMemoryError, the weights untouched, no memory held by the failed step,
// and the same step run again gives exactly the result of a clean run.
TEST(FaultInjection, OutOfMemoryAtARandomAllocationLosesNothing) {
  if (!tiny::cuda::is_available()) GTEST_SKIP() << "needs the emulated GPU (TINY_EMULATED_GPUS >= 1)";
  Disarm disarm;
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (TINY_TEST_SEED=" + std::to_string(seed) + " repeats it)");
  const tiny::Device gpu("cuda:0");
  tiny::manual_seed(5);
  const tiny::Tensor x = tiny::randn({8192, 64}).to(gpu), y = tiny::randint(0, 10, {8192}).to(gpu);

  // A clean run: one warm-up step (Adam's state now exists), then the step under test.
  auto clean = mlp();
  clean->to(gpu);
  tiny::optim::Adam clean_opt(clean->parameters(), adam_options());
  step(*clean, clean_opt, x, y);
  clean_opt.zero_grad();
  tiny::cuda::synchronize();
  tiny::cuda::empty_cache();  // so that the next step's blocks come from the device again
  const uint64_t before = tiny::cuda::device_counters(0).device_mallocs;
  step(*clean, clean_opt, x, y);
  const uint64_t mallocs = tiny::cuda::device_counters(0).device_mallocs - before;
  ASSERT_GE(mallocs, 3u) << "the step should allocate from the device a few times (activations of 16 MiB, each its own segment)";
  const auto want = cpu_copies(clean->parameters());

  // The same, with the N-th device allocation of the step failing.
  auto model = mlp();
  model->to(gpu);
  tiny::optim::Adam optimizer(model->parameters(), adam_options());
  step(*model, optimizer, x, y);
  optimizer.zero_grad();
  tiny::cuda::synchronize();
  tiny::cuda::empty_cache();
  const size_t held = tiny::cuda::memory_allocated(0);  // inputs, weights, Adam's state
  const auto weights = cpu_copies(model->parameters());
  // A fault in the forward or the backward pass (not the step's last device allocation, which may be optimizer.step()'s).
  std::mt19937_64 rng(seed);
  const uint64_t n = 1 + rng() % (mallocs - 1);
  SCOPED_TRACE("the failing allocation: " + std::to_string(n) + " of " + std::to_string(mallocs));
  tiny::fault::arm("device_malloc@" + std::to_string(n));
  try {
    step(*model, optimizer, x, y);
    ADD_FAILURE() << "the planned out-of-memory did not happen";
  } catch (const tiny::OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("out of memory"), std::string::npos) << what;
    EXPECT_NE(what.find("Tried to allocate"), std::string::npos) << what;
  }
  tiny::fault::arm("");
  optimizer.zero_grad();
  tiny::cuda::synchronize();
  EXPECT_EQ(tiny::cuda::memory_allocated(0), held) << "the failed step left memory allocated";
  const auto after_fault = cpu_copies(model->parameters());
  for (size_t i = 0; i < weights.size(); ++i)
    EXPECT_TRUE(tiny::equal(weights[i], after_fault[i])) << "the failed step changed parameter " << i;
  step(*model, optimizer, x, y);
  const auto got = cpu_copies(model->parameters());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(tiny::equal(got[i], want[i])) << "parameter " << i;
}

// A checkpoint write killed midway (SIGKILL after a random number of bytes):
// the previous checkpoint is still there, byte for byte, and loads.
TEST(FaultInjection, CheckpointWriteKilledMidwayKeepsThePreviousCheckpoint) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (TINY_TEST_SEED=" + std::to_string(seed) + " repeats it)");
  tiny_test::TempDir dir;
  const std::string path = (fs::path(dir.path()) / "model.safetensors").string();
  auto model = mlp();
  tiny::save(model->state_dict(), path);
  const std::vector<char> good = tiny_test::slurp(path);
  ASSERT_GT(good.size(), 1000u);

  // Different weights, written by a child killed after n bytes.
  for (const auto& p : model->parameters()) {
    tiny::NoGradGuard no_grad;
    p.add_(1.0);
  }
  std::mt19937_64 rng(seed);
  const uint64_t n = 1 + rng() % (good.size() - 1);
  SCOPED_TRACE("killed after " + std::to_string(n) + " of " + std::to_string(good.size()) + " bytes");
  const pid_t child = ::fork();
  if (child == 0) {
    tiny::fault::arm("file_write@" + std::to_string(n));
    try {
      tiny::save(model->state_dict(), path);
    } catch (...) {
    }
    ::_exit(0);  // not reached when the plan worked
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the save was not killed midway";

  EXPECT_EQ(tiny_test::slurp(path), good) << "the previous checkpoint changed";
  const tiny::StateDict loaded = tiny::load(path);
  auto fresh = mlp();
  for (const auto& [name, tensor] : fresh->state_dict()) EXPECT_TRUE(tiny::equal(loaded.at(name), tensor)) << name;
  // What the killed save left is a hidden temporary file, never a file that looks like a checkpoint.
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == "model.safetensors" || (name[0] == '.' && name.size() > 4 &&
                                                name.compare(name.size() - 4, 4, ".tmp") == 0))
        << name;
  }
  // And the next save goes through.
  tiny::save(model->state_dict(), path);
  EXPECT_NE(tiny_test::slurp(path), good);
}

// Corrupt data files (a random byte of the header changed, or the file cut
// short at a random length): a tiny::Error naming the file, never a crash.
TEST(FaultInjection, CorruptDataFilesAreClearErrorsNamingTheFile) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (TINY_TEST_SEED=" + std::to_string(seed) + " repeats it)");
  std::mt19937_64 rng(seed);
  tiny_test::TempDir dir;
  const std::string npy = (fs::path(dir.path()) / "x.npy").string();
  const std::string ckpt = (fs::path(dir.path()) / "m.safetensors").string();
  const std::string idx = (fs::path(dir.path()) / "labels-idx1-ubyte").string();
  tiny::io::save_npy(npy, tiny::randn({16, 8}));
  tiny::save(mlp()->state_dict(), ckpt);
  {
    std::vector<char> bytes = {0, 0, 8, 1, 0, 0, 0, 100};  // an IDX header: ubyte, 1-D, 100 labels
    for (int i = 0; i < 100; ++i) bytes.push_back(static_cast<char>(i % 10));
    tiny_test::spit(idx, bytes);
  }
  struct Reader {
    std::string path;
    std::function<void()> read;
    size_t header;  // bytes of header worth corrupting
  };
  const std::vector<Reader> readers = {
      {npy, [&] { (void)tiny::io::load_npy(npy); }, 64},
      {ckpt, [&] { (void)tiny::load(ckpt); }, 64},
      {idx, [&] { (void)tiny::data::read_idx(idx, 1); }, 8},
  };
  int errors = 0;
  for (const Reader& r : readers) {
    const std::vector<char> good = tiny_test::slurp(r.path);
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<char> bad = good;
      if (trial % 2 == 0) {
        bad.resize(rng() % good.size());
      } else {
        bad[rng() % std::min(r.header, good.size())] ^= static_cast<char>(1 + rng() % 255);
      }
      tiny_test::spit(r.path, bad);
      try {
        r.read();  // a change the format cannot see (e.g. in padding) may still read
      } catch (const tiny::Error& e) {
        ++errors;
        EXPECT_NE(std::string(e.what()).find(r.path), std::string::npos) << "trial " << trial << ": " << e.what();
      }
    }
    tiny_test::spit(r.path, good);
    EXPECT_NO_THROW(r.read());
  }
  EXPECT_GE(errors, 60) << "most corruptions should be caught (every truncation is)";
}
