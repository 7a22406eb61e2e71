// What a collective costs (docs/performance_model.md, "Collectives and DDP"):
// the alpha-beta ring model of NCCL's own tuning (src/graph/tuning.cc: a
// latency per ring step plus the bytes each rank sends over the bus
// bandwidth) for collectives on GPU tensors, and the same ring through host
// memory and loopback TCP for Gloo on CPU tensors.
//
// With S the bytes of the collective's buffer as nccl-tests counts them (the
// tensor of an all-reduce or a broadcast; the whole, n-rank buffer of an
// all-gather's output or a reduce-scatter's input) and n ranks:
//
//   all_reduce      steps 2(n-1)   traffic S x 2(n-1)/n
//   reduce_scatter  steps  (n-1)   traffic S x (n-1)/n
//   all_gather      steps  (n-1)   traffic S x (n-1)/n
//   broadcast       steps  (n-1)   traffic S            (a pipelined chain)
//
//   NCCL: time = base + steps x step(link) + traffic / (efficiency x link bandwidth)
//   Gloo: time = steps x gloo_step + traffic / gloo_bandwidth
//
// traffic / time is what nccl-tests calls the bus bandwidth (busBw = algBw x
// 2(n-1)/n for an all-reduce): the model reaches efficiency x link on large
// buffers, whatever n. The link is NVLink where the modelled GPU has it, else
// PCIe. One rank costs nothing (NCCL returns at once).
#pragma once

#include <cstdint>

#include "gpu/model/device_model.h"

namespace tiny::gpu::model {

enum class Collective : uint8_t { all_reduce, broadcast, all_gather, reduce_scatter };

// "all_reduce", ... (the profiler names its slices "ncclAllReduce" etc.: nccl_kernel_name).
const char* collective_name(Collective c);
// The name of the kernel NCCL launches for `c`, as Kineto's traces show it ("ncclDevKernel_AllReduce_Sum_f32_RING_LL" shortened).
const char* nccl_kernel_name(Collective c);

// Ring steps and bytes each rank sends for `bytes` (nccl-tests' size) over `ranks`.
int64_t ring_steps(Collective c, int ranks);
double ring_traffic(Collective c, int ranks, int64_t bytes);

// The link NCCL would use between two of the modelled GPUs: "NVLink" or "PCIe".
const char* collective_link(const DeviceModel& model);
// Its bandwidth per direction in bytes/s (the raw link, before efficiency).
double collective_link_bandwidth(const DeviceModel& model);

// How long `c` on `bytes` over `ranks` GPUs takes with NCCL's ring, in nanoseconds.
int64_t nccl_collective_ns(const DeviceModel& model, Collective c, int ranks, int64_t bytes);
// How long the same collective takes with Gloo on host memory, in nanoseconds.
int64_t gloo_collective_ns(const DeviceModel& model, Collective c, int ranks, int64_t bytes);

}  // namespace tiny::gpu::model
