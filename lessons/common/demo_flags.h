// The checks the lesson demos (lessons/N_name/main.cpp) put on their flags,
// written once for every demo: `->check(at_least(1))`, `->check(positive())`.
// Only the demos include it; your exercise.cpp never needs it.
#pragma once

#include <cstdlib>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>

// More than 0, for a real number (CLI11's PositiveNumber prints the largest double in its message).
inline CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& text) {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        return end != text.c_str() && *end == '\0' && v > 0 ? std::string() : "must be more than 0, got " + text;
      },
      "POSITIVE");
}

// At least `low`: CLI11's check, whose message names the option and the value given.
template <typename T>
CLI::Range at_least(T low) {
  return CLI::Range(low, std::numeric_limits<T>::max());
}
