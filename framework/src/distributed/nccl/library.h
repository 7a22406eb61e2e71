// The NCCL entry points tiny uses, resolved from libnccl with dlopen on first
// use (see distributed/nccl.h for why it is not linked).
#pragma once

#include <nccl.h>

#include <string>

namespace tiny::distributed::detail {

struct NcclLibrary {
  std::string path;     // what dlopen was given
  std::string version;  // "2.28.9"
  ncclResult_t (*get_version)(int*) = nullptr;
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*comm_abort)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t*) = nullptr;
  const char* (*get_error_string)(ncclResult_t) = nullptr;
  const char* (*get_last_error)(ncclComm_t) = nullptr;  // NCCL >= 2.13; nullptr before
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t) = nullptr;
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*all_gather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduce_scatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                 cudaStream_t) = nullptr;
};

/// The library, loaded on the first call (throws DistributedError naming it and the fix).
const NcclLibrary& nccl();

/// "NCCL error: <what> (<call>)", with NCCL's last error for `comm` when it has one.
std::string nccl_error_message(ncclResult_t result, const std::string& call, ncclComm_t comm);

}  // namespace tiny::distributed::detail
