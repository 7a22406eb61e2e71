// Running the ranks of a multi-process test: the worker (worker.cpp) started
// directly or through tinyrun, each with a deadline so that a hang fails the
// test instead of blocking CI, and the single-process reference of the DDP
// scenario. Shared by test_distributed.cpp and tests/gpu/test_nccl.cpp.
// TINY_DIST_WORKER and TINYRUN are the programs' paths (from CMake).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "distributed/scenario.h"

extern char** environ;

namespace dist_test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Outcome {
  int status = 0;  // waitpid status
  std::string out, err;
  double seconds = 0;
  bool ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

inline fs::path fresh_dir(const std::string& what) {
  std::string pattern = (fs::temp_directory_path() / ("tiny_" + what + "_XXXXXX")).string();
  EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
  return pattern;
}

inline std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts `args` with `env` added to this process's environment; output goes to files in `dir`.
inline pid_t spawn(const std::vector<std::string>& args, const std::vector<std::string>& env, const fs::path& dir,
            const std::string& name) {
  // getenv() takes the first of duplicate names: the test's settings go first.
  std::vector<std::string> env_strings = env;
  env_strings.push_back("TINY_DIST_TIMEOUT=5");
  env_strings.push_back("TINY_NUM_THREADS=1");
  for (char** e = environ; *e; ++e) env_strings.push_back(*e);
  std::vector<char*> argv, envp;
  for (auto s : args) argv.push_back(strdup(s.c_str()));
  argv.push_back(nullptr);
  for (auto& s : env_strings) envp.push_back(strdup(s.c_str()));
  envp.push_back(nullptr);
  const std::string out = (dir / (name + ".out")).string(), err = (dir / (name + ".err")).string();
  pid_t pid = ::fork();
  if (pid == 0) {
    FILE* o = std::freopen(out.c_str(), "w", stdout);
    FILE* e = std::freopen(err.c_str(), "w", stderr);
    (void)o;
    (void)e;
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  for (char* p : argv) std::free(p);
  for (char* p : envp) std::free(p);
  return pid;
}

// Waits for every pid until `deadline_s`; kills and reports the ones still running.
inline std::vector<Outcome> wait_all(const std::vector<pid_t>& pids, const fs::path& dir,
                                     const std::vector<std::string>& names, double deadline_s, Clock::time_point start) {
  std::vector<Outcome> outcomes(pids.size());
  std::vector<bool> done(pids.size(), false);
  size_t remaining = pids.size();
  while (remaining > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        done[i] = true;
        --remaining;
        outcomes[i].status = status;
        outcomes[i].seconds = std::chrono::duration<double>(Clock::now() - start).count();
      }
    }
    if (std::chrono::duration<double>(Clock::now() - start).count() > deadline_s) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) {
          ::kill(pids[i], SIGKILL);
          ::waitpid(pids[i], &outcomes[i].status, 0);
          ADD_FAILURE() << names[i] << " still ran after " << deadline_s << " s: it hung";
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    outcomes[i].out = slurp(dir / (names[i] + ".out"));
    outcomes[i].err = slurp(dir / (names[i] + ".err"));
  }
  return outcomes;
}

// `world` ranks of the worker started directly, with the given rendezvous.
inline std::vector<Outcome> run_ranks(int world, const std::vector<std::string>& args, const std::string& init,
                                      std::vector<std::string> env = {}, int started = -1, double deadline_s = 20) {
  fs::path dir = fresh_dir("ranks");
  std::vector<pid_t> pids;
  std::vector<std::string> names;
  auto start = Clock::now();
  for (int r = 0; r < (started < 0 ? world : started); ++r) {
    std::vector<std::string> argv{TINY_DIST_WORKER};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> e = env;
    e.push_back("RANK=" + std::to_string(r));
    e.push_back("LOCAL_RANK=" + std::to_string(r));
    e.push_back("WORLD_SIZE=" + std::to_string(world));
    e.push_back("TINY_TEST_INIT=" + init);
    names.push_back("rank" + std::to_string(r));
    pids.push_back(spawn(argv, e, dir, names.back()));
  }
  auto outcomes = wait_all(pids, dir, names, deadline_s, start);
  fs::remove_all(dir);
  return outcomes;
}

