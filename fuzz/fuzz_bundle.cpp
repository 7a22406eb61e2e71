// libFuzzer target for the runner/checker exchange: workbook::Bundle::load (values.json + .npy files).
// A tiny::Error or other std::exception is the reader rejecting the input; anything else is a bug.
#include <exception>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tiny_fuzz::bundle(data, size);
  } catch (const std::exception&) {
  }
  return 0;
}
