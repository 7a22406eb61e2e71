#include "gpu/model/cost.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tiny::gpu::model {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t to_ns(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e9)); }

double efficiency_of(const DeviceModel& m, Work work) {
  switch (work) {
    case Work::pointwise: return m.pointwise_efficiency;
    case Work::memset: return m.memset_efficiency;
    case Work::reduction: return m.reduction_efficiency;
    case Work::optimizer: return m.optimizer_efficiency;
    case Work::gemm: return m.pointwise_efficiency;  // a GEMM's memory traffic
  }
  return 1.0;
}

bool tensor_core_math(const char* math) { return std::strstr(math, "_tensor") != nullptr; }

// The arithmetic of a GEMM in seconds: the best of a few tile shapes, as
// cuBLAS's heuristics pick among its kernels (the smallest, 32x32, only where
// the H100's trace showed cuBLAS running it: float32 on the CUDA cores, and
// the WMMA kernels of unaligned float16/bfloat16). Each tile runs on one SM at
// `efficiency` of its share of the peak; tiles run in waves of sm_count (the
// last wave may be partly idle: wave quantization); every tile pays
// gemm_k_overhead extra k steps.
//
// Split-K, as the H100's kernel trace shows cuBLAS choosing it
// (data/gpu_measurements/h100-sxm-2026-11-27-kernels.json): only float32 on
// the SIMT units, and there whenever the output is small (at most
// gemm_split_k_max_output elements, too few tiles to fill the SMs) and K is
// worth splitting (over 64) or a dimension is not a multiple of 4 (cuBLASLt's
// unaligned kernels always finish in a reduction kernel). Such a product runs
// two kernels: the partial products, written out, then their sum. float16
// and bfloat16 products of the training shapes ran one kernel. TF32 ones split
// K too in the trace, on a slightly different boundary; no TF32 product has
// been timed through tiny, so the model leaves them one kernel.
double gemm_seconds(const DeviceModel& m, const KernelCost& c) {
  const char* math = gemm_math(m, c.dtype, c.allow_tf32);
  double rate = m.peak_of(math) / m.sm_count;  // FLOP/s of one SM
  const bool tensor_cores = tensor_core_math(math);
  const bool aligned8 = c.m % 8 == 0 && c.n % 8 == 0 && c.k % 8 == 0;
  if (tensor_cores && !aligned8) {
    rate *= m.unaligned_tensor_core_efficiency;  // no aligned 16-byte loads: the slow kernels
  }
  const bool unaligned = c.m % 4 != 0 || c.n % 4 != 0 || c.k % 4 != 0;
  const bool split_k = std::strcmp(math, "float32") == 0 && c.m * c.n <= m.gemm_split_k_max_output &&
                       (c.k > 64 || unaligned);
  double best = std::numeric_limits<double>::infinity();
  for (const Tile& tile : m.tiles) {
    if (tensor_cores && aligned8 && !tile.aligned_tensor_cores) continue;
    const int64_t tiles = ceil_div(c.m, tile.m) * ceil_div(c.n, tile.n);
    for (int64_t split = 1; split <= (split_k ? 32 : 1); split *= 2) {
      if (split > 1 && c.k / split < 64) break;
      const int64_t waves = ceil_div(tiles * split, m.sm_count);
      const double k_steps = static_cast<double>(ceil_div(c.k, split)) + m.gemm_k_overhead;
      double t = static_cast<double>(waves) * 2.0 * tile.m * tile.n * k_steps / (rate * tile.efficiency);
      if (split_k) {  // the partial products are written, then summed by a second kernel
        const double partial_bytes = 2.0 * static_cast<double>(split) * c.m * c.n * 4;
        t += m.min_kernel_ns * 1e-9 + partial_bytes / (m.memory_bandwidth * m.pointwise_efficiency);
      }
      best = std::min(best, t);
    }
  }
  return best;
}

}  // namespace

const char* gemm_math(const DeviceModel& m, Dtype dtype, bool allow_tf32) {
  switch (dtype) {
    case Dtype::Float16: return m.peak_of("float16_tensor") > 0 ? "float16_tensor" : "float16";
    case Dtype::BFloat16:
      if (m.peak_of("bfloat16_tensor") > 0) return "bfloat16_tensor";
      return m.peak_of("bfloat16") > 0 ? "bfloat16" : "float32";
    case Dtype::Float64: return m.peak_of("float64_tensor") > 0 ? "float64_tensor" : "float64";
    case Dtype::Float32:  // TF32 only when allowed (PyTorch's default is "highest") and the GPU has it (not a T4)
      return allow_tf32 && m.peak_of("tf32_tensor") > 0 ? "tf32_tensor" : "float32";
    default: return "float32";  // int64 products are rare
  }
}

KernelCost gemm_cost(Dtype dtype, int64_t m, int64_t n, int64_t k, bool reads_c, bool allow_tf32) {
  KernelCost c;
  c.allow_tf32 = allow_tf32 && dtype == Dtype::Float32;
  c.work = Work::gemm;
  c.dtype = dtype;
  c.m = m;
  c.n = n;
  c.k = k;
  c.flops = 2.0 * static_cast<double>(m) * n * k;
  const int64_t size = static_cast<int64_t>(element_size(dtype));
  c.bytes = size * (m * k + k * n + m * n * (reads_c ? 2 : 1));
  return c;
}

int64_t kernel_ns(const DeviceModel& m, const KernelCost& c) {
  double seconds = static_cast<double>(c.bytes) / (m.memory_bandwidth * efficiency_of(m, c.work));
  if (c.work == Work::gemm) {
    if (c.m > 0 && c.n > 0 && c.k > 0) seconds = std::max(seconds, gemm_seconds(m, c)) + m.gemm_fixed_ns * 1e-9;
  } else if (c.flops > 0) {
    seconds = std::max(seconds, c.flops / m.peak_of("float32"));
  }
  if (c.threads > 0) {  // one element per thread: the SMs retire threads no faster than thread_rate
    seconds = std::max(seconds, static_cast<double>(std::min(c.threads, kMaxKernelThreads)) / m.thread_rate());
  }
  return std::max(m.min_kernel_ns, to_ns(seconds));
}

int64_t copy_ns(const DeviceModel& m, CopyKind kind, bool pinned, int64_t bytes, bool peer) {
  const auto b = static_cast<double>(bytes);
  if (peer) {
    const double link = m.nvlink_bandwidth > 0 ? m.nvlink_bandwidth : m.pcie_bandwidth();
    return m.copy_fixed_ns + to_ns(b / (link * m.pinned_efficiency));
  }
  const double pinned_rate = m.pcie_bandwidth() * m.pinned_efficiency;
  switch (kind) {
    case CopyKind::HostToDevice:
      if (pinned) return m.copy_fixed_ns + to_ns(b / pinned_rate);
      return m.copy_fixed_ns + m.pageable_to_device_fixed_ns + to_ns(b / std::min(pinned_rate, m.pageable_to_device));
    case CopyKind::DeviceToHost:
      if (pinned) return m.copy_fixed_ns + to_ns(b / pinned_rate);
      return m.copy_fixed_ns + m.pageable_to_host_fixed_ns + to_ns(b / std::min(pinned_rate, m.pageable_to_host));
    case CopyKind::DeviceToDevice: {
      KernelCost c;
      c.bytes = 2 * bytes;
      return kernel_ns(m, c);
    }
    case CopyKind::HostToHost: return to_ns(b / m.pageable_to_host);
  }
  return 0;
}

}  // namespace tiny::gpu::model
