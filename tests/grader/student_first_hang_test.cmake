# Issue 20 item 2: a hang costs the reference's own time x 20 (at least 10 s),
# also in a check that runs the student's code before the reference's. Lesson
# 3's predict check does: an endless loop in predict() cost its lesson the
# check's flat 60 s (63 s measured), as the reference's time was not known yet.
# The grader now runs the reference first: the lesson's checks must take well
# under 45 s in all, and the timeout must name its limit and where it came from.
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DRECIPE=... -DWORK=... -P student_first_hang_test.cmake
cmake_minimum_required(VERSION 3.19)
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
file(REMOVE_RECURSE ${WORK})
set(lesson 3_model_to_gpu)
workbook_temp_tree(${WORK}/tree ${lesson})
set(head "tiny::Tensor predict(tiny::nn::Module& model, const tiny::Tensor& inputs) {")
solution_with(${lesson} "${head}" "${head}\n  { volatile bool spin = true; while (spin) {} }"
              ${WORK}/ada/lessons/${lesson}/exercise.cpp)

execute_process(COMMAND ${GRADER} --recipe ${WORK}/tree/recipe.json grade --submission ${WORK}/ada
                        --junit ${WORK}/junit.xml --json ${WORK}/results.json --seed 7 --no-timing --unsafe
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the grade failed (${rc}):\n${out}\n${err}")
endif()

# The lesson's checks, from the JUnit suite (their own time: the build of the student's file is not counted).
file(READ ${WORK}/junit.xml junit)
if(NOT junit MATCHES "<testsuite name=\"lesson_3 [^>]*time=\"([0-9.]+)\">(.*)</testsuite>")
  message(FATAL_ERROR "junit.xml has no suite for lesson 3:\n${junit}")
endif()
set(lesson_seconds ${CMAKE_MATCH_1})
string(REGEX MATCHALL "<testcase [^>]*time=\"[0-9.]+\"" cases "${CMAKE_MATCH_2}")
set(checks_ms 0)
foreach(c IN LISTS cases)
  string(REGEX REPLACE ".*time=\"([0-9]+)(\\.([0-9]*))?\"" "\\1;\\3" parts "${c}")
  list(GET parts 0 whole)
  list(GET parts 1 fraction)
  string(SUBSTRING "${fraction}000" 0 3 fraction)
  math(EXPR checks_ms "${checks_ms} + ${whole} * 1000 + 1${fraction} - 1000")
endforeach()
list(LENGTH cases count)
message(STATUS "lesson 3 with a hanging predict: ${count} checks in ${checks_ms} ms (${lesson_seconds} s with its build)")
if(NOT count EQUAL 6)
  message(FATAL_ERROR "lesson 3 should have 6 checks in junit.xml, not ${count}:\n${junit}")
endif()
if(checks_ms GREATER_EQUAL 45000)
  message(FATAL_ERROR "lesson 3's checks took ${checks_ms} ms with predict hanging: the hang got the check's own "
                      "limit, not the reference's time x 20:\n${out}")
endif()

file(READ ${WORK}/results.json results)
expect_in(results.json "${results}" "model left in place\\nyour code did not finish within the time limit")
if(NOT results MATCHES "after ([0-9.]+) s \\(its limit: (at least 10 s, the reference needing only [0-9.]+ s|20x the reference's own [0-9.]+ s)\\)")
  message(FATAL_ERROR "the timeout does not name its limit and where it came from (the reference's time):\n${results}")
endif()
# The checks after it fail at once, naming the run that hung.
expect_in(results.json "${results}" "was not run: an earlier run of your code in this lesson did not finish in time "
                                    "(predict in check predict, stopped after")
# The checks before it (the student's code first too) passed: a right answer is unaffected.
expect_in(stdout "${out}" "PASS  normalizer_buffers")
expect_in(stdout "${out}" "PASS  positional_offset")
file(REMOVE_RECURSE ${WORK})
