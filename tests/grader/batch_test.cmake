# An instructor's batch, end to end (label dev): five submissions of lesson 1:
# complete, crashing, hanging, not compiling and missing. The batch must finish,
# grade each one for what it is, and write the gradebook and every results.json.
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DWORK=... -P batch_test.cmake
file(REMOVE_RECURSE ${WORK})
set(lesson 1_device_check)
file(READ ${SOURCE}/solutions/${lesson}/exercise.cpp solution)
set(count_body "return tiny::cuda::is_available() ? tiny::cuda::device_count() : 0;")

function(submission name text)
  file(MAKE_DIRECTORY ${WORK}/batch/${name}/${lesson})
  if(NOT text STREQUAL "")
    file(WRITE ${WORK}/batch/${name}/${lesson}/exercise.cpp "${text}")
  endif()
endfunction()
submission(complete "${solution}")
string(REPLACE "${count_body}" "volatile int* p = nullptr; return *p;" crashing "${solution}")
submission(crashes "${crashing}")
string(REPLACE "${count_body}" "volatile bool spin = true; while (spin) {} return 0;" hanging "${solution}")
submission(hangs "${hanging}")
submission(does_not_compile "int x = ;\n")
submission(missing "")
file(WRITE ${WORK}/batch/complete/quiz.txt "1. the CPU\n")

execute_process(COMMAND ${GRADER} grade 1 --batch ${WORK}/batch --out ${WORK}/out --timeout 2 --no-timing --jobs 2 --unsafe
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the batch failed (${rc}):\n${out}\n${err}")
endif()
file(READ ${WORK}/out/gradebook.csv gradebook)
message(STATUS "gradebook:\n${gradebook}")

include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)
expect_row(gradebook.csv complete 5 5 passed "")
# describe_device does not call count_devices: it still passes.
expect_row(gradebook.csv crashes 1 5 "in progress" "")
# After its first run timed out, the lesson's other checks failed at once.
expect_row(gradebook.csv hangs 0 5 "in progress" "lesson 1 timed out")
expect_row(gradebook.csv does_not_compile 0 5 "does not compile" "lesson 1 does not compile")
expect_row(gradebook.csv missing 0 5 "not submitted" "lesson 1 not submitted")
expect(crashes/results.json "crashed with SIGSEGV")
expect(hangs/results.json "did not finish within the time limit")
expect(does_not_compile/results.json "expected primary-expression")
expect(complete/results.json "\"score\": 5.0")
expect(complete/results.json "quiz.txt (not graded):\\n1. the CPU")
expect(complete/report.html "<!DOCTYPE html>")
file(REMOVE_RECURSE ${WORK})
