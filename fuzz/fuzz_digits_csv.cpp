// libFuzzer target for the digits CSV: tiny::data::Digits.
// A tiny::Error or other std::exception is the reader rejecting the input; anything else is a bug.
#include <exception>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tiny_fuzz::digits_csv(data, size);
  } catch (const std::exception&) {
  }
  return 0;
}
