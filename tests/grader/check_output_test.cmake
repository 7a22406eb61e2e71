# What `check` and `grade` print off a terminal and under NO_COLOR (a pipe, a
# log): the progress lines ("building lesson 2 with your exercise.cpp ...",
# "checking lesson 2 ..."; progress is not colour), and, once per rebuild, the
# compiler's warnings about the student's own exercise.cpp: lesson 2 promises
# the [[nodiscard]] warning for a bare `t.to(device);`.
# Run by CTest as: cmake -DGRADER=... -DRECIPE=... -DSOURCE=... -DWORK=... -P check_output_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
set(lesson 2_moving_tensors)
workbook_temp_tree(${WORK} ${lesson})
set(find "for (const tiny::Tensor& t : tensors) moved.push_back(t.to(device));")
set(bare "for (const tiny::Tensor& t : tensors) {\n    t.to(device);  // a bare call: the copy is thrown away\n    moved.push_back(t.to(device));\n  }")
solution_with(${lesson} "${find}" "${bare}" ${WORK}/lessons/${lesson}/exercise.cpp)

function(run_grader)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env NO_COLOR=1 ${GRADER} --recipe ${WORK}/recipe.json ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(rc "${rc}" PARENT_SCOPE)
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()

# check, rebuilding: the warning about the student's line, nothing about the workbook's headers.
run_grader(check 2)
set(all "exit status ${rc}\nstdout:\n${out}\nstderr:\n${err}")
expect_in("check 2" "${all}" "exit status 0")
expect_in("check 2's stderr" "${err}" "building lesson 2 with your exercise.cpp ...")
expect_in("check 2's output" "${out}" "the compiler warns about your code:")
# The file as the student knows it: relative to the folder they work in (here: CTest's).
file(RELATIVE_PATH shown ${CMAKE_CURRENT_BINARY_DIR} ${WORK}/lessons/${lesson}/exercise.cpp)
expect_in("check 2's output" "${out}" "\n    ${shown}:")
expect_in("check 2's output" "${out}" "warning: ignoring return value")
expect_in("check 2's output" "${out}" "t.to(device);  // a bare call")
expect_not_in("check 2's output" "${out}" "tensor.h")
expect_not_in("check 2's output" "${out}" "In file included from")
string(FIND "${out}" "the compiler warns about your code:" warned)
string(FIND "${out}" "lesson 2 (2_moving_tensors), seed" checks_start)
if(warned GREATER checks_start)
  message(FATAL_ERROR "the warnings must come before the checks' lines:\n${out}")
endif()

# check again without a change: no rebuild, so neither the progress line nor the warnings again.
run_grader(check 2)
expect_in("check 2 (again)" "exit status ${rc}" "exit status 0")
expect_not_in("check 2 (again), stdout" "${out}" "the compiler warns")
expect_not_in("check 2 (again), stderr" "${err}" "building lesson 2")

# grade of a submission, piped, under NO_COLOR: its progress lines still show.
file(COPY ${WORK}/lessons/${lesson}/exercise.cpp DESTINATION ${WORK}/submission/${lesson})
run_grader(grade 2 --submission ${WORK}/submission --no-timing)
expect_in("grade 2 --submission" "exit status ${rc}" "exit status 0")
expect_in("grade 2 --submission, stderr" "${err}" "checking lesson 2 (Moving tensors)...")
expect_in("grade 2 --submission, stderr" "${err}" "building lesson 2 with ${WORK}/submission/${lesson}/exercise.cpp ...")
string(ASCII 27 escape)
expect_not_in("grade 2 --submission, stdout" "${out}${err}" "${escape}[")
file(REMOVE_RECURSE ${WORK})
