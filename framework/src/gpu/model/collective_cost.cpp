#include "gpu/model/collective_cost.h"

#include <cmath>

namespace tiny::gpu::model {

namespace {
int64_t to_ns(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e9)); }
}  // namespace

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::broadcast: return "broadcast";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
  }
  return "?";
}

const char* nccl_kernel_name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "ncclDevKernel_AllReduce_RING";
    case Collective::broadcast: return "ncclDevKernel_Broadcast_RING";
    case Collective::all_gather: return "ncclDevKernel_AllGather_RING";
    case Collective::reduce_scatter: return "ncclDevKernel_ReduceScatter_RING";
  }
  return "ncclDevKernel";
}

int64_t ring_steps(Collective c, int ranks) {
  if (ranks <= 1) return 0;
  return c == Collective::all_reduce ? 2 * (ranks - 1) : ranks - 1;
}

double ring_traffic(Collective c, int ranks, int64_t bytes) {
  if (ranks <= 1) return 0;
  const double s = static_cast<double>(bytes), n = ranks;
  switch (c) {
    case Collective::all_reduce: return s * 2.0 * (n - 1) / n;
    case Collective::broadcast: return s;
    case Collective::all_gather:
    case Collective::reduce_scatter: return s * (n - 1) / n;
  }
  return s;
}

const char* collective_link(const DeviceModel& m) { return m.nvlink_bandwidth > 0 ? "NVLink" : "PCIe"; }

double collective_link_bandwidth(const DeviceModel& m) {
  return m.nvlink_bandwidth > 0 ? m.nvlink_bandwidth : m.pcie_bandwidth();
}

int64_t nccl_collective_ns(const DeviceModel& m, Collective c, int ranks, int64_t bytes) {
  if (ranks <= 1) return 0;
  const CollectiveParams& p = m.collective;
  const int64_t step = m.nvlink_bandwidth > 0 ? p.nccl_step_nvlink_ns : p.nccl_step_pcie_ns;
  const double bus = p.nccl_bus_efficiency * collective_link_bandwidth(m);
  return p.nccl_base_ns + ring_steps(c, ranks) * step + to_ns(ring_traffic(c, ranks, bytes) / bus);
}

int64_t gloo_collective_ns(const DeviceModel& m, Collective c, int ranks, int64_t bytes) {
  if (ranks <= 1) return 0;
  const CollectiveParams& p = m.collective;
  return ring_steps(c, ranks) * p.gloo_step_ns + to_ns(ring_traffic(c, ranks, bytes) / p.gloo_bandwidth);
}

}  // namespace tiny::gpu::model