// tinyrun --nproc-per-node NPROC [LAUNCHER_ARGS...] worker ARGS...
inline Outcome run_tinyrun(int nproc, const std::vector<std::string>& args, std::vector<std::string> env = {},
                           double deadline_s = 20, const std::vector<std::string>& launcher_args = {}) {
  fs::path dir = fresh_dir("tinyrun");
  std::vector<std::string> argv{TINYRUN, "--nproc-per-node", std::to_string(nproc)};
  argv.insert(argv.end(), launcher_args.begin(), launcher_args.end());
  argv.push_back(TINY_DIST_WORKER);
  argv.insert(argv.end(), args.begin(), args.end());
  auto start = Clock::now();
  pid_t pid = spawn(argv, env, dir, "tinyrun");
  auto outcome = wait_all({pid}, dir, {"tinyrun"}, deadline_s, start)[0];
  fs::remove_all(dir);
  return outcome;
}

inline std::string describe(const std::vector<Outcome>& outcomes) {
  std::string text;
  for (size_t i = 0; i < outcomes.size(); ++i)
    text += "rank " + std::to_string(i) + " status " + std::to_string(outcomes[i].status) + "\n" + outcomes[i].out +
            outcomes[i].err;
  return text;
}

inline std::string file_init(const std::string& what) { return "file://" + fresh_dir(what).string(); }

inline std::vector<float> read_floats(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> values;
  float v;
  while (in.read(reinterpret_cast<char*>(&v), sizeof v)) values.push_back(v);
  return values;
}

// The same steps in one process over the whole batch, from rank 0's initial weights.
inline std::vector<float> single_process_reference() {
  auto model = dist_scenario::make_model(100);
  tiny::optim::SGDOptions options;
  options.lr = dist_scenario::kLr;
  tiny::optim::SGD optimizer(model->parameters(), options);
  auto data = dist_scenario::make_data();
  for (int step = 0; step < dist_scenario::kSteps; ++step) {
    optimizer.zero_grad();
    tiny::nn::functional::mse_loss((*model)(data.x), data.y).backward();
    optimizer.step();
  }
  return dist_scenario::flat_parameters(*model);
}

inline void expect_ddp_matches_single_process(int world, const std::string& device, bool accum,
                                              std::vector<std::string> env = {}) {
  fs::path out = fresh_dir("weights") / "final.bin";
  std::vector<std::string> args{"ddp", device, out.string()};
  if (accum) args.push_back("accum");
  auto outcomes = run_ranks(world, args, file_init("rdzv"), env);
  for (const auto& o : outcomes) ASSERT_TRUE(o.ok()) << describe(outcomes);
  auto ddp = read_floats(out);
  auto reference = single_process_reference();
  auto initial = dist_scenario::flat_parameters(*dist_scenario::make_model(100));
  ASSERT_EQ(ddp.size(), reference.size());
  double moved = 0;
  for (size_t i = 0; i < ddp.size(); ++i) {
    // fp32: the ranks sum their shares in another order than one process does.
    ASSERT_NEAR(ddp[i], reference[i], 1e-5 + 1e-5 * std::abs(reference[i])) << "parameter element " << i;
    moved = std::max(moved, static_cast<double>(std::abs(reference[i] - initial[i])));
  }
  EXPECT_GT(moved, 1e-3) << "training did not change the weights: the comparison would prove nothing";
  fs::remove_all(out.parent_path());
}

// Backend gloo lets ranks share a GPU (NCCL does not): two ranks on cuda:0 run
// every collective, then DDP training that must match one process's.
inline void expect_two_ranks_sharing_cuda0_work() {
  auto outcomes = run_ranks(2, {"collectives", "cuda0"}, file_init("cuda0"));
  for (const auto& o : outcomes) {
    EXPECT_TRUE(o.ok() && o.out.find("collectives ok on cuda:0") != std::string::npos) << describe(outcomes);
  }
  expect_ddp_matches_single_process(2, "cuda0", false);
}

}  // namespace dist_test
