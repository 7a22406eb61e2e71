// The stub generator: the lessons' exercise.cpp files are made from the solutions by it.
#include <gtest/gtest.h>

#include "stubs.h"
#include "tiny/error.h"

namespace {

TEST(Stubs, EachRegionBecomesOneTodoAtItsIndent) {
  const std::string solution =
      "int f(int x) {\n"
      "  // BEGIN SOLUTION: return x \"doubled\" \\ twice\n"
      "  return 2 * x;\n"
      "  // END SOLUTION\n"
      "}\n"
      "int g() {\n"
      "    // BEGIN SOLUTION: return 1\n"
      "    return 1;\n"
      "    // END SOLUTION\n"
      "}\n";
  EXPECT_EQ(workbook::make_stub(solution, 7, "s.cpp"),
            "int f(int x) {\n"
            "  TINY_TODO(\"lesson 7: return x \\\"doubled\\\" \\\\ twice\");\n"
            "}\n"
            "int g() {\n"
            "    TINY_TODO(\"lesson 7: return 1\");\n"
            "}\n");
}

TEST(Stubs, TextWithoutRegionsIsUnchanged) {
  const std::string text = "// a comment\nint x = 1;\n";
  EXPECT_EQ(workbook::make_stub(text, 1, "s.cpp"), text);
}

TEST(Stubs, MalformedRegionsNameTheFileAndLine) {
  auto message = [](const std::string& text) {
    try {
      workbook::make_stub(text, 1, "sol.cpp");
    } catch (const tiny::ValueError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("a\n// BEGIN SOLUTION: x\nb\n").find("sol.cpp:2: the region opened here has no // END SOLUTION"),
            std::string::npos);
  EXPECT_NE(message("// BEGIN SOLUTION: x\n// BEGIN SOLUTION: y\n").find("sol.cpp:2: BEGIN SOLUTION inside"),
            std::string::npos);
  EXPECT_NE(message("// END SOLUTION\n").find("sol.cpp:1: END SOLUTION without"), std::string::npos);
  EXPECT_NE(message("// BEGIN SOLUTION\n// END SOLUTION\n").find("sol.cpp:1: write what the student must do"),
            std::string::npos);
}

}  // namespace
