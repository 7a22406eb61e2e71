# A plain user on a system without unprivileged user namespaces (simulated:
# WORKBOOK_SANDBOX_NO_USER_NAMESPACES, for tests only) cannot hide the
# workbook's solutions/ from their own code: an exercise.cpp that #includes
# the reference compiles and scores full marks. Nothing can prevent that
# without namespaces, so the grade must say so plainly: "unproctored: ..." in
# the scoreboard, results.json and the HTML report. As root, the test runs
# the grader as nobody (skipped, saying why, where nobody cannot reach the build).
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DRECIPE=... -DWORK=... -P unproctored_test.cmake
cmake_minimum_required(VERSION 3.19)
include(${CMAKE_CURRENT_LIST_DIR}/reachable.cmake)
skip_unless_others_reach()
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
file(REMOVE_RECURSE ${WORK})
set(lesson 1_device_check)
file(MAKE_DIRECTORY ${WORK}/submission/${lesson} ${WORK}/tmp)
file(WRITE ${WORK}/submission/${lesson}/exercise.cpp "#include \"${SOURCE}/solutions/${lesson}/exercise.cpp\"\n")
set(as_user "")
execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
if(uid STREQUAL "0")
  set(as_user setpriv --reuid=65534 --regid=65534 --clear-groups)
  execute_process(COMMAND chmod -R a+rwX ${WORK})
endif()
execute_process(COMMAND ${as_user} env TMPDIR=${WORK}/tmp WORKBOOK_SANDBOX_NO_USER_NAMESPACES=1 HOME=${WORK}
                        ${GRADER} --recipe ${RECIPE} grade 1 --submission ${WORK}/submission --no-timing
                        --json ${WORK}/results.json --html ${WORK}/report.html
                RESULT_VARIABLE rc OUTPUT_VARIABLE board ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT EXISTS ${WORK}/results.json)
  message(FATAL_ERROR "grading failed (${rc}):\n${board}\n${err}")
endif()
message(STATUS "the scoreboard:\n${board}")
file(READ ${WORK}/results.json results)
file(READ ${WORK}/report.html report)
string(JSON output GET "${results}" output)
set(plain "unproctored: the compiler and the runs could read the workbook's own solutions/ and tests/ here (no mount namespace: unprivileged user namespaces are off on this system), so this grade cannot show the work is the student's own")
expect_in("the scoreboard" "${board}" "${plain}")
expect_in("results.json's output" "${output}" "${plain}")
string(FIND "${report}" "unproctored: the compiler and the runs could read the workbook" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the HTML report does not say the grade is unproctored:\n${report}")
endif()
file(GLOB left ${WORK}/tmp/*)
if(left)
  message(FATAL_ERROR "left behind: ${left}")
endif()
file(REMOVE_RECURSE ${WORK})
