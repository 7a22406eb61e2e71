// Lesson 2 demo: make tensors on a GPU, move them, compute there, and time a
// matrix product on your CPU and on the GPU.
//   ./workbook run 2                  (cuda:0 if there is one, sizes 64 to 4096)
//   ./workbook run 2 cuda:1 2048      (another device, other sizes)
//   ./workbook run 2 cpu 128 256      (no GPU: only the CPU column)
//   ./workbook run 2 --gpu-only       (skip the CPU column: the GPU columns alone)
// On the emulated GPU the GPU columns are modelled time: how long the products
// would take on the GPU named by TINY_EMULATED_GPU_MODEL (default h100-sxm;
// also h200, a100-sxm, l4, t4). The CPU column is this CPU's own clock.
#include <cctype>
#include <cstdio>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "exercise.h"

namespace {

// What NOT to do, shown for comparison: the clock is read while the products
// may still be queued on the GPU, so it measures how fast work was queued.
// tiny::cuda::host_time() is the host's clock: modelled on the emulated GPU,
// this CPU's steady clock on a real one.
double time_without_synchronize_ms(const tiny::Tensor& a, const tiny::Tensor& b, int reps) {
  tiny::cuda::synchronize(a.get_device());
  const double start = tiny::cuda::host_time();
  for (int i = 0; i < reps; ++i) a.matmul(b);
  const double stop = tiny::cuda::host_time();
  tiny::cuda::synchronize(a.get_device());  // tidy up, after the clock (the mistake)
  return (stop - start) * 1e3 / reps;
}

// One product as a program on the CPU would ask for it: copy both inputs to
// the GPU, multiply there, copy the answer back (.cpu() waits for the GPU).
double time_with_copies_ms(const tiny::Tensor& a_cpu, const tiny::Tensor& b_cpu, const tiny::Device& gpu) {
  tiny::cuda::synchronize(gpu.index());
  const double start = tiny::cuda::host_time();
  const tiny::Tensor c = a_cpu.to(gpu).matmul(b_cpu.to(gpu)).cpu();
  return (tiny::cuda::host_time() - start) * 1e3;
}

std::string cell(double value, int digits, const char* suffix = "") {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f%s", digits, value, suffix);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const bool have_gpu = tiny::cuda::is_available() && tiny::cuda::device_count() > 0;
  bool gpu_only = false;
  std::string device_name = have_gpu ? "cuda:0" : "cpu";
  std::vector<int64_t> sizes;
  std::vector<std::string> words;
  CLI::App app{"Lesson 2 demo: tensors made on a GPU, moved, computed there; a matrix product timed on the CPU and "
               "the GPU", "./workbook run 2"};
  app.add_option("device-and-sizes", words, "[DEVICE] [N...]: the device (default cuda:0 when there is a GPU, else "
                                            "cpu) and the sizes n of the n x n products (default 64 to 4096)");
  app.add_flag("--gpu-only", gpu_only, "skip the CPU column: the GPU columns alone");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a bad flag: CLI11 names it, and the status is 2 as before
  }
  // A word that starts with a digit is a size, any other the device, in any order (as before CLI11 read them).
  for (const std::string& w : words) {
    if (std::isdigit(static_cast<unsigned char>(w[0]))) sizes.push_back(std::atoll(w.c_str()));
    else device_name = w;
  }
  if (sizes.empty()) sizes = {64, 128, 256, 512, 1024, 2048, 4096};
  try {
    const tiny::Device gpu(device_name);
    const bool emulated = gpu.is_cuda() && tiny::cuda::is_emulated(gpu.index());
    std::string gpu_clock = "no GPU here: everything runs on the CPU";
    if (emulated) {
      const tiny::cuda::DeviceProperties p = tiny::cuda::get_device_properties(gpu.index());
      std::printf("%s - EMULATED on your CPU; timing modelled on the %s (an estimate)\n", gpu.str().c_str(),
                  p.modelled_gpu.c_str());
      gpu_clock = gpu.str() + ": the modelled " + p.modelled_gpu + "'s clock (events; host_time for the last two)";
    } else if (gpu.is_cuda()) {
      std::printf("%s\n", tiny::cuda::device_banner(gpu).c_str());
      gpu_clock = gpu.str() + ": the GPU's clock (events; the host's clock for the last two)";
    } else {
      std::printf("%s\n", gpu_clock.c_str());
    }

    // 1. Make, move, find.
    tiny::Generator generator(2);
    const tiny::Tensor x = lesson2::make_on_device({2, 3}, gpu, generator);
    std::printf("\nmade x on %s: where_is(x) = %d\n", x.device().str().c_str(), lesson2::where_is(x));
    const std::vector<tiny::Tensor> back = lesson2::to_device({x}, tiny::Device("cpu"));
    std::printf("moved a copy to %s (where_is = %d); x itself is still on %s\n",
                back[0].device().str().c_str(), lesson2::where_is(back[0]), x.device().str().c_str());
    std::ostringstream text;
    text << back[0];
    std::printf("x, read on the CPU: %s\n", text.str().c_str());

    // 2. Compute on the GPU, read on the CPU.
    const tiny::Tensor xs = tiny::randn({4, 3}, {}, generator), w = tiny::randn({3, 2}, {}, generator);
    const tiny::Tensor y = lesson2::gpu_compute_then_cpu(xs, w, gpu);
    std::printf("\nrelu(x @ w) computed on %s, returned on %s, shape %s\n", gpu.str().c_str(),
                y.device().str().c_str(), tiny::shape_str(y.sizes()).c_str());

    // 3. The repaired function, with the activation on the GPU and the parameters on the CPU.
    const tiny::Tensor act = tiny::randn({4, 3}, gpu, generator);
    const tiny::Tensor b = tiny::zeros({2});
    const tiny::Tensor z = lesson2::linear_relu(act, w, b);
    std::printf("linear_relu(x on %s, w on %s, b on %s) -> result on %s\n", act.device().str().c_str(),
                w.device().str().c_str(), b.device().str().c_str(), z.device().str().c_str());

    // 4. Timing: time_matmul_ms on each device, each with its own clock.
    std::printf("\nmatrix product n x n, float32, ms per product (after a warm-up)\n");
    std::printf("  cpu: this CPU's clock (std::chrono)\n  %s\n", gpu_clock.c_str());
    std::printf("%6s %11s %11s %8s %9s %12s %9s %9s\n", "n", "cpu ms", (gpu.str() + " ms").c_str(), "TFLOP/s",
                "speedup", "+copies ms", "+copies x", "NO sync");
    int64_t looks_unsynchronized = 0;  // the largest n whose product timed like the NO sync column
    for (const int64_t n : sizes) {
      const int reps = n <= 256 ? 10 : n <= 1024 ? 3 : 1;
      const tiny::Tensor a_cpu = tiny::randn({n, n}, {}, generator), b_cpu = tiny::randn({n, n}, {}, generator);
      const double cpu_ms = gpu_only ? 0 : lesson2::time_matmul_ms(a_cpu, b_cpu, reps);
      std::string gpu_ms = "-", tflops = "-", speedup = "-", copies_ms = "-", copies_speedup = "-", no_sync = "-";
      if (gpu.is_cuda()) {
        const std::vector<tiny::Tensor> on_gpu = lesson2::to_device({a_cpu, b_cpu}, gpu);
        const double ms = lesson2::time_matmul_ms(on_gpu[0], on_gpu[1], reps);
        const double with_copies = time_with_copies_ms(a_cpu, b_cpu, gpu);
        gpu_ms = cell(ms, 4);
        tflops = cell(2.0 * n * n * n / (ms * 1e-3) / 1e12, 1);
        copies_ms = cell(with_copies, 4);
        const double no_sync_ms = time_without_synchronize_ms(on_gpu[0], on_gpu[1], reps);
        no_sync = cell(no_sync_ms, 4);
        if (n >= 1024 && ms <= 1.5 * no_sync_ms) looks_unsynchronized = n;
        if (!gpu_only) {
          speedup = cell(cpu_ms / ms, 1, "x");
          copies_speedup = cell(cpu_ms / with_copies, 1, "x");
        }
      }
      std::printf("%6lld %11s %11s %8s %9s %12s %9s %9s\n", static_cast<long long>(n),
                  gpu_only ? "-" : cell(cpu_ms, 3).c_str(), gpu_ms.c_str(), tflops.c_str(), speedup.c_str(),
                  copies_ms.c_str(), copies_speedup.c_str(), no_sync.c_str());
    }
    if (looks_unsynchronized > 0) {
      std::printf("\n!! At n=%lld your time_matmul_ms is about the NO sync column: it read the clock before the GPU\n"
                  "!! had finished, so its ms and TFLOP/s are not the product's. Wait for the GPU first\n"
                  "!! (./workbook check 2 names what is missing).\n",
                  static_cast<long long>(looks_unsynchronized));
    }
    if (gpu.is_cuda()) {
      std::printf("\n'with copies' also moves a and b to the GPU and the answer back (.cpu()): small products do\n"
                  "not pay for the launch and the copies, large ones do. 'NO sync' reads the clock without\n"
                  "waiting for the GPU: it measures how fast work is queued, not how fast it runs.\n");
    }
    if (emulated) {
      std::printf("The GPU columns are modelled: the emulated GPU computed on your CPU, and its clock says how\n"
                  "long the same work would take on the modelled %s (TINY_EMULATED_GPU_MODEL picks\n"
                  "another: h100-sxm, h200, a100-sxm, l4, t4; docs/performance_model.md says how close it is).\n",
                  tiny::cuda::get_device_properties(gpu.index()).modelled_gpu.c_str());
    }
  } catch (const tiny::NotImplemented& e) {
    std::printf("%s\n(fill in lessons/2_moving_tensors/exercise.cpp, then run ./workbook check 2)\n", e.what());
    return 1;
  } catch (const tiny::Error& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  return 0;
}
