# Ctrl-C during `grade`, `check` and `watch` (issue 19): the grader, its checker and the
# student's run stop at once, and nothing is left: no process, no cgroup, no
# temporary folder; the grader exits 130 (SIGINT) or 143 (SIGTERM). A grader
# killed outright (SIGKILL: nothing of it runs) takes its checker with it
# (PR_SET_PDEATHSIG), which stops the run and removes its own folders; a
# grader and its checker killed outright together (grade-kill-all) leave no
# process either (the run's PID namespace dies with them). What a killed
# process could not remove, the next grader does (sweep_stale_temp_folders):
# after a kill, the grader runs once more and the TMPDIR must then be empty.
# count_devices() spins, and leaves a spinning daemon of its own session, so
# the first check runs until its limit (a minute) unless stopped. Each case
# runs with a TMPDIR of its own, to be found empty.
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DRECIPE=... -DWORK=... -P interrupt_test.cmake
cmake_minimum_required(VERSION 3.19)
include(${CMAKE_CURRENT_LIST_DIR}/../reachable.cmake)
# In a checkout only its owner can enter (a private clone) the grader shares
# and copies what the sandbox's uid needs; the TMPDIRs must then be where that
# uid can reach them, as /tmp is.
others_reach(private_checkout)
set(tmp_root ${WORK})
if(private_checkout)
  string(RANDOM LENGTH 12 ALPHABET abcdefghijklmnopqrstuvwxyz tag)
  set(tmp_root /tmp/workbook-interrupt-tmp-${tag})
  file(MAKE_DIRECTORY ${tmp_root})
  file(CHMOD ${tmp_root} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/../temp_tree.cmake)
set(lesson 1_device_check)
workbook_temp_tree(${WORK}/tree ${lesson})
file(READ ${SOURCE}/solutions/${lesson}/exercise.cpp text)
string(CONCAT spin "if (fork() == 0) {\n    setsid();\n    for (volatile bool spin = true; spin;) {\n    }\n  }\n"
       "  for (volatile bool spin = true; spin;) {\n  }\n  return 0;")
string(REPLACE "return tiny::cuda::is_available() ? tiny::cuda::device_count() : 0;" "${spin}" text "${text}")
set(text "#include <unistd.h>\n${text}")
file(WRITE ${WORK}/tree/lessons/${lesson}/exercise.cpp "${text}")

# Prints "rc=N seconds=S" and one line per thing left behind.
set(script [=[
grader=$1 recipe=$2 work=$3 mode=$4 tmp_root=$5
tmp=$tmp_root/tmp-$mode
mkdir -p "$tmp"
export TMPDIR=$tmp WORKBOOK_SANDBOX_UID=2100000512 NO_COLOR=1
# As typed at a terminal: its own session (the terminal's foreground group), SIGINT
# not ignored (a background job of a script would ignore it).
case $mode in
  check-*) env --default-signal=INT setsid "$grader" --recipe "$recipe" check 1 --no-timing >"$work/$mode.out" 2>&1 & ;;
  watch-*) env --default-signal=INT setsid "$grader" --recipe "$recipe" watch >"$work/$mode.out" 2>&1 & ;;
  *)       env --default-signal=INT setsid "$grader" --recipe "$recipe" grade 1 --no-timing >"$work/$mode.out" 2>&1 & ;;
esac
grader_pid=$!
case $mode in
  watch-*)  # once it watches, a save starts a check
    until grep -q 'watching lessons' "$work/$mode.out"; do sleep 0.05; done
    sleep 0.6
    touch "$work/tree/lessons/1_device_check/exercise.cpp" ;;
esac
# The processes whose folder or command line is in our TMPDIR: the checker and the student's run.
ours() {
  for d in /proc/[0-9]*; do
    case "$(readlink "$d/cwd" 2>/dev/null) $(tr '\0' ' ' 2>/dev/null < "$d/cmdline")" in
      *"$tmp"*) grep -q '^State:.*Z' "$d/status" 2>/dev/null || echo "${d#/proc/}" ;;
    esac
  done
}
# Those of them whose command line matches $1: pgrep finds the few candidates, so a
# poll costs a few forks, not several per process of a loaded machine (a scan
# of every process took longer than the run's 10 s limit under a load of 8).
ours_named() {
  for p in $(pgrep -f "$1"); do
    case "$(readlink "/proc/$p/cwd" 2>/dev/null) $(tr '\0' ' ' 2>/dev/null < "/proc/$p/cmdline")" in
      *"$tmp"*) echo "$p" ;;
    esac
  done
}
runner_running() { [ -n "$(ours_named 'count_devices in out')" ]; }
tries=0
until runner_running; do
  tries=$((tries + 1))
  if [ $tries -gt 6000 ] || ! kill -0 $grader_pid 2>/dev/null; then
    echo "the student's run never started"; cat "$work/$mode.out"; kill -KILL $grader_pid; exit 1
  fi
  sleep 0.05
