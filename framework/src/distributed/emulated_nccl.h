// NCCL on the emulated GPU (DESIGN.md section 4a, "Several processes"): the
// collectives of tiny::distributed on emulated GPU tensors are timed as
// NCCL's ring on the device's collective engine (gpu/model/collective_cost.h)
// while Gloo moves their bytes, so that DDP's all-reduces overlap backward in
// modelled time as they do on real GPUs.
//
// Each rank is a process with its own emulator. A collective issued on a
// stream is ready, on this rank, after the stream's previous work and the
// host's issue; the ranks agree on the latest ready time (one int64 over
// Gloo, in the order of the collectives), and each places the collective on
// its collective engine from there for the modelled cost. Every rank issues
// the same collectives in the same order, so every rank gets the same start
// and end, whatever the real speed of its host or the execution mode.
//
// The bytes: a work item on the stream copies the tensor into a host buffer
// (through the worker's view of device memory), lets the process group's
// communication thread run the Gloo collective on it, and copies the result
// back, so later work on that stream sees it, as NCCL's would.
#pragma once

#include <memory>

#include "distributed/nccl.h"

namespace tiny::distributed::detail {

class ProcessGroup;

/// The NCCL-like collectives of `group` on emulated GPU `device`.
std::unique_ptr<NcclGroup> make_emulated_nccl(ProcessGroup& group, int device);

/// The GPU collectives for `tensor`: the real NCCL communicator (backend
/// "nccl"), the emulated one for a tensor on an emulated GPU, else nullptr
/// (the tensor is staged through host memory for Gloo).
NcclGroup* gpu_collectives(ProcessGroup& group, const Tensor& tensor);

}  // namespace tiny::distributed::detail
