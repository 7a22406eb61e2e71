// Loads libnccl with dlopen and resolves the entry points of NcclLibrary.
// Where it looks: TINY_NCCL_LIBRARY when set (only there), else
// "libnccl.so.2" through the dynamic loader's path, then the file beside
// libcudart (the CUDA toolkit's lib folder, where CUDA 13 ships NCCL).
#include "distributed/nccl/library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>
#include <vector>

#include "distributed/nccl.h"
#include "gpu/cuda/cuda_runtime.h"
#include "tiny/error.h"

namespace tiny::distributed::detail {
namespace {

constexpr const char* kSoname = "libnccl.so.2";

// Opens the first of `candidates` that loads and resolves every entry point.
NcclLibrary load(const std::vector<std::string>& candidates, bool from_variable) {
  void* handle = nullptr;
  std::string tried, path;
  for (const std::string& name : candidates) {
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      path = name;
      break;
    }
    const char* e = dlerror();
    tried += "\n  " + (e ? std::string(e) : name + ": not found");  // dlerror names the file
  }
  TINY_CHECK(handle != nullptr, distributed::DistributedError, "backend \"nccl\" needs the NCCL library (",
             from_variable ? candidates.front() + ", from " + kNcclLibraryVariable : std::string(kSoname),
             "), which could not be loaded:", tried,
             from_variable ? std::string("\nFix ") + kNcclLibraryVariable + " (or unset it to use " + kSoname + ")"
                           : std::string("\nInstall NCCL (it ships with the CUDA 13 toolkit; Debian/Ubuntu: "
                                         "libnccl2) or add its folder to LD_LIBRARY_PATH"),
             ", or use backend \"gloo\".");
  NcclLibrary lib;
  lib.path = path;
  auto resolve = [&](auto& fn, const char* symbol, bool required = true) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, symbol));
    TINY_CHECK(fn != nullptr || !required, distributed::DistributedError, "the NCCL library ", path, " has no ",
               symbol, ": it is too old or not NCCL; install NCCL 2.10 or newer, or use backend \"gloo\".");
  };
  resolve(lib.get_version, "ncclGetVersion");
  resolve(lib.get_unique_id, "ncclGetUniqueId");
  resolve(lib.comm_init_rank, "ncclCommInitRank");
  resolve(lib.comm_abort, "ncclCommAbort");
  resolve(lib.comm_get_async_error, "ncclCommGetAsyncError");
  resolve(lib.get_error_string, "ncclGetErrorString");
  resolve(lib.get_last_error, "ncclGetLastError", /*required=*/false);
  resolve(lib.all_reduce, "ncclAllReduce");
  resolve(lib.broadcast, "ncclBroadcast");
  resolve(lib.all_gather, "ncclAllGather");
  resolve(lib.reduce_scatter, "ncclReduceScatter");
  int code = 0;
  TINY_CHECK(lib.get_version(&code) == ncclSuccess, distributed::DistributedError, "ncclGetVersion failed in ",
             path);
  // Since 2.9 the code is major * 10000 + minor * 100 + patch (before: major * 1000 + minor * 100 + patch).
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  lib.version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
  // ncclAvg and ncclBfloat16 came with 2.10.
  TINY_CHECK(major > 2 || (major == 2 && minor >= 10), distributed::DistributedError, "the NCCL library ", path,
             " is version ", lib.version, "; tiny needs NCCL 2.10 or newer (ReduceOp::AVG, bfloat16)");
  return lib;
}

}  // namespace

const NcclLibrary& nccl() {
  static const NcclLibrary lib = [] {
    const char* chosen = std::getenv(kNcclLibraryVariable);
    if (chosen != nullptr && *chosen != '\0') return load({chosen}, true);
    std::vector<std::string> candidates{kSoname};
    const std::string beside = gpu::cudart_directory();
    if (!beside.empty()) candidates.push_back(beside + kSoname);
    return load(candidates, false);
  }();
  return lib;
}

std::string nccl_error_message(ncclResult_t result, const std::string& call, ncclComm_t comm) {
  const NcclLibrary& lib = nccl();
  std::string message = std::string("NCCL error: ") + lib.get_error_string(result) + " (" + call + ")";
  if (lib.get_last_error != nullptr) {  // the calling thread's last error when comm is null
    const char* last = lib.get_last_error(comm);
    if (last != nullptr && *last != '\0') message += ": " + std::string(last);
  }
  return message;
}

bool nccl_built() { return true; }

std::string nccl_version() { return nccl().version; }

std::string nccl_try_load(const std::string& library) { return load({library}, true).version; }

std::vector<char> nccl_unique_id() {
  ncclUniqueId id;
  const ncclResult_t result = nccl().get_unique_id(&id);
  TINY_CHECK(result == ncclSuccess, distributed::DistributedError, "init_process_group: ",
             nccl_error_message(result, "ncclGetUniqueId", nullptr));
  return std::vector<char>(id.internal, id.internal + sizeof id.internal);
}

}  // namespace tiny::distributed::detail
