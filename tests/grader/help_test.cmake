# `./workbook check --help` (and every other subcommand's --help) prints that
# subcommand's help and exits 0, also after a lesson number or without a recipe.
# Run by CTest as: cmake -DGRADER=... -P help_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
foreach(args "check;--help" "check;3;--help" "check;-h" "hint;--help" "hint;3;--help" "reset;--help" "solution;--help" "run;--help" "run;-h"
             "grade;--help" "next;--help" "watch;--help" "list;--help" "build;--help" "stubs;--help"
             "--recipe;/nonexistent/recipe.json;check;--help")
  set(words ${args})
  list(FILTER words EXCLUDE REGEX "recipe")
  list(GET words 0 sub)
  execute_process(COMMAND ${GRADER} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " shown "${args}")
  set(all "exit status ${rc}\nstdout:\n${out}\nstderr:\n${err}")
  expect_in("workbook-grader ${shown}" "${all}" "exit status 0")
  expect_in("workbook-grader ${shown}" "${out}" "Usage: ./workbook ${sub} [OPTIONS]")
endforeach()
