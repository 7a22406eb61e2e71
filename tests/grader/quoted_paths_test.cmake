# Paths with a quote and a space are paths like any other (issue 22 item 4):
# the grader once built shell commands with hand quoting (popen), which a `'`
# in a path broke. In a student's tree at "O'Brien's tree" (its build's
# checker reached through "the build's checks/"):
# - a lesson that does not compile still lists every check of its checker
#   (`lesson_1_checks --list`; with the shell, none: the lesson was worth 0 checks);
# - `stubs --check` finds a stub edited since it was committed to match
#   (`git show HEAD:...`; with the shell, git never ran and the stub "differed").
# Run by CTest as: cmake -DGRADER=... -DRECIPE=... -DSOURCE=... -DWORK=... -P quoted_paths_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
set(root "${WORK}/O'Brien's tree")
file(REMOVE_RECURSE ${WORK})
workbook_temp_tree("${root}" 1_device_check)

# Lesson 1's checker, reached through a folder whose name holds a quote and a space.
file(READ "${root}/recipe.json" recipe)
string(JSON checks GET "${recipe}" lessons 0 checks)
file(MAKE_DIRECTORY "${root}/the build's checks")
file(CREATE_LINK "${checks}" "${root}/the build's checks/lesson_1_checks" SYMBOLIC)
string(JSON recipe SET "${recipe}" lessons 0 checks "\"${root}/the build's checks/lesson_1_checks\"")
file(WRITE "${root}/recipe.json" "${recipe}")

function(run_grader)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env NO_COLOR=1 ${GRADER} --recipe "${root}/recipe.json" ${ARGN}
                  WORKING_DIRECTORY "${root}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(rc "${rc}" PARENT_SCOPE)
  set(all "exit status ${rc}\nstdout:\n${out}\nstderr:\n${err}" PARENT_SCOPE)
endfunction()

# The checks the checker lists (run here directly, with no shell).
execute_process(COMMAND "${checks}" --list OUTPUT_VARIABLE listed RESULT_VARIABLE listed_rc)
if(NOT listed_rc EQUAL 0)
  message(FATAL_ERROR "${checks} --list failed (exit status ${listed_rc}):\n${listed}")
endif()
string(JSON count LENGTH "${listed}" checks)
if(count LESS 1)
  message(FATAL_ERROR "${checks} --list lists no check:\n${listed}")
endif()

# A lesson that does not compile: every check is listed as failed, each by its name.
file(WRITE "${root}/lessons/1_device_check/exercise.cpp" "this is not C++\n")
run_grader(grade 1 --no-timing --json "${root}/results.json")
expect_in("grade 1" "${all}" "exit status 0")
expect_in("grade 1" "${all}" "lesson 1: does not compile")
file(READ "${root}/results.json" results)
string(JSON tests LENGTH "${results}" tests)
if(NOT tests EQUAL count)
  message(FATAL_ERROR "results.json lists ${tests} checks of lesson 1, its checker ${count} (the checker's "
                      "--list was not read through the path with a quote?):\n${results}")
endif()
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON name GET "${listed}" checks ${i} name)
  expect_in("results.json" "${results}" "${name}")
endforeach()

# A stub edited since it was committed: `stubs --check` asks git for the committed version.
find_program(GIT git)
if(NOT GIT)
  message(STATUS "skipped: the stubs --check half (no git)")
  return()
endif()
file(COPY ${SOURCE}/solutions/1_device_check/exercise.cpp DESTINATION "${root}/solutions/1_device_check")
file(COPY ${SOURCE}/lessons/1_device_check/exercise.cpp DESTINATION "${root}/lessons/1_device_check")
set(git ${GIT} -c user.name=test -c user.email=test@example.com -c init.defaultBranch=main -C "${root}")
execute_process(COMMAND ${git} init -q RESULT_VARIABLE a)
execute_process(COMMAND ${git} add lessons solutions RESULT_VARIABLE b)
execute_process(COMMAND ${git} commit -q -m stubs RESULT_VARIABLE c)
if(NOT a EQUAL 0 OR NOT b EQUAL 0 OR NOT c EQUAL 0)
  message(FATAL_ERROR "could not make a git repository in ${root} (${a}, ${b}, ${c})")
endif()
file(APPEND "${root}/lessons/1_device_check/exercise.cpp" "// a student's line\n")
run_grader(stubs --check)
expect_in("stubs --check" "${all}" "exit status 0")
expect_in("stubs --check" "${all}" "all 1 lessons' stubs match their solutions")
