// Lesson 2 demo: make tensors on a GPU, move them, compute there, and time a
// matrix product on the CPU and on the GPU.
//   ./workbook run 2                 (cuda:0 if there is a GPU, sizes 256 512 1024)
//   ./workbook run 2 cuda:1 2048     (another device, other sizes)
//   ./workbook run 2 cpu 128 256     (no GPU: both columns on the CPU)
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "exercise.h"

namespace {

// What NOT to do, shown for comparison: the clock is read while the products
// may still be queued on the GPU, so it measures how fast work was queued.
double time_without_synchronize_ms(const tiny::Tensor& a, const tiny::Tensor& b, int reps) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) a.matmul(b);
  const auto stop = std::chrono::steady_clock::now();
  if (a.is_cuda()) tiny::cuda::synchronize(a.get_device());  // tidy up, after the clock (the mistake)
  return std::chrono::duration<double, std::milli>(stop - start).count() / reps;
}

}  // namespace

int main(int argc, char** argv) {
  const bool have_gpu = tiny::cuda::is_available() && tiny::cuda::device_count() > 0;
  const bool device_given = argc > 1 && !std::isdigit(static_cast<unsigned char>(argv[1][0]));
  std::vector<int64_t> sizes;
  for (int i = device_given ? 2 : 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  if (sizes.empty()) sizes = {256, 512, 1024};
  try {
    const tiny::Device gpu(device_given ? std::string(argv[1]) : std::string(have_gpu ? "cuda:0" : "cpu"));
    if (gpu.is_cuda()) std::printf("%s\n", tiny::cuda::device_banner(gpu).c_str());
    else std::printf("no GPU here: everything runs on the CPU (the GPU column equals the CPU one)\n");
    const bool emulated = gpu.is_cuda() && tiny::cuda::is_emulated(gpu.index());

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

    // 4. Timing.
    std::printf("\nmatrix product n x n, float32, ms per product (mean of the timed reps, after a warm-up)\n");
    std::printf("%7s %12s %12s %10s %26s\n", "n", "cpu ms", (gpu.str() + " ms").c_str(), "speedup",
                "gpu ms, NO synchronize");
    for (const int64_t n : sizes) {
      const int reps = n <= 512 ? 5 : 2;
      const tiny::Tensor a_cpu = tiny::randn({n, n}, {}, generator), b_cpu = tiny::randn({n, n}, {}, generator);
      const tiny::Tensor a_gpu = lesson2::to_device({a_cpu}, gpu)[0], b_gpu = lesson2::to_device({b_cpu}, gpu)[0];
      const double cpu_ms = lesson2::time_matmul_ms(a_cpu, b_cpu, reps);
      const double gpu_ms = lesson2::time_matmul_ms(a_gpu, b_gpu, reps);
      const double wrong_ms = time_without_synchronize_ms(a_gpu, b_gpu, reps);
      char wrong[32] = "(no GPU)";
      if (gpu.is_cuda()) std::snprintf(wrong, sizeof wrong, "%.3f", wrong_ms);
      std::printf("%7lld %12.3f %12.3f %9.1fx %26s\n", static_cast<long long>(n), cpu_ms, gpu_ms, cpu_ms / gpu_ms,
                  wrong);
    }
    if (emulated) {
      std::printf("\n%s is EMULATED on your CPU: these are host timings, so the GPU column is about the CPU's\n"
                  "speed (the emulated device owns a share of your cores). On real hardware a 4096 x 4096\n"
                  "float32 product takes milliseconds: see the README for an H100's figures.\n",
                  gpu.str().c_str());
    }
    if (gpu.is_cuda()) {
      std::printf("The last column reads the clock without waiting for the GPU: it measures how fast work is\n"
                  "queued, not how fast it runs.\n");
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
