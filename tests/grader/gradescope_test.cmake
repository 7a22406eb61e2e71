# Gradescope's run_autograder (grader/gradescope) in a container without
# CAP_SYS_ADMIN (Docker's default, and Gradescope's), as far as this machine
# can show it: root with the capability dropped (capsh), so no namespace can
# be made. --require-sandbox refuses to grade, and the student sees a
# results.json that says their work was not graded and is not at fault, and
# tells the instructor which protections are missing and what to do; with
# --unsafe in its place the grade goes on, and says what was missing.
# Skipped, saying why, where not root or without capsh.
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DRECIPE=... -DWORK=... -P gradescope_test.cmake
cmake_minimum_required(VERSION 3.19)
execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
find_program(CAPSH capsh PATHS /usr/sbin /sbin)
if(NOT uid STREQUAL "0" OR NOT CAPSH)
  message("skipped: needs root and capsh (libcap2-bin) to run the grader without CAP_SYS_ADMIN")
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
file(REMOVE_RECURSE ${WORK})
set(lesson 1_device_check)
# Gradescope's layout: /autograder/source (the workbook: here a ./workbook that
# runs this build's grader), /autograder/submission, /autograder/results.
set(root ${WORK}/autograder)
file(MAKE_DIRECTORY ${root}/source ${root}/submission/${lesson})
file(WRITE ${root}/source/workbook "#!/bin/sh\nexec '${GRADER}' \"$@\"\n")
file(CHMOD ${root}/source/workbook PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
file(COPY ${SOURCE}/solutions/${lesson}/exercise.cpp DESTINATION ${root}/submission/${lesson})
include(${CMAKE_CURRENT_LIST_DIR}/reachable.cmake)
sandbox_tmp_root(tmp_root gradescope)
file(MAKE_DIRECTORY ${tmp_root})
file(CHMOD ${tmp_root} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

execute_process(COMMAND ${CAPSH} --drop=cap_sys_admin --
                        -c "TMPDIR='${tmp_root}' WORKBOOK_AUTOGRADER_ROOT='${root}' bash '${SOURCE}/grader/gradescope/run_autograder'"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "run_autograder failed (${rc}): Gradescope would show nothing:\n${out}\n${err}")
endif()
file(READ ${root}/results/results.json results)
message(STATUS "what the student sees without CAP_SYS_ADMIN:\n${results}\n(the grader's own words:\n${err})")
string(JSON output GET "${results}" output)
string(JSON score GET "${results}" score)
if(NOT score EQUAL 0)
  message(FATAL_ERROR "an unsafe sandbox still graded (score ${score}):\n${results}")
endif()
expect_in("results.json" "${output}" "Your work was not graded: this autograder is not set up to grade safely. This is not a problem with your code; please tell your instructor.")
expect_in("results.json" "${output}" "For the instructor: refusing to grade others' work (--batch or --require-sandbox) in a sandbox that lacks no network (a network namespace), the sources hidden (a mount namespace)")
expect_in("results.json" "${output}" "the container lacks the CAP_SYS_ADMIN capability")
expect_in("results.json" "${output}" "docker run --cap-add SYS_ADMIN --cap-add NET_ADMIN")
expect_in("results.json" "${output}" "grade with --unsafe in place of --require-sandbox")
expect_not_in("results.json" "${output}" "The grader could not run")
expect_in("the grader's error" "${err}" "refusing to grade others' work")

# --unsafe in place of --require-sandbox: graded, with the warning on top.
execute_process(COMMAND ${CAPSH} --drop=cap_sys_admin --
                        -c "TMPDIR='${tmp_root}' '${GRADER}' --recipe '${RECIPE}' grade 1 --submission '${root}/submission' --unsafe --no-timing --json '${WORK}/unsafe.json'"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(READ ${WORK}/unsafe.json results)
string(JSON output GET "${results}" output)
string(JSON score GET "${results}" score)
if(NOT rc EQUAL 0 OR NOT score EQUAL 5)
  message(FATAL_ERROR "--unsafe did not grade (${rc}, score ${score}):\n${out}\n${err}\n${results}")
endif()
expect_in("results.json with --unsafe" "${output}" "warning: the sandbox lacked no network (a network namespace)")
file(GLOB left ${tmp_root}/*)
if(left)
  message(FATAL_ERROR "left behind: ${left}")
endif()
file(REMOVE_RECURSE ${WORK} ${tmp_root})
