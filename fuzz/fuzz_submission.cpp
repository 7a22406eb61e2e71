// libFuzzer target for what grade --submission/--batch reads of a submission folder (layout, quiz.txt, results.json).
// A tiny::Error or other std::exception is the reader rejecting the input; anything else is a bug.
#include <exception>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tiny_fuzz::submission(data, size);
  } catch (const std::exception&) {
  }
  return 0;
}
