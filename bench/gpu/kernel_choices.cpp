// Which kernels tiny's operations launch on a real GPU, and how long each runs,
// as CUPTI records them through tiny's profiler: the evidence the GEMM and
// memset models need beyond a row's total (which cuBLAS kernel a small or
// unaligned product gets, whether it splits K and sums the parts in a second
// kernel; whether zero_ runs as a memset or as tiny's fill kernel, and at what rate).
//
//   kernel_choices OUT.jsonl
//
// One JSON object per line: {"case": "gemm/<dtype>/<m>/<n>/<k>" or
// "fill/<zero_|fill_>/<n>", "trace": <the profile's Chrome trace>}; each case
// runs its op three times after a warm-up, so the trace holds three of each
// kernel. bench/gpu/on_device.sh runs it; on the emulated GPU it stops, saying
// why, unless BENCH_ON_EMULATOR=1 (which checks the program, not the figures).
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>

#include "tiny/cuda.h"
#include "tiny/matmul_precision.h"
#include "tiny/ops.h"
#include "tiny/profiler.h"
#include "tiny/tensor.h"
#include "gemm_shapes.h"

namespace {

// Runs `op` once outside the profile, then three times inside it, and writes
// the case's line.
void record(std::ofstream& out, const std::string& name, const std::function<void()>& op) {
  op();
  tiny::cuda::synchronize(0);
  tiny::profiler::profile prof;
  for (int i = 0; i < 3; ++i) op();
  tiny::cuda::synchronize(0);
  prof.stop();
  out << "{\"case\": \"" << name << "\", \"trace\": " << prof.chrome_trace() << "}" << std::endl;  // kept if killed
}

void gemms(std::ofstream& out) {
  struct Math {
    const char* name;
    tiny::Dtype dtype;
    const char* precision;
  };
  for (const Math& math : {Math{"float32", tiny::kFloat32, "highest"}, Math{"tf32", tiny::kFloat32, "high"},
                           Math{"float16", tiny::kFloat16, "highest"}, Math{"bfloat16", tiny::kBFloat16, "highest"}}) {
    tiny::set_float32_matmul_precision(math.precision);
    for (const auto& s : bench::calibration_gemm_shapes()) {
      const tiny::Tensor a = tiny::randn({s[0], s[2]}, "cuda:0").to(math.dtype);
      const tiny::Tensor b = tiny::randn({s[2], s[1]}, "cuda:0").to(math.dtype);
      const std::string name = std::string("gemm/") + math.name + "/" + std::to_string(s[0]) + "/" +
                               std::to_string(s[1]) + "/" + std::to_string(s[2]);
      record(out, name, [&] { (void)tiny::matmul(a, b); });
    }
  }
  tiny::set_float32_matmul_precision("highest");
}

void fills(std::ofstream& out) {
  for (int64_t n : {1 << 20, 1 << 22, 1 << 23, 1 << 24, 1 << 25, 1 << 26}) {
    const tiny::Tensor t = tiny::empty({n}, "cuda:0");
    record(out, "fill/zero_/" + std::to_string(n), [&] { t.zero_(); });
    record(out, "fill/fill_/" + std::to_string(n), [&] { t.fill_(1.5); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: kernel_choices OUT.jsonl\n";
    return 2;
  }
  if (!tiny::cuda::is_available() || (tiny::cuda::is_emulated(0) && std::getenv("BENCH_ON_EMULATOR") == nullptr)) {
    std::cerr << "kernel_choices: cuda:0 is not a real GPU, and these are a real GPU's kernels (BENCH_ON_EMULATOR=1 "
                 "runs it on the emulated GPU, to check the program)\n";
    return 0;
  }
  std::ofstream out(argv[1]);
  if (!out) {
    std::cerr << "kernel_choices: cannot write " << argv[1] << "\n";
    return 1;
  }
  gemms(out);
  fills(out);
  std::cout << "kernel_choices: wrote " << argv[1] << " (" << tiny::cuda::get_device_name(0) << ")\n";
  return out ? 0 : 1;
}
