# `watch`: each save of an exercise.cpp gets a fresh report: a clean screen on
# a terminal (a rule in a pipe or a log), the compiler's warnings about the
# student's file, the first open check, and the hint the student reached with
# ./workbook hint N (never hint 1 whatever failed), with the command for the next.
# Run by CTest as: cmake -DGRADER=... -DRECIPE=... -DSOURCE=... -DWORK=... -P watch_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
set(lesson 2_moving_tensors)
workbook_temp_tree(${WORK} ${lesson})
set(exercise ${WORK}/lessons/${lesson}/exercise.cpp)
set(find "for (const tiny::Tensor& t : tensors) moved.push_back(t.to(device));")
set(wrong "for (const tiny::Tensor& t : tensors) {\n    t.to(device);  // the copy is thrown away\n    moved.push_back(t);\n  }")
solution_with(${lesson} "${find}" "${wrong}" ${exercise})
# The student has asked for two hints of lesson 2 so far.
file(WRITE ${WORK}/build/grader/state.json "{\"hints_shown\": {\"2\": 2}}\n")
file(READ ${WORK}/lessons/${lesson}/lesson.json meta)
string(JSON hint1 GET "${meta}" hints 0)
string(JSON hint2 GET "${meta}" hints 1)
string(JSON hints LENGTH "${meta}" hints)

# watch in the background: once it is watching, save the file, wait for the report, stop it with Ctrl-C (SIGINT).
# With "pty", it runs on a terminal of its own (script(1)).
set(script [=[
grader=$1 recipe=$2 exercise=$3 out=$4 how=$5
if [ "$how" = pty ]; then
  script -qfec "'$grader' --recipe '$recipe' watch" /dev/null >"$out" 2>&1 &
else
  "$grader" --recipe "$recipe" watch >"$out" 2>&1 &
fi
watcher=$!
wait_for() {
  tries=0
  until grep -q "$1" "$out"; do
    tries=$((tries + 1))
    if [ $tries -gt 6000 ]; then echo "watch never printed '$1':"; cat "$out"; kill $watcher; exit 1; fi
    sleep 0.05
  done
}
wait_for 'watching lessons'
sleep 1
touch "$exercise"
wait_for 'checks pass'
sleep 1
if [ "$how" = pty ]; then pkill -INT -P $watcher 2>/dev/null; fi
kill -INT $watcher 2>/dev/null
sleep 2
kill -TERM $watcher 2>/dev/null
wait $watcher
exit 0
]=])

foreach(how pipe pty)
  if(how STREQUAL pty)
    find_program(SCRIPT_PROGRAM script)
    if(NOT SCRIPT_PROGRAM)
      message(STATUS "no script(1) here: the terminal's clean screen is not tested")
      break()
    endif()
  endif()
  execute_process(COMMAND sh -c "${script}" sh ${GRADER} ${WORK}/recipe.json ${exercise} ${WORK}/watch.out ${how}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  file(READ ${WORK}/watch.out report)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "watch (${how}) failed (${rc}):\n${out}\n${err}\n${report}")
  endif()
  message(STATUS "watch (${how}):\n${report}")
  string(ASCII 27 escape)
  if(how STREQUAL pipe)
    expect_in("watch's output in a pipe" "${report}" "\n------------------------------")
    expect_not_in("watch's output in a pipe" "${report}" "${escape}[")
  else()
    expect_in("watch's output on a terminal" "${report}" "${escape}[2J")
  endif()
  expect_in("watch's report" "${report}" "lesson 2: in progress")
  expect_in("watch's report" "${report}" "the compiler warns about your code:")
  expect_in("watch's report" "${report}" "t.to(device);  // the copy is thrown away")
  expect_in("watch's report" "${report}" "first problem: to_device")
  expect_in("watch's report" "${report}" "hint 2 of ${hints} (the last you asked for): ${hint2}")
  expect_in("watch's report" "${report}" "./workbook hint 2 shows hint 3 of ${hints}")
  expect_not_in("watch's report" "${report}" "${hint1}")
endforeach()
file(REMOVE_RECURSE ${WORK})
