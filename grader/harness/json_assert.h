// Force-included before every file of the grader, the checkers and the
// runners (grader/CMakeLists.txt), ahead of <nlohmann/json.hpp>.
//
// nlohmann::json guards its unchecked accesses with JSON_ASSERT: a const
// operator[] on a key that is not there asserts, which aborts the checker in a
// debug build and, with NDEBUG, reads past the end of the object (undefined
// behaviour). A checker reads what a student's run sent, which the student's
// code can forge; here such an access throws instead, and the check reports an
// error (no marks) rather than crashing or reading garbage.
#pragma once

namespace workbook {
/// Throws std::out_of_range naming the failed condition (harness/bundle.cpp);
/// out of line, so that nlohmann's noexcept functions compile without warnings
/// (there, as before, a failure ends the program).
[[noreturn]] void json_assert_failed(const char* condition);
}  // namespace workbook

#define JSON_ASSERT(condition) \
  ((condition) ? static_cast<void>(0) : ::workbook::json_assert_failed(#condition))
