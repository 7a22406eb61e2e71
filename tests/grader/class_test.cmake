# Grading a class (issue 20: time, the gradebook, JUnit, progress), end to end on
# lesson 1: a class of six (complete, untouched stubs, missing, not compiling,
# hanging, one subtle mistake) graded with a lesson.json that weighs its checks;
# the options a batch refuses; a batch killed half way and resumed; a deadline
# shorter than a hang.
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DRECIPE=... -DWORK=... -P class_test.cmake
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)
file(REMOVE_RECURSE ${WORK})
set(lesson 1_device_check)
workbook_temp_tree(${WORK}/tree ${lesson})
set(recipe ${WORK}/tree/recipe.json)
# One weighting for every output: the lesson is worth 10 points, describe_device 4 parts of 8.
file(READ ${WORK}/tree/lessons/${lesson}/lesson.json meta)
string(JSON meta SET "${meta}" points 10)
string(JSON meta SET "${meta}" check_points "{\"describe_device\": 4}")
file(WRITE ${WORK}/tree/lessons/${lesson}/lesson.json "${meta}")

function(submission batch name)
  file(MAKE_DIRECTORY ${WORK}/${batch}/${name}/${lesson})
  if(ARGC GREATER 2)
    file(WRITE ${WORK}/${batch}/${name}/${lesson}/exercise.cpp "${ARGV2}")
  endif()
endfunction()
file(READ ${SOURCE}/solutions/${lesson}/exercise.cpp solution)
file(READ ${SOURCE}/lessons/${lesson}/exercise.cpp stubs)
set(count_body "return tiny::cuda::is_available() ? tiny::cuda::device_count() : 0;")
string(REPLACE "${count_body}" "volatile bool spin = true; while (spin) {} return 0;" hanging "${solution}")
set(gib "(1024.0 * 1024.0 * 1024.0)")
string(REPLACE "${gib}" "1e9" subtle "${solution}")
foreach(changed hanging subtle)
  if("${${changed}}" STREQUAL "${solution}")
    message(FATAL_ERROR "solutions/${lesson}/exercise.cpp changed: the ${changed} submission is the solution; update this test")
  endif()
endforeach()
submission(class complete "${solution}")
submission(class stubs "${stubs}")
submission(class missing)
submission(class does_not_compile "int x = ;\n")
submission(class hangs "${hanging}")
submission(class subtle "${subtle}")
# Not submissions: each is listed as skipped, none graded.
file(MAKE_DIRECTORY ${WORK}/class/index.html ${WORK}/class/.git)
file(WRITE ${WORK}/class/notes.txt "not a submission\n")

# ---- the class, two at a time
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${GRADER} --recipe ${recipe} grade --batch ${WORK}/class --out ${WORK}/out --seed 7 --jobs 2 --unsafe
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TIMESTAMP t1 "%s")
math(EXPR seconds "${t1} - ${t0}")
message(STATUS "the class of six in ${seconds} s\n${out}\n${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the batch failed (${rc})")
endif()
# Rows with the lesson's points (10), the seed and the problems in the grader's words.
expect_row(gradebook.csv complete 10 10 passed "")
expect_row(gradebook.csv stubs 0 10 "not started" "")
expect_row(gradebook.csv missing 0 10 "not submitted" "lesson 1 not submitted")
expect_row(gradebook.csv does_not_compile 0 10 "does not compile" "lesson 1 does not compile")
expect_row(gradebook.csv hangs 0 10 "in progress" "lesson 1 timed out")
expect_row(gradebook.csv subtle 5 10 "in progress" "")  # describe_device: 4 x 10/8 points lost
expect(gradebook.csv "submission,total,maximum,percent,seed,seconds,problems,lesson_1_points,lesson_1_status\n")
expect(gradebook.csv "\"subtle\",5,10,50.0,7,")
# results.json and the report weigh the checks the same way.
expect(subtle/results.json "\"score\": 5.0")
expect(subtle/results.json "\"max_score\": 5.0")
expect(subtle/report.html ">50%<")
expect(subtle/report.html "Total: <b>5</b> of 10 points (50.0%).")
# The hang: its first run stopped after the reference's time x 20 (at least 10 s), the others at once.
expect(hangs/results.json "(its limit: at least 10 s, the reference needing only")
expect(hangs/results.json "was not run: an earlier run of your code in this lesson did not finish in time")
file(READ ${WORK}/out/gradebook.csv gradebook)
string(REGEX MATCH "\n\"hangs\",[^,]*,[^,]*,[^,]*,[^,]*,([0-9]+)," row "${gradebook}")
message(STATUS "the hanging submission took ${CMAKE_MATCH_1} s")
if(CMAKE_MATCH_1 GREATER 45)
  message(FATAL_ERROR "the hanging submission took ${CMAKE_MATCH_1} s: its one hang should cost about 10 s, not a minute per check")
