#include "gpu/model/device_model.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tiny/error.h"

namespace tiny::gpu::model {

// gpu_models.json, compiled in (framework/CMakeLists.txt generates its definition).
extern const char* const kGpuModelsJson;

namespace {

using json = nlohmann::ordered_json;  // keeps the models in the file's order

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

const json& builtin() {
  static const json models = json::parse(kGpuModelsJson);
  return models;
}

// A field of `object`, or of `defaults` when the model does not set it.
template <typename T>
T field(const json& object, const json& defaults, const char* key, const std::string& where) {
  const json* value = object.contains(key) ? &object.at(key) : defaults.contains(key) ? &defaults.at(key) : nullptr;
  TINY_CHECK(value != nullptr, ValueError, where, ": the model has no \"", key, "\" (and the file no default for it)");
  try {
    return value->get<T>();
  } catch (const json::exception&) {
    TINY_THROW(ValueError, where, ": \"", key, "\" is ", value->dump(), ", which is not a ",
               std::is_same_v<T, std::string> ? "string" : "number");
  }
}

// The collectives' parameters; a value out of range names itself and what it means.
void parse_collective(const json& m, const json& defaults, const std::string& at, CollectiveParams& c) {
  auto positive_ns = [&](const char* key) {
    const auto ns = field<int64_t>(m, defaults, key, at);
    TINY_CHECK(ns >= 0, ValueError, at, ": \"", key, "\" is ", ns, ": a latency in nanoseconds must be >= 0 (NCCL's "
               "own figures are a few thousand, e.g. 3400 per ring step over NVLink)");
    return ns;
  };
  c.nccl_base_ns = positive_ns("nccl_base_latency_ns");
  c.nccl_step_nvlink_ns = positive_ns("nccl_step_latency_nvlink_ns");
  c.nccl_step_pcie_ns = positive_ns("nccl_step_latency_pcie_ns");
  c.gloo_step_ns = positive_ns("gloo_step_latency_ns");
  c.nccl_bus_efficiency = field<double>(m, defaults, "nccl_bus_efficiency", at);
  TINY_CHECK(c.nccl_bus_efficiency > 0 && c.nccl_bus_efficiency <= 1, ValueError, at, ": \"nccl_bus_efficiency\" is ",
             c.nccl_bus_efficiency, ": it is the share of the link's bandwidth NCCL's ring reaches, a number in (0, 1] "
             "(0.8 by default)");
  c.gloo_bandwidth = field<double>(m, defaults, "gloo_bandwidth_gbps", at) * 1e9;
  TINY_CHECK(c.gloo_bandwidth > 0, ValueError, at, ": \"gloo_bandwidth_gbps\" is ", c.gloo_bandwidth / 1e9,
             ": Gloo's rate through host memory in GB/s must be positive (5 by default)");
}

// FNV-1a, 64 bits, in hex: a digest to tell two models apart, not a secret.
std::string fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

DeviceModel parse(const json& file, const std::string& name, const std::string& where) {
  const json& models = file.at("models");
  const json& m = models.at(name);
  const json defaults = file.contains("defaults") ? file.at("defaults") : json::object();
  const std::string at = where + ", model \"" + name + "\"";
  DeviceModel d;
  d.name = name;
  // json's objects keep their keys sorted, so the same figures dump the same text.
  d.digest = fnv1a(name + "\n" + m.dump() + "\n" + defaults.dump());
  d.display_name = field<std::string>(m, defaults, "display_name", at);
  d.source = field<std::string>(m, defaults, "source", at);
  d.fitted_on = field<std::string>(m, defaults, "fitted_on", at);
  const auto cc = field<std::vector<int>>(m, defaults, "compute_capability", at);
  TINY_CHECK(cc.size() == 2, ValueError, at, ": \"compute_capability\" must be [major, minor]");
  d.major = cc[0];
  d.minor = cc[1];
  d.sm_count = field<int>(m, defaults, "sm_count", at);
  d.boost_clock_hz = field<double>(m, defaults, "boost_clock_mhz", at) * 1e6;
  d.memory_gb = field<double>(m, defaults, "memory_gb", at);
  d.memory_bandwidth = field<double>(m, defaults, "memory_bandwidth_gbps", at) * 1e9;
  d.pcie_generation = field<int>(m, defaults, "pcie_generation", at);
  d.pcie_lanes = field<int>(m, defaults, "pcie_lanes", at);
  d.nvlink_bandwidth = field<double>(m, defaults, "nvlink_gbps_per_direction", at) * 1e9;
  for (const auto& [math, tflops] : field<std::map<std::string, double>>(m, defaults, "tflops", at)) {
    d.peak[math] = tflops * 1e12;
  }
  d.host_launch_ns = field<int64_t>(m, defaults, "host_launch_ns", at);
  d.host_gemm_ns = field<int64_t>(m, defaults, "host_gemm_ns", at);
  d.host_copy_ns = field<int64_t>(m, defaults, "host_copy_ns", at);
  d.host_autograd_ns = field<int64_t>(m, defaults, "host_autograd_ns", at);
  d.launch_latency_ns = field<int64_t>(m, defaults, "launch_latency_ns", at);
  d.sync_ns = field<int64_t>(m, defaults, "sync_ns", at);
  d.min_kernel_ns = field<int64_t>(m, defaults, "min_kernel_ns", at);
  d.gemm_fixed_ns = field<int64_t>(m, defaults, "gemm_fixed_ns", at);
  d.copy_fixed_ns = field<int64_t>(m, defaults, "copy_fixed_ns", at);
  d.pointwise_efficiency = field<double>(m, defaults, "pointwise_bandwidth_efficiency", at);
  d.memset_efficiency = field<double>(m, defaults, "memset_bandwidth_efficiency", at);
  d.optimizer_efficiency = field<double>(m, defaults, "optimizer_bandwidth_efficiency", at);
  d.reduction_efficiency = field<double>(m, defaults, "reduction_bandwidth_efficiency", at);
  d.threads_per_sm_cycle = field<double>(m, defaults, "pointwise_threads_per_sm_cycle", at);
  d.gemm_k_overhead = field<double>(m, defaults, "gemm_k_overhead", at);
  for (const auto& [shape, efficiency] : field<std::map<std::string, double>>(m, defaults, "gemm_tile_efficiency", at)) {
    Tile t;
    char x = 0;
    std::istringstream in(shape);
    TINY_CHECK((in >> t.m >> x >> t.n) && x == 'x' && t.m > 0 && t.n > 0, ValueError, at,
               ": a \"gemm_tile_efficiency\" key must read MxN (for example \"128x128\"), got \"", shape, "\"");
    t.efficiency = efficiency;
    d.tiles.push_back(t);
  }
  for (const std::string& shape : field<std::vector<std::string>>(m, defaults, "gemm_tiles_not_for_aligned_tensor_cores", at)) {
    const auto it = std::find_if(d.tiles.begin(), d.tiles.end(), [&](const Tile& t) {
      return shape == std::to_string(t.m) + "x" + std::to_string(t.n);
    });
    TINY_CHECK(it != d.tiles.end(), ValueError, at, ": \"gemm_tiles_not_for_aligned_tensor_cores\" names \"", shape,
               "\", which is not a key of \"gemm_tile_efficiency\"");
    it->aligned_tensor_cores = false;
  }
  d.gemm_split_k_max_output = field<int64_t>(m, defaults, "gemm_split_k_max_output", at);
  d.unaligned_tensor_core_efficiency = field<double>(m, defaults, "gemm_unaligned_tensor_core_efficiency", at);
  d.pinned_efficiency = field<double>(m, defaults, "pinned_efficiency", at);
  d.pageable_to_device = field<double>(m, defaults, "pageable_to_device_gbps", at) * 1e9;
  d.pageable_to_host = field<double>(m, defaults, "pageable_to_host_gbps", at) * 1e9;
  d.pageable_to_device_fixed_ns = field<int64_t>(m, defaults, "pageable_to_device_fixed_ns", at);
  d.pageable_to_host_fixed_ns = field<int64_t>(m, defaults, "pageable_to_host_fixed_ns", at);
  parse_collective(m, defaults, at, d.collective);
  TINY_CHECK(d.sm_count > 0 && d.boost_clock_hz > 0 && d.memory_bandwidth > 0 && !d.tiles.empty() &&
                 d.peak_of("float32") > 0 && d.threads_per_sm_cycle > 0,
             ValueError, at,
             ": sm_count, boost_clock_mhz, memory_bandwidth_gbps, tflops.float32, gemm_tile_efficiency and "
             "pointwise_threads_per_sm_cycle must be positive");
  for (double e : {d.pointwise_efficiency, d.memset_efficiency, d.optimizer_efficiency, d.reduction_efficiency,
                   d.unaligned_tensor_core_efficiency, d.pinned_efficiency}) {
    TINY_CHECK(e > 0 && e <= 1, ValueError, at, ": every efficiency must be in (0, 1], got ", e);
  }
  return d;
}

DeviceModel from_file(const std::string& path) {
  std::ifstream in(path);
  TINY_CHECK(in.good(), ValueError, kEmulatedGpuModelVariable, "=\"", path,
             "\": cannot read this file; give a model name (", [] {
               std::string names;
               for (const auto& n : known_models()) names += (names.empty() ? "" : ", ") + n;
               return names;
             }(), ") or the path of a model file shaped as framework/src/gpu/model/gpu_models.json");
  json file;
  try {
    file = json::parse(in);
  } catch (const json::exception& e) {
    TINY_THROW(ValueError, path, " is not valid JSON (", e.what(), "): a model file is shaped as "
               "framework/src/gpu/model/gpu_models.json");
  }
  TINY_CHECK(file.is_object() && file.contains("models") && file.at("models").is_object() &&
                 file.at("models").size() == 1 && file.at("models").begin()->is_object(),
             ValueError, path, ": a model file holds {\"models\": {\"NAME\": {...}}} with exactly one model");
  const std::string name = file.at("models").begin().key();
  return parse(file, name, path);
}

}  // namespace

double DeviceModel::peak_of(const std::string& math) const {
  const auto it = peak.find(math);
  return it == peak.end() ? 0.0 : it->second;
}

double DeviceModel::pcie_bandwidth() const {
  // Per lane and direction after encoding: gen3 8 GT/s 128b/130b, then doubling per generation.
  const double per_lane = pcie_generation <= 2 ? 0.5e9 : 0.985e9 * static_cast<double>(1 << (pcie_generation - 3));
  return per_lane * pcie_lanes;
}

std::vector<std::string> known_models() {
  std::vector<std::string> names;
  for (const auto& item : builtin().at("models").items()) names.push_back(item.key());
  return names;
}

DeviceModel load_model(const std::string& name_or_path) {
  const std::string& s = name_or_path;
  if (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0) return from_file(s);
  const std::string name = lower(s);
  if (!builtin().at("models").contains(name)) {
    std::string names;
    for (const auto& n : known_models()) names += (names.empty() ? "" : ", ") + n;
    TINY_THROW(ValueError, kEmulatedGpuModelVariable, "=\"", s, "\" is not a GPU the emulator can model: use one of ",
               names, " (any case), or the path of a model file ending in .json");
  }
  return parse(builtin(), name, "gpu_models.json");
}

const DeviceModel& selected_model() {
  static const DeviceModel model = [] {
    const char* env = std::getenv(kEmulatedGpuModelVariable);
    return load_model(env != nullptr && env[0] != '\0' ? env : kDefaultGpuModel);
  }();
  return model;
}

}  // namespace tiny::gpu::model
