// The NCCL side of tiny::distributed in builds without the CUDA toolkit or
// without nccl.h: every call says so. With them, the real definitions live in
// distributed/nccl/ (the `tiny_cuda` library) and this file compiles to nothing.
#include "distributed/nccl.h"
#include "tiny/error.h"

#if !defined(TINY_HAVE_NCCL) || !TINY_HAVE_NCCL

namespace tiny::distributed::detail {
namespace {

[[noreturn]] void not_built() {
  TINY_THROW(distributed::DistributedError, "backend \"nccl\" is not in this build of tiny: it was built ",
             "without the CUDA toolkit's nccl.h; rebuild on a machine with the CUDA toolkit and NCCL, or use backend \"gloo\"");
}

}  // namespace

bool nccl_built() { return false; }
std::string nccl_version() { not_built(); }
std::string nccl_try_load(const std::string&) { not_built(); }
std::vector<char> nccl_unique_id() { not_built(); }
std::unique_ptr<NcclGroup> nccl_create_group(const std::vector<char>&, const NcclSetup&) { not_built(); }

}  // namespace tiny::distributed::detail

#endif