endif()
# Progress: each lesson and submission as it finishes, with the time taken and left.
expect_in(stderr "${err}" "] hangs: lesson 1 in progress (timed out), 0 of 10 points (")
expect_in(stderr "${err}" "] subtle: done, 5 of 10 points (50.0%) in ")
expect_in(stderr "${err}" " submissions done in ")
expect_in(stderr "${err}" " left\n")
expect_in(stderr "${err}" "skipped in --batch: .git (a hidden folder)\n")
expect_in(stderr "${err}" "skipped in --batch: index.html (named as a file the batch writes in --out: rename the folder)\n")
expect_in(stderr "${err}" "skipped in --batch: notes.txt (a file that is not a .zip, .tar.gz or .tgz submission)\n")
# The class table: complete passed; hangs and subtle in progress; stubs not
# started; missing and does_not_compile no grade; describe_device failed most (hangs, subtle).
expect_in(stdout "${out}" "the class: 6 submissions, mean 25.0%, median 0.0%, 1 with full marks")
if(NOT out MATCHES "\n  1  Device check +1 +2 +1 +2  describe_device \\(2\\)\n")
  message(FATAL_ERROR "the class table's row of lesson 1 is not as the class is:\n${out}")
endif()
expect(index.html "<a href=\"hangs/report.html\">hangs</a>")
expect(index.html "<td>lesson 1 does not compile</td>")
# JUnit: a named suite, a failure's message, a stub skipped with its reason.
expect(subtle/junit.xml "<testsuites name=\"GPU Training Workbook: subtle, seed 7\"")
expect(subtle/junit.xml "<testsuite name=\"lesson_1 (Device check)\" tests=\"5\" failures=\"1\" errors=\"0\" skipped=\"0\"")
file(READ ${WORK}/out/subtle/junit.xml junit)
if(NOT junit MATCHES "<testcase classname=\"lesson_1\" name=\"describe_device\" time=\"[0-9.]+\">\n      <failure message=\"[^\"]+\"")
  message(FATAL_ERROR "describe_device's failure has no message:\n${junit}")
endif()
expect(stubs/junit.xml "<skipped message=\"not done yet: lesson 1: ")
expect(stubs/junit.xml "skipped=\"5\"")

