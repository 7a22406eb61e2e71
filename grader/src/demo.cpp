#include "demo.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "harness/output_of.h"
#include "tiny/error.h"

namespace workbook {

int run_demo(const Recipe& recipe, int number, const std::vector<std::string>& args) {
  const Lesson& l = recipe.lesson(number);
  TINY_CHECK(!l.demo_target.empty() && !l.demo.empty(), IOError, "the grader's recipe names no demo of lesson ",
             number, " (it was written before `run` read it): configure again with ./workbook --reconfigure run ",
             number);
  std::fprintf(stderr, "workbook: building lesson %d's demo with your lessons/%s/exercise.cpp\n", number,
               l.folder.c_str());
  std::fflush(stderr);
  // The same build as ./workbook's own (its preset's folder is the recipe's build_dir); the compiler's
  // messages are shown only when the demo does not build, as the checks show them.
  const ProgramOutput build =
      output_of({recipe.cmake, "--build", recipe.build_dir.string(), "--target", l.demo_target});
  if (!build.ok()) {
    std::fprintf(stderr, "%s", build.out.c_str());
    std::fprintf(stderr, "workbook: lesson %d's demo does not build (%s --build %s --target %s%s): the compiler's "
                 "messages are above\n", number, recipe.cmake.c_str(), recipe.build_dir.c_str(), l.demo_target.c_str(),
                 build.started ? "" : " could not start");
    return 1;
  }
  std::vector<std::string> words{l.demo.string()};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execv(argv[0], argv.data());
  TINY_THROW(IOError, "cannot run lesson ", number, "'s demo ", l.demo.string(), ": ", std::strerror(errno),
             " (build its target ", l.demo_target, " again: ./workbook run ", number, ")");
}

}  // namespace workbook
