# Issue 20 items 2 and 5: a grade's files are written after each lesson, so a
# grade killed in the middle of a submission keeps what it had graded. A
# submission of lessons 1 and 2 (lesson 1 the reference, lesson 2 hanging in
# its first check) is killed (SIGTERM) while lesson 2 runs, once through
# Gradescope's route (--submission --json) and once in a --batch: results.json
# (valid, the submission layout first, lesson 1's checks passed, nothing of
# lesson 2), the batch's report.html, junit.xml and scoreboard.txt all keep
# lesson 1; the gradebook has no row for a submission not finished, and
# --resume then grades it whole.
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DRECIPE=... -DWORK=... -P killed_test.cmake
cmake_minimum_required(VERSION 3.19)
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)
file(REMOVE_RECURSE ${WORK})
workbook_temp_tree(${WORK}/tree 1_device_check 2_moving_tensors)
set(recipe ${WORK}/tree/recipe.json)
set(ada ${WORK}/class/ada)
file(COPY ${SOURCE}/solutions/1_device_check/exercise.cpp DESTINATION ${ada}/lessons/1_device_check)
set(first "return tiny::randn(shape, device, generator);")
file(MAKE_DIRECTORY ${ada}/lessons/2_moving_tensors)
solution_with(2_moving_tensors "${first}" "{ volatile bool spin = true; while (spin) {} }\n  ${first}"
              ${ada}/lessons/2_moving_tensors/exercise.cpp)

# kill_when(FILE PATTERN GRADE-ARGS...): runs grade, and SIGTERMs it once FILE holds PATTERN (lesson 1's results);
# sets `killed` to what the shell said (the grader's exit status) and `log` to the grader's output.
function(kill_when file pattern)
  execute_process(COMMAND sh -c [=[
    file=$1 pattern=$2 log=$3
    shift 3
    "$@" > "$log" 2>&1 &
    pid=$!
    for i in $(seq 1500); do
      grep -q "$pattern" "$file" 2>/dev/null && break
      kill -0 $pid 2>/dev/null || break
      sleep 0.2
    done
    kill -TERM $pid
    wait $pid
    echo "exit status $?"]=] sh ${file} ${pattern} ${WORK}/grade.log ${ARGN} OUTPUT_VARIABLE said)
  file(READ ${WORK}/grade.log text)
  set(killed "${said}" PARENT_SCOPE)
  set(log "${text}" PARENT_SCOPE)
endfunction()

# results_hold_lesson_1_only(FILE): FILE is a whole results.json: the layout, then lesson 1's five checks, passed.
function(results_hold_lesson_1_only file)
  file(READ ${file} results)
  string(JSON count ERROR_VARIABLE error LENGTH "${results}" tests)
  if(error)
    message(FATAL_ERROR "${file} is not a whole results.json after the kill (${error}):\n${results}")
  endif()
  string(JSON first GET "${results}" tests 0 name)
  if(NOT first STREQUAL "submission layout" OR NOT count EQUAL 6)
    message(FATAL_ERROR "${file} should hold the layout and lesson 1's 5 checks, graded before the kill:\n${results}")
  endif()
  string(JSON score GET "${results}" score)
  if(NOT score EQUAL 5)
    message(FATAL_ERROR "${file}'s score is ${score}, not lesson 1's 5 points:\n${results}")
  endif()
  expect_not_in(${file} "${results}" "lesson_2")
endfunction()

# ---- Gradescope's route: one submission, --json
kill_when(${WORK}/results.json "lesson_1"
          ${GRADER} --recipe ${recipe} grade --submission ${ada} --json ${WORK}/results.json --seed 7)
message(STATUS "--submission --json, killed during lesson 2: ${killed}\n${log}")
if(NOT killed MATCHES "exit status 143")
  message(FATAL_ERROR "the grade was not stopped by the SIGTERM during lesson 2 (${killed}): lesson 2 should hang")
endif()
results_hold_lesson_1_only(${WORK}/results.json)

# ---- a batch: the submission's own files keep lesson 1, the gradebook has no row yet
kill_when(${WORK}/out/ada/results.json "lesson_1"
          ${GRADER} --recipe ${recipe} grade --batch ${WORK}/class --out ${WORK}/out --seed 7 --jobs 1 --unsafe)
message(STATUS "--batch, killed during lesson 2: ${killed}\n${log}")
if(NOT killed MATCHES "exit status 143")
  message(FATAL_ERROR "the batch was not stopped by the SIGTERM during lesson 2 (${killed}): lesson 2 should hang")
endif()
results_hold_lesson_1_only(${WORK}/out/ada/results.json)
expect(ada/scoreboard.txt "submission layout of ada/: 2 of 2 lessons found")
expect(ada/junit.xml "<testsuite name=\"lesson_1 (Device check)\" tests=\"5\" failures=\"0\"")
expect(ada/report.html "Device check")
file(READ ${WORK}/out/gradebook.csv gradebook)
expect_not_in(gradebook.csv "${gradebook}" "\"ada\"")
if(EXISTS ${WORK}/out/ada/summary.json)
  message(FATAL_ERROR "ada has a summary.json, though its grade was killed before lesson 2 was graded")
endif()

# ---- --resume grades it whole: lesson 1 passed, lesson 2 cut at its first hang
execute_process(COMMAND ${GRADER} --recipe ${recipe} grade --batch ${WORK}/class --out ${WORK}/out --resume --jobs 1
                        --unsafe
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "resumed:\n${out}\n${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the resumed batch failed (${rc})")
endif()
expect_in(stderr "${err}" "0 of 1 submissions are in it already; grading the other 1 with seed 7")
expect(gradebook.csv "\n\"ada\",5,")
expect(gradebook.csv "\"lesson 2 timed out\"")
file(REMOVE_RECURSE ${WORK})