# ---- what a batch refuses, each naming the value and the fix
function(refused what expected)
  execute_process(COMMAND ${GRADER} --recipe ${recipe} grade ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${what} was not refused:\n${o}${e}")
  endif()
  expect_in("${what}'s error" "${e}" "${expected}")
endfunction()
refused("--json with --batch" "--json r.json names one submission's file, and --batch grades many" --batch ${WORK}/class --out ${WORK}/o2 --json r.json --unsafe)
refused("--html with --batch" "drop --html" --batch ${WORK}/class --out ${WORK}/o2 --html r.html --unsafe)
refused("--junit with --batch" "drop --junit" --batch ${WORK}/class --out ${WORK}/o2 --junit j.xml --unsafe)
refused("--resume without --batch" "--resume goes on with a --batch's gradebook.csv" --submission ${WORK}/class/complete --resume)
refused("a gradebook graded again" "exists already: add --resume" --batch ${WORK}/class --out ${WORK}/out --unsafe)
refused("--deadline 0" "--deadline 0 is not a time a submission can be graded in: give seconds from 10 to 86400" --submission ${WORK}/class/complete --deadline 0)
refused("--timeout -1" "--timeout -1 is not a time a run of an exercise can take: give seconds from 1 to 3600" --submission ${WORK}/class/complete --timeout -1)
if(EXISTS ${WORK}/o2)
  message(FATAL_ERROR "a refused batch wrote ${WORK}/o2")
endif()

# ---- killed half way, then resumed: nothing graded twice, nothing lost
foreach(name complete subtle stubs)
  file(COPY ${WORK}/class/${name} DESTINATION ${WORK}/again)
endforeach()
execute_process(COMMAND sh -c [=[
  "$1" --recipe "$2" grade --batch "$3" --out "$4" --seed 7 --jobs 1 --unsafe > "$4.log" 2>&1 &
  pid=$!
  # Killed once the first row is there.
  for i in $(seq 600); do
    [ "$(grep -c '^"' "$4/gradebook.csv" 2>/dev/null)" -ge 1 ] && break
    sleep 0.2
  done
  kill -TERM $pid
  wait $pid
  echo "killed: $?"]=] sh ${GRADER} ${recipe} ${WORK}/again ${WORK}/out_again OUTPUT_VARIABLE killed)
message(STATUS "${killed}")
file(READ ${WORK}/out_again/gradebook.csv before)
# The class's page as far as it went.
file(READ ${WORK}/out_again/index.html index_before)
expect_in("index.html of the killed batch" "${index_before}" "/report.html\">")
message(STATUS "the gradebook when the batch was killed:\n${before}")
string(REGEX MATCHALL "\n\"" rows_before "${before}")
list(LENGTH rows_before kept)
if(kept LESS 1 OR kept GREATER 2)
  message(FATAL_ERROR "the killed batch kept ${kept} rows")
endif()
execute_process(COMMAND ${GRADER} --recipe ${recipe} grade --batch ${WORK}/again --out ${WORK}/out_again --resume --jobs 1 --unsafe
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "resumed:\n${out}\n${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the resumed batch failed (${rc})")
endif()
expect_in(stderr "${err}" "${kept} of 3 submissions are in it already; grading the other")
expect_in(stderr "${err}" "with seed 7")  # the gradebook's seed, not a fresh one
expect_in(stdout "${out}" "the class: 3 submissions")
file(READ ${WORK}/out_again/gradebook.csv after)
foreach(name complete subtle stubs)
  string(REGEX MATCHALL "\n\"${name}\"," found "${after}")
  list(LENGTH found n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "${name} has ${n} rows after the resume:\n${after}")
  endif()
endforeach()
# expect_row reads ${WORK}/out/FILE.
file(RENAME ${WORK}/out ${WORK}/out_class)
file(RENAME ${WORK}/out_again ${WORK}/out)
expect_row(gradebook.csv complete 10 10 passed "")
expect_row(gradebook.csv subtle 5 10 "in progress" "")
expect_row(gradebook.csv stubs 0 10 "not started" "")

# ---- a deadline shorter than a hang: the run is cut to what is left, the results still written
string(TIMESTAMP t0 "%s")
execute_process(COMMAND ${GRADER} --recipe ${recipe} grade --submission ${WORK}/class/hangs --deadline 10
                        --json ${WORK}/deadline.json --seed 7
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(TIMESTAMP t1 "%s")
math(EXPR seconds "${t1} - ${t0}")
file(READ ${WORK}/deadline.json json)
message(STATUS "--deadline 10 on the hang: ${seconds} s")
expect_in(deadline.json "${json}" "--deadline")
expect_in(deadline.json "${json}" "the time for grading this submission (the grader's --deadline) ran out")
if(seconds GREATER 40)
  message(FATAL_ERROR "--deadline 10 took ${seconds} s")
endif()
file(REMOVE_RECURSE ${WORK})
