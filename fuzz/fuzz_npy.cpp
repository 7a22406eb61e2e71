// libFuzzer target for .npy files: parse_npy from memory, then tiny::io::load_npy through a memfd.
// A tiny::Error or other std::exception is the reader rejecting the input; anything else is a bug.
#include <exception>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tiny_fuzz::npy(data, size);
  } catch (const std::exception&) {
  }
  return 0;
}
