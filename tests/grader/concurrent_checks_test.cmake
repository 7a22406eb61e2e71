# Two checks of one lesson at once (`watch` and `check`, or two terminals):
# while the first runs its checks, the second finds exercise.cpp saved again
# and must rebuild the runner. The second waits for the first (and says so),
# and both give the verdict of a check alone: the first never starts a missing
# or half-written runner, which it used to report as the student's crash
# ("exited with code 127 ... could not start the program (execve failed)").
# Run by CTest as: cmake -DGRADER=... -DRECIPE=... -DSOURCE=... -DWORK=... -P concurrent_checks_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
set(lesson 1_device_check)
workbook_temp_tree(${WORK} ${lesson})
# The reference, each of its runs slowed down, so that the first check is surely
# still running when the second starts, however fast the machine.
file(READ ${SOURCE}/solutions/${lesson}/exercise.cpp text)
set(slow "#include \"exercise.h\"\n#include <chrono>\n#include <thread>\n[[maybe_unused]] static const bool slow_start =\n    (std::this_thread::sleep_for(std::chrono::milliseconds(100)), true);\n")
string(REPLACE "#include \"exercise.h\"\n" "${slow}" text "${text}")
file(WRITE ${WORK}/lessons/${lesson}/exercise.cpp "${text}")

# The first check runs; once its checker has started (its first line is out),
# the file is saved again and the second check starts.
set(script [=[
grader=$1 recipe=$2 work=$3 exercise=$4
"$grader" --recipe "$recipe" check 1 >"$work/first.out" 2>"$work/first.err" &
first=$!
tries=0
until grep -q ', seed ' "$work/first.out"; do
  tries=$((tries + 1))
  if [ $tries -gt 3000 ]; then echo "the first check never started its checks"; kill $first; exit 1; fi
  sleep 0.02
done
touch "$exercise"
"$grader" --recipe "$recipe" check 1 >"$work/second.out" 2>"$work/second.err"
echo $? >"$work/second.rc"
wait $first
echo $? >"$work/first.rc"
]=])
execute_process(COMMAND sh -c "${script}" sh ${GRADER} ${WORK}/recipe.json ${WORK} ${WORK}/lessons/${lesson}/exercise.cpp
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the test's script failed (${rc}):\n${out}\n${err}")
endif()
foreach(which first second)
  file(READ ${WORK}/${which}.out stdout)
  file(READ ${WORK}/${which}.err stderr)
  file(STRINGS ${WORK}/${which}.rc code)
  set(all "exit status ${code}\nstdout:\n${stdout}\nstderr:\n${stderr}")
  expect_in("the ${which} check" "${all}" "exit status 0")
  expect_in("the ${which} check" "${all}" "lesson 1 passes")
  expect_not_in("the ${which} check" "${all}" "could not start")
  expect_not_in("the ${which} check" "${all}" "FAIL")
endforeach()
file(READ ${WORK}/second.err stderr)
expect_in("the second check's stderr" "${stderr}" "waiting for another check of lesson 1 to finish")
expect_in("the second check's stderr" "${stderr}" "building lesson 1 with your exercise.cpp ...")
file(REMOVE_RECURSE ${WORK})
