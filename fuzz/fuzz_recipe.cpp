// libFuzzer target for the grader's recipe.json and a lesson.json: workbook::Recipe::load.
// A tiny::Error or other std::exception is the reader rejecting the input; anything else is a bug.
#include <exception>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tiny_fuzz::recipe(data, size);
  } catch (const std::exception&) {
  }
  return 0;
}
