// The lesson stubs are generated from the reference solutions: each marked
// region of solutions/N_name/exercise.cpp,
//     // BEGIN SOLUTION: what to do
//     ...
//     // END SOLUTION
// becomes one line, TINY_TODO("lesson N: what to do");, at the same indent.
#pragma once

#include <string>

namespace workbook {

// The stub for the solution text of lesson `number`. Throws tiny::ValueError
// (naming `origin` and the line) for an unclosed, nested or unlabelled region.
std::string make_stub(const std::string& solution, int number, const std::string& origin);

}  // namespace workbook
