// libFuzzer target for a submission that is a .zip or .tar.gz (grader/src/unpack.h: libarchive, with its refusals).
// A tiny::Error or other std::exception is the reader rejecting the input; anything else is a bug.
#include <exception>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tiny_fuzz::archive(data, size);
  } catch (const std::exception&) {
  }
  return 0;
}
