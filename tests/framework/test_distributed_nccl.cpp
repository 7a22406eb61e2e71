// Backend "nccl" where there is no GPU: the refusal that names "gloo", and
// the loader of libnccl (dlopen, never linked), which must name a library it
// cannot load and the fix. tests/gpu/test_nccl.cpp runs the collectives on a GPU.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "distributed/nccl.h"
#include "distributed/ranks.h"
#include "tiny/cuda.h"
#include "tiny/distributed/distributed.h"

namespace {

namespace fs = std::filesystem;
using tiny::distributed::DistributedError;
using tiny::distributed::detail::kNcclLibraryVariable;
using tiny::distributed::detail::nccl_built;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// What nccl_version() throws in a child process whose TINY_NCCL_LIBRARY is `library`
// (the loader caches what it loaded, so each setting needs a fresh process).
std::string version_error_in_child(const std::string& library) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::setenv(kNcclLibraryVariable, library.c_str(), 1);
    std::string message = "no error";
    try {
      message = "loaded version " + tiny::distributed::detail::nccl_version();
    } catch (const DistributedError& e) {
      message = std::string("DistributedError: ") + e.what();
    } catch (const std::exception& e) {
      message = std::string("other exception: ") + e.what();
    }
    ssize_t written = ::write(fds[1], message.data(), message.size());
    ::_exit(written == static_cast<ssize_t>(message.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) out.append(buffer, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child failed: " << out;
  return out;
}

}  // namespace

TEST(DistributedNccl, OnTheEmulatedGpuNamesGlooBeforeAnyRendezvous) {
  ASSERT_TRUE(tiny::cuda::is_available() && tiny::cuda::is_emulated(0)) << "these tests run on the emulated GPU";
  const fs::path dir = dist_test::fresh_dir("nccl_refused");
  try {
    tiny::distributed::init_process_group("nccl", "file://" + dir.string(), 2, 0, std::chrono::seconds(5));
    ADD_FAILURE() << "nccl initialized on the emulated GPU";
  } catch (const DistributedError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "backend \"nccl\" needs real NVIDIA GPUs")) << m;
    EXPECT_TRUE(contains(m, "only the emulated GPU")) << m;
    EXPECT_TRUE(contains(m, "use backend \"gloo\"")) << m;
  }
  EXPECT_FALSE(tiny::distributed::is_initialized());
  // Refused before the rendezvous: rank 0 of 2 did not publish itself and wait for rank 1.
  EXPECT_TRUE(fs::is_empty(dir)) << "the rendezvous directory got keys: the refusal came after the join";
  fs::remove_all(dir);
}

TEST(DistributedNccl, AMissingLibraryIsNamedWithTheFix) {
  if (!nccl_built()) {
    try {
      tiny::distributed::detail::nccl_try_load("libnccl.so.2");
      ADD_FAILURE() << "a build without nccl.h loaded NCCL";
    } catch (const DistributedError& e) {
      EXPECT_TRUE(contains(e.what(), "not in this build")) << e.what();
    }
    return;
  }
  const std::string bogus = "libtiny_no_such_nccl.so.2";
  try {
    tiny::distributed::detail::nccl_try_load(bogus);
    ADD_FAILURE() << bogus << " loaded";
  } catch (const DistributedError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "needs the NCCL library (" + bogus)) << m;
    EXPECT_TRUE(contains(m, "cannot open shared object file")) << "dlopen's reason is missing: " << m;
    EXPECT_TRUE(contains(m, kNcclLibraryVariable)) << m;
    EXPECT_TRUE(contains(m, "\"gloo\"")) << m;
  }
}

TEST(DistributedNccl, ALibraryThatIsNotNcclIsNamed) {
  if (!nccl_built()) GTEST_SKIP() << "this build has no NCCL path (built without the CUDA toolkit's nccl.h)";
  // zlib is loaded in every tiny process (tiny::data reads gzip): it loads, but has no NCCL entry points.
  try {
    tiny::distributed::detail::nccl_try_load("libz.so.1");
    ADD_FAILURE() << "libz.so.1 was taken for NCCL";
  } catch (const DistributedError& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "libz.so.1 has no ncclGetVersion")) << m;
  }
}

TEST(DistributedNccl, TheVariableChoosesTheLibraryAndABadOneIsNamed) {
  if (!nccl_built()) GTEST_SKIP() << "this build has no NCCL path (built without the CUDA toolkit's nccl.h)";
  const std::string m = version_error_in_child("/nonexistent/libnccl_from_variable.so");
  EXPECT_TRUE(contains(m, "DistributedError: ")) << m;
  EXPECT_TRUE(contains(m, "/nonexistent/libnccl_from_variable.so, from TINY_NCCL_LIBRARY")) << m;
  EXPECT_TRUE(contains(m, "Fix TINY_NCCL_LIBRARY")) << m;
}

TEST(DistributedNccl, TheToolkitsLibraryLoadsWithoutAGpu) {
  if (!nccl_built()) GTEST_SKIP() << "this build has no NCCL path (built without the CUDA toolkit's nccl.h)";
  // In a child: a library of 200 MB loaded once stays for the rest of the process.
  const std::string m = version_error_in_child("");
  if (contains(m, "could not be loaded"))
    GTEST_SKIP() << "libnccl.so.2 is not installed here (neither on the loader's path nor beside libcudart): " << m;
  // An empty TINY_NCCL_LIBRARY means unset: libnccl.so.2, then the toolkit's folder.
  EXPECT_TRUE(contains(m, "loaded version 2.")) << m;
}

TEST(DistributedNccl, UniqueIdsAreMadeWithoutAGpu) {
  if (!nccl_built()) GTEST_SKIP() << "this build has no NCCL path (built without the CUDA toolkit's nccl.h)";
  std::vector<char> a, b;
  try {
    a = tiny::distributed::detail::nccl_unique_id();
    b = tiny::distributed::detail::nccl_unique_id();
  } catch (const DistributedError& e) {
    if (contains(e.what(), "could not be loaded")) GTEST_SKIP() << "libnccl.so.2 is not installed here: " << e.what();
    throw;
  }
  // What rank 0 puts in the store: 128 bytes, new each time (the bootstrap address and a random magic).
  EXPECT_EQ(a.size(), 128u);
  EXPECT_EQ(b.size(), 128u);
  EXPECT_NE(a, b);
}
