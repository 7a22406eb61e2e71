// libFuzzer target for safetensors checkpoints: parse_safetensors from memory, then tiny::load through a memfd.
// A tiny::Error or other std::exception is the reader rejecting the input; anything else is a bug.
#include <exception>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tiny_fuzz::safetensors(data, size);
  } catch (const std::exception&) {
  }
  return 0;
}
