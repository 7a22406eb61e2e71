// The real GPU whose speed the emulated GPU models (DESIGN.md section 4a):
// datasheet figures and efficiency factors fitted on real measurements, read
// from gpu_models.json (compiled into the library), or from a file of the same
// shape. TINY_EMULATED_GPU_MODEL picks one: a name (h100-sxm, the default;
// h200, a100-sxm, l4, t4; any case) or the path of a .json file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tiny::gpu::model {

// A GEMM tile shape the model may choose, and the share of the SM's peak it reaches.
struct Tile {
  int64_t m = 128, n = 128;
  double efficiency = 1.0;
  // false: cuBLAS runs this tile only on the CUDA cores (float32) and in its
  // kernels for unaligned tensor-core products, never for aligned ones.
  bool aligned_tensor_cores = true;
};

// The collectives' parameters (gpu/model/collective_cost.h; sources in gpu_models.json's "collective_sources").
struct CollectiveParams {
  int64_t nccl_base_ns = 0;           // NCCL's fixed cost of one ring collective (baseLat, Ring/Simple)
  int64_t nccl_step_nvlink_ns = 0;    // ... per ring step over NVLink (hwLat)
  int64_t nccl_step_pcie_ns = 0;      // ... per ring step over PCIe (hwLat)
  double nccl_bus_efficiency = 1;     // share of the link's bandwidth a ring's bus bandwidth reaches
  int64_t gloo_step_ns = 0;           // Gloo: one ring step through loopback TCP and host memory
  double gloo_bandwidth = 0;          // Gloo: bytes/s a rank sends through host memory
};

struct DeviceModel {
  std::string name;          // "h100-sxm"
  std::string display_name;  // "H100 SXM"
  std::string source;        // where the datasheet figures come from
  std::string fitted_on;     // which measurements fitted the factors
  std::string digest;        // of every figure the model was built from (FNV-1a, hex): equal digests, equal times
  int major = 0, minor = 0;  // compute capability
  int sm_count = 1;
  double boost_clock_hz = 0;
  double memory_gb = 0;
  double memory_bandwidth = 0;  // bytes/s
  int pcie_generation = 4, pcie_lanes = 16;
  double nvlink_bandwidth = 0;  // bytes/s per direction; 0: none
  // Dense peaks in FLOP/s, by math: "float32", "tf32_tensor", "float16_tensor", ...; 0 or absent: none.
  std::map<std::string, double> peak;

  // Fixed costs, in nanoseconds.
  int64_t host_launch_ns = 0;     // the host's cost of dispatching one kernel (tiny's own, per launch)
  int64_t host_gemm_ns = 0;       // ... extra for a matrix product (cuBLAS's own host side), beyond host_launch_ns
  int64_t host_copy_ns = 0;       // ... of one copy call
  int64_t host_autograd_ns = 0;   // ... of recording an op for backward, and of running its backward
  int64_t launch_latency_ns = 0;  // from the launch call to the kernel's start on an idle GPU
  int64_t sync_ns = 0;            // a synchronize that finds the work done
  int64_t min_kernel_ns = 0;      // the shortest kernel, back to back
  int64_t gemm_fixed_ns = 0;      // a GEMM's prologue and epilogue
  int64_t copy_fixed_ns = 0;      // a copy's set-up on its engine
  // Efficiencies (share of the peak reached) and fitted rates.
  double pointwise_efficiency = 1, memset_efficiency = 1, optimizer_efficiency = 1, reduction_efficiency = 1;
  // Threads a kernel of one element per thread retires per SM per clock cycle
  // (launching a block of threads, a load or store each, and retiring it).
  double threads_per_sm_cycle = 0;
  double gemm_k_overhead = 0;  // extra k steps of each GEMM tile (pipeline fill, epilogue)
  std::vector<Tile> tiles;
  // float32 GEMMs on the SIMT units split K over two kernels when C has at most this many elements (cost.cpp).
  int64_t gemm_split_k_max_output = 0;
  double unaligned_tensor_core_efficiency = 1;  // float16/bfloat16 GEMMs with a dimension not a multiple of 8
  double pinned_efficiency = 1;                 // share of the PCIe link a pinned copy reaches
  double pageable_to_device = 0, pageable_to_host = 0;  // bytes/s, staged through the host
  int64_t pageable_to_device_fixed_ns = 0, pageable_to_host_fixed_ns = 0;  // the staging's own set-up

  CollectiveParams collective;

  // The peak for `math`, or 0 when the GPU has no such unit.
  double peak_of(const std::string& math) const;
  // Threads per second a kernel of one element per thread retires.
  double thread_rate() const { return threads_per_sm_cycle * sm_count * boost_clock_hz; }
  // PCIe bandwidth per direction in bytes/s (the link's raw rate).
  double pcie_bandwidth() const;
};

// The built-in models' names, in the order of gpu_models.json.
std::vector<std::string> known_models();
// A built-in model by name (case-insensitive) or a model file's path (ending
// in .json). An unknown name throws tiny::ValueError listing the known ones; a
// malformed file throws naming the file and the field.
DeviceModel load_model(const std::string& name_or_path);
// The model the emulated GPU uses: TINY_EMULATED_GPU_MODEL, default h100-sxm.
// Read once per process.
const DeviceModel& selected_model();

inline constexpr const char* kEmulatedGpuModelVariable = "TINY_EMULATED_GPU_MODEL";
inline constexpr const char* kDefaultGpuModel = "h100-sxm";  // when the variable is unset or empty

}  // namespace tiny::gpu::model
