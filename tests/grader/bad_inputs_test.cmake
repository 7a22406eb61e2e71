# Bad inputs stop only what they belong to (issue 19), end to end on a
# student's tree of its own: a damaged lesson.json fails its lesson alone
# (`list`, `hint` and `grade` of the others still work), an exercise.cpp that
# is a folder or a FIFO fails its lesson with what it is (it used to stop the
# whole grade with a raw "filesystem error" and a "Well done" over zero
# checks), and two resets within one second keep both backups.
# Run by CTest as: cmake -DGRADER=... -DRECIPE=... -DSOURCE=... -DWORK=... -P bad_inputs_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
workbook_temp_tree(${WORK} 1_device_check 2_moving_tensors)

function(run_grader)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env NO_COLOR=1 ${GRADER} --recipe ${WORK}/recipe.json ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(rc "${rc}" PARENT_SCOPE)
  set(all "exit status ${rc}\nstdout:\n${out}\nstderr:\n${err}" PARENT_SCOPE)
endfunction()

# Lesson 2's lesson.json is damaged: its title is a number.
set(meta ${WORK}/lessons/2_moving_tensors/lesson.json)
file(WRITE ${meta} "{\"title\": 42, \"minutes\": 30}\n")
set(damaged "${meta}: 'title' must be a string, got 42")
run_grader(list)
expect_in("list" "${all}" "exit status 0")
expect_in("list" "${all}" "Device check")
expect_in("list" "${all}" "lesson.json damaged: ${damaged}")
run_grader(hint 1)
expect_in("hint 1" "${all}" "exit status 0")
expect_in("hint 1" "${all}" "lesson 1, hint 1 of")
run_grader(hint 2)
expect_not_in("hint 2" "${all}" "exit status 0")
expect_in("hint 2" "${all}" "lesson 2's hints cannot be read: ${damaged}")

# Lesson 1's exercise.cpp is a folder; grading both lessons fails each for its own reason.
file(MAKE_DIRECTORY ${WORK}/lessons/1_device_check/exercise.cpp)
run_grader(grade --no-timing)
expect_in("grade" "${all}" "exit status 0")
expect_in("grade" "${all}" "${WORK}/lessons/1_device_check/exercise.cpp is a folder, not a file of C++ source")
expect_in("grade" "${all}" "not submitted")
expect_not_in("grade" "${all}" "filesystem error")
expect_not_in("grade" "${all}" "Well done")
run_grader(grade 2 --no-timing)
expect_in("grade 2" "${all}" "exit status 0")
expect_in("grade 2" "${all}" "lesson 2: error")
expect_in("grade 2" "${all}" "${damaged}")
expect_not_in("grade 2" "${all}" "Well done")

# A submission whose exercise.cpp is a FIFO (reading it would wait for a writer forever).
file(MAKE_DIRECTORY ${WORK}/submission/1_device_check)
execute_process(COMMAND mkfifo ${WORK}/submission/1_device_check/exercise.cpp RESULT_VARIABLE made)
if(made EQUAL 0)
  run_grader(grade 1 --submission ${WORK}/submission --no-timing)
  expect_in("grade 1 --submission (a FIFO)" "${all}" "exit status 0")
  expect_in("grade 1 --submission (a FIFO)" "${all}" "exercise.cpp is a FIFO (a named pipe), not a file of C++ source")
  expect_not_in("grade 1 --submission (a FIFO)" "${all}" "Well done")
endif()

# Two resets within a second: backups of this second and the next few are
# there already (a reset a moment ago), and every one is kept.
file(REMOVE_RECURSE ${WORK}/lessons/1_device_check/exercise.cpp)
file(MAKE_DIRECTORY ${WORK}/solutions/1_device_check)
file(COPY ${SOURCE}/solutions/1_device_check/exercise.cpp DESTINATION ${WORK}/solutions/1_device_check)
set(file ${WORK}/lessons/1_device_check/exercise.cpp)
string(TIMESTAMP now "%s")
foreach(ahead RANGE 0 5)
  math(EXPR then "${now} + ${ahead}")
  # %s back into local time, as the grader names backups.
  execute_process(COMMAND date -d @${then} +%Y%m%d-%H%M%S OUTPUT_VARIABLE stamp OUTPUT_STRIP_TRAILING_WHITESPACE)
  file(WRITE ${file}.${stamp}.bak "// an older backup\n")
endforeach()
file(WRITE ${file} "// mine, first\n")
run_grader(reset 1)
expect_in("reset 1" "${all}" "exit status 0")
expect_in("reset 1" "${all}" "your version is kept as lessons/1_device_check/exercise.cpp.")
# The name the top README and ./workbook --help promise: exercise.cpp.<date>-<time>.bak.
if(NOT all MATCHES "exercise\\.cpp\\.[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]-[0-9][0-9][0-9][0-9][0-9][0-9](\\.[0-9]+)?\\.bak")
  message(FATAL_ERROR "reset 1 did not name its backup exercise.cpp.<date>-<time>.bak:\n${all}")
endif()
foreach(doc README.md workbook)
  file(READ ${SOURCE}/${doc} text)
  string(FIND "${text}" "exercise.cpp.<date>-<time>.bak" at)
  if(at LESS 0)
    message(FATAL_ERROR "${doc} does not name reset's backup as exercise.cpp.<date>-<time>.bak")
  endif()
endforeach()
file(WRITE ${file} "// mine, second\n")
run_grader(reset 1)
expect_in("reset 1 (again)" "${all}" "exit status 0")
file(GLOB backups ${file}.*.bak)
set(contents "")
foreach(backup ${backups})
  file(READ ${backup} text)
  string(APPEND contents "${text}")
endforeach()
expect_in("the backups" "${contents}" "// mine, first")
expect_in("the backups" "${contents}" "// mine, second")
string(REGEX MATCHALL "an older backup" older "${contents}")
list(LENGTH older kept)
if(NOT kept EQUAL 6)
  message(FATAL_ERROR "a reset overwrote an older backup (${kept} of 6 kept):\n${contents}")
endif()
file(REMOVE_RECURSE ${WORK})
