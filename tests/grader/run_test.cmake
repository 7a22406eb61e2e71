# `./workbook run N` (issue 22 item 5): the grader is the one owner of "which
# program is lesson N's demo". It builds the recipe's demo_target with the
# recipe's cmake and runs the recipe's demo with every word after N, --help
# included; a demo that does not build shows the build's messages; a lesson
# that does not exist, or no number, gets one plain message. A recipe whose
# demo_target and cmake are stand-ins proves the grader reads them (a grader
# that built lesson_1_demo, or ran cmake from PATH, would fail here).
# Run by CTest as: cmake -DGRADER=... -DRECIPE=... -DSOURCE=... -DWORK=... -P run_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
workbook_temp_tree(${WORK} 1_device_check)

# The stand-ins: a cmake that logs its arguments (and fails when FAIL_BUILD is there), a demo that logs its own.
file(WRITE ${WORK}/fake-cmake "#!/bin/sh\nprintf '%s\\n' \"$@\" > '${WORK}/cmake-args'\n"
           "if [ -e '${WORK}/FAIL_BUILD' ]; then echo 'exercise.cpp:3: error: boom'; exit 1; fi\n")
file(WRITE ${WORK}/fake-demo "#!/bin/sh\nprintf '%s\\n' \"$@\" > '${WORK}/demo-args'\necho 'the demo ran'\nexit 7\n")
file(CHMOD ${WORK}/fake-cmake ${WORK}/fake-demo PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
file(READ ${WORK}/recipe.json recipe)
string(JSON recipe SET "${recipe}" cmake "\"${WORK}/fake-cmake\"")
string(JSON recipe SET "${recipe}" lessons 0 demo_target "\"wb_test_not_the_usual_demo\"")
string(JSON recipe SET "${recipe}" lessons 0 demo "\"${WORK}/fake-demo\"")
file(WRITE ${WORK}/recipe.json "${recipe}")

function(run_grader)
  file(REMOVE ${WORK}/cmake-args ${WORK}/demo-args)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env NO_COLOR=1 ${GRADER} --recipe ${WORK}/recipe.json ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(all "exit status ${rc}\nstdout:\n${out}\nstderr:\n${err}" PARENT_SCOPE)
endfunction()

# The recipe's target is built, in the recipe's build folder, and the recipe's demo gets every word after N.
run_grader(run 1 --help --epochs 2)
expect_in("run 1" "${all}" "exit status 7")
expect_in("run 1" "${all}" "the demo ran")
expect_in("run 1" "${all}" "building lesson 1's demo with your lessons/1_device_check/exercise.cpp")
file(READ ${WORK}/cmake-args cmake_args)
expect_in("the cmake run 1 ran" "${cmake_args}" "--build\n${WORK}/build\n--target\nwb_test_not_the_usual_demo\n")
file(READ ${WORK}/demo-args demo_args)
if(NOT demo_args STREQUAL "--help\n--epochs\n2\n")
  message(FATAL_ERROR "the demo got other arguments than those after `run 1`:\n${demo_args}")
endif()

# A demo that does not build: the build's messages, a sentence naming the target, exit 1, and no run.
file(WRITE ${WORK}/FAIL_BUILD "")
run_grader(run 1)
expect_in("run 1, not building" "${all}" "exit status 1")
expect_in("run 1, not building" "${all}" "exercise.cpp:3: error: boom")
expect_in("run 1, not building" "${all}" "lesson 1's demo does not build")
expect_in("run 1, not building" "${all}" "--target wb_test_not_the_usual_demo")
expect_not_in("run 1, not building" "${all}" "the demo ran")
file(REMOVE ${WORK}/FAIL_BUILD)

# Lesson numbers are the grader's: one message naming the lessons there are, before anything is built.
run_grader(run 99)
expect_in("run 99" "${all}" "exit status 2")
expect_in("run 99" "${all}" "there is no lesson 99: the lessons are 1")
if(EXISTS ${WORK}/cmake-args)
  message(FATAL_ERROR "run 99 built something:\n${all}")
endif()
run_grader(hint 99)
expect_in("hint 99" "${all}" "there is no lesson 99: the lessons are 1")
run_grader(run abc)
expect_in("run abc" "${all}" "exit status 2")
expect_in("run abc" "${all}" "'abc' is not a lesson number")
run_grader(run)
expect_in("run" "${all}" "exit status 2")
expect_in("run" "${all}" "'run' needs a lesson number, e.g. ./workbook run 1")
message(STATUS "ok: run builds the recipe's demo_target and runs its demo; lesson numbers checked by the grader")