done
checker_pid=$(ours_named lesson_1_checks | head -n 1)
sleep 0.3
start=$(date +%s)
case $mode in
  *-int) kill -INT -$grader_pid ;;   # Ctrl-C: the terminal signals the foreground process group
  *-term) kill -TERM $grader_pid ;;
  *-kill) kill -KILL $grader_pid ;;
  *-kill-all) kill -KILL $grader_pid $checker_pid ;;
esac
wait $grader_pid
rc=$?
seconds=$(( $(date +%s) - start ))  # how long the grader took to stop, before the scan for what is left
# What is left, once the checker had its time to clean up (a killed grader's checker is on its own).
tries=0
while [ -n "$(ours)" ] && [ $tries -lt 200 ]; do tries=$((tries + 1)); sleep 0.05; done
echo "rc=$rc seconds=$seconds"
for p in $(ours); do echo "process left: $p $(tr '\0' ' ' 2>/dev/null < /proc/$p/cmdline)"; done
ps -eo uid=,stat= | awk '$1 >= 2100000512 && $1 < 2100000768 && $2 !~ /Z/ { n++ } END { if (n) print "processes of the sandboxes uids left: " n }'
case $mode in
  *-kill*)  # what a killed process could not remove, the next grader does (its cgroups, its temporary folders)
    ls "$tmp" > "$work/$mode.left"
    "$grader" --recipe "$recipe" grade 1 --no-timing --timeout 1 >"$work/$mode.next.out" 2>&1 ;;
esac
for d in $(sed -n 's/^[0-9]*:\([a-z,]*\):\(.*\)$/\/sys\/fs\/cgroup\/\1\2/p' /proc/self/cgroup); do
  for pid in $grader_pid $checker_pid; do
    for c in "$d"/workbook-$pid-*; do [ -d "$c" ] && echo "cgroup left: $c"; done
  done
done
for f in "$tmp"/*; do
  [ -e "$f" ] && echo "temporary folder left: $f"
done
exit 0
]=])

foreach(mode grade-int check-int watch-int grade-term grade-kill grade-kill-all)
  execute_process(COMMAND sh -c "${script}" sh ${GRADER} ${WORK}/tree/recipe.json ${WORK} ${mode} ${tmp_root}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE report ERROR_VARIABLE err)
  file(READ ${WORK}/${mode}.out out)
  message(STATUS "${mode}: ${report}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${mode}: the test itself failed (${rc}):\n${report}\n${err}\n${out}")
  endif()
  set(expected_rc 130)
  if(mode STREQUAL "grade-term")
    set(expected_rc 143)
  elseif(mode MATCHES "^grade-kill")
    set(expected_rc 137)
  endif()
  if(NOT report MATCHES "rc=${expected_rc} seconds=([0-9]+)")
    message(FATAL_ERROR "${mode}: the grader did not exit ${expected_rc}:\n${report}\n${out}")
  endif()
  if(CMAKE_MATCH_1 GREATER 10)
    message(FATAL_ERROR "${mode}: the grader took ${CMAKE_MATCH_1} s to stop (the check's own limit is a minute)")
  endif()
  if(report MATCHES "left")
    message(FATAL_ERROR "${mode}: something was left behind:\n${report}\n${out}")
  endif()
  # An instructor's trial: Ctrl-C stopped everything at once, but said nothing.
  if(mode MATCHES "-int$" AND NOT out MATCHES "interrupted \\(Ctrl-C\\): every check and run was stopped")
    message(FATAL_ERROR "${mode}: the grader did not say it was interrupted:\n${out}")
  endif()
  if(mode STREQUAL "grade-term" AND NOT out MATCHES "stopped \\(SIGTERM\\): every check and run was stopped")
    message(FATAL_ERROR "${mode}: the grader did not say it was stopped:\n${out}")
  endif()
endforeach()
# The checker killed outright left its folders: the next grader removed them.
file(READ ${WORK}/grade-kill-all.left left)
if(NOT left MATCHES "workbook-lesson-")
  message(FATAL_ERROR "grade-kill-all: the killed checker left no folder, so the sweep was not tried:\n${left}")
endif()
message(STATUS "interrupted six times, nothing left")
file(REMOVE_RECURSE ${WORK})
if(private_checkout)
  file(REMOVE_RECURSE ${tmp_root})
endif()
