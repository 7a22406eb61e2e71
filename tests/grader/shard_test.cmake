# Issue 20 item 4, end to end on lesson 1: a class of three (the solution twice,
# the stubs) graded in one batch and in two shards, merged; the merged
# gradebook equals the unsharded one but for the "seconds" column (each run's
# own time, the only column that may differ); the reference's runs are made once
# per input in a batch (three submissions cost the reference runs of one); and
# the errors: a bad --shard, a SLURM variable set to garbage, a shard written
# into another's folder, a merge missing a shard, a shard cut short.
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DRECIPE=... -DWORK=... -P shard_test.cmake
cmake_minimum_required(VERSION 3.19)
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
file(REMOVE_RECURSE ${WORK})
set(lesson 1_device_check)
workbook_temp_tree(${WORK}/tree ${lesson})
set(recipe ${WORK}/tree/recipe.json)
foreach(name ada cy)
  file(COPY ${SOURCE}/solutions/${lesson}/exercise.cpp DESTINATION ${WORK}/class/${name}/${lesson})
endforeach()
file(COPY ${SOURCE}/lessons/${lesson}/exercise.cpp DESTINATION ${WORK}/class/ben/${lesson})
file(COPY ${SOURCE}/solutions/${lesson}/exercise.cpp DESTINATION ${WORK}/one/ada/${lesson})

function(grade out)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=SLURM_ARRAY_TASK_ID --unset=JOB_COMPLETION_INDEX
                          ${GRADER} --recipe ${recipe} grade ${ARGN} --out ${WORK}/${out} --seed 7 --jobs 1 --unsafe
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "grade ${ARGN} --out ${out} failed (${rc}):\n${o}${e}")
  endif()
  set(stdout "${o}" PARENT_SCOPE)
  set(stderr "${e}" PARENT_SCOPE)
endfunction()
function(reference_runs text into_runs into_hits)
  if(NOT text MATCHES "the reference solution ran ([0-9]+) times?; ([0-9]+) of its runs were answered")
    message(FATAL_ERROR "the batch did not say how often the reference ran:\n${text}")
  endif()
  set(${into_runs} ${CMAKE_MATCH_1} PARENT_SCOPE)
  set(${into_hits} ${CMAKE_MATCH_2} PARENT_SCOPE)
endfunction()

# ---- the reference once per input: one submission, then three
grade(alone --batch ${WORK}/one)
reference_runs("${stdout}" one_runs one_hits)
grade(whole --batch ${WORK}/class)
reference_runs("${stdout}" class_runs class_hits)
message(STATUS "reference runs: ${one_runs} for one submission; ${class_runs} (and ${class_hits} read back) for three")
if(NOT one_hits EQUAL 0 OR NOT class_runs EQUAL one_runs OR NOT class_hits GREATER 0)
  message(FATAL_ERROR "three submissions made ${class_runs} reference runs (${class_hits} read back), one made "
                      "${one_runs} (${one_hits}): the same inputs should run the reference once")
endif()
# The cached reference grades alike: ada and cy (the same solution) get the same row but for their seconds.
file(READ ${WORK}/whole/gradebook.csv whole)
if(NOT whole MATCHES "\n\"ada\",5,5,100.0,7,[0-9]+,\"\",5,\"passed\"\n\"ben\",0,5,0.0,7,[0-9]+,\"\",0,\"not started\"\n\"cy\",5,5,100.0,7,[0-9]+,\"\",5,\"passed\"\n$")
  message(FATAL_ERROR "the unsharded gradebook is not the class's:\n${whole}")
endif()

# ---- two shards and their merge
grade(s0 --batch ${WORK}/class --shard 0/2)
if(NOT stderr MATCHES "shard 0/2 \\(--shard 0/2\\): 2 of the class's 3 submissions")
  message(FATAL_ERROR "shard 0/2 did not say its part:\n${stderr}")
endif()
# The other part from SLURM's variables, as an array task sees them (--array=1-2: task 2 is part 1).
execute_process(COMMAND ${CMAKE_COMMAND} -E env SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=2
                        ${GRADER} --recipe ${recipe} grade --batch ${WORK}/class --out ${WORK}/s1 --seed 7 --jobs 1 --unsafe
                RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
if(NOT rc EQUAL 0 OR NOT e MATCHES "shard 1/2 \\(SLURM_ARRAY_TASK_ID=2, SLURM_ARRAY_TASK_MIN=1, SLURM_ARRAY_TASK_COUNT=2\\): 1 of")
  message(FATAL_ERROR "the SLURM task did not grade part 1/2 (${rc}):\n${o}${e}")
endif()
execute_process(COMMAND ${GRADER} --recipe ${recipe} grade merge ${WORK}/s1 ${WORK}/s0 --out ${WORK}/merged
                RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "grade merge failed (${rc}):\n${o}${e}")
endif()
if(NOT o MATCHES "the class: 3 submissions, mean 66.7%" OR NOT o MATCHES "merged 3 submissions from 2 folders")
  message(FATAL_ERROR "grade merge printed no class table of three:\n${o}")
endif()
# Byte for byte but the seconds (column 6): the unsharded batch with --jobs 1 writes the batch's order too.
file(READ ${WORK}/merged/gradebook.csv merged)
set(seconds_column "(\n\"[a-z]+\",[^,]*,[^,]*,[^,]*,[^,]*,)[0-9]+,")
string(REGEX REPLACE "${seconds_column}" "\\1S," merged_cut "${merged}")
string(REGEX REPLACE "${seconds_column}" "\\1S," whole_cut "${whole}")
if(NOT merged_cut STREQUAL whole_cut OR merged_cut STREQUAL merged)
  message(FATAL_ERROR "the merged gradebook is not the unsharded one (seconds aside):\n${merged}\nagainst\n${whole}")
endif()
file(READ ${WORK}/merged/index.html index)
if(NOT index MATCHES "<a href=\"ben/report.html\">ben</a>")
  message(FATAL_ERROR "the merged index.html does not link ben's report:\n${index}")
endif()
if(NOT EXISTS ${WORK}/merged/ben/report.html OR NOT EXISTS ${WORK}/merged/cy/results.json)
  message(FATAL_ERROR "the submissions' folders were not copied beside the merged index.html")
endif()

# ---- what is refused, each naming the value and the fix
function(refused what expected)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env} ${GRADER} --recipe ${recipe} grade ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${what} was not refused:\n${o}${e}")
  endif()
  string(FIND "${e}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what}'s error lacks \"${expected}\":\n${e}")
  endif()
endfunction()
set(env --unset=SLURM_ARRAY_TASK_ID)
refused("--shard 3/2" "--shard 3/2: there is no part 3 of 2 (they are 0 to 1): give INDEX/COUNT" --batch ${WORK}/class --out ${WORK}/x --shard 3/2 --unsafe)
refused("--shard a/b" "--shard a/b is not two whole numbers" --batch ${WORK}/class --out ${WORK}/x --shard a/b --unsafe)
refused("--shard without --batch" "--shard and --shard-count split a --batch's class" --submission ${WORK}/class/ada --shard 0/2)
refused("a shard into another's folder" "holds shard 0/2's gradebook, and this is shard 1/2" --batch ${WORK}/class --out ${WORK}/s0 --shard 1/2 --resume --unsafe)
set(env SLURM_ARRAY_TASK_ID=x1 SLURM_ARRAY_TASK_COUNT=2)
refused("SLURM_ARRAY_TASK_ID=x1" "SLURM_ARRAY_TASK_ID=\"x1\" is not a whole number" --batch ${WORK}/class --out ${WORK}/x --unsafe)
set(env --unset=SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX=1)
refused("JOB_COMPLETION_INDEX without a count" "give --shard-count N" --batch ${WORK}/class --out ${WORK}/x --unsafe)
set(env --unset=SLURM_ARRAY_TASK_ID)
refused("a merge missing a shard" "shard 1/2 of the split is not among the folders given" merge ${WORK}/s0 --out ${WORK}/m2)
refused("a merge into a shard" "is one of the shards' folders" merge ${WORK}/s0 ${WORK}/s1 --out ${WORK}/s1)
# A shard cut short: its gradebook lacks cy.
file(READ ${WORK}/s0/gradebook.csv s0)
string(REGEX REPLACE "\n\"cy\"[^\n]*" "" s0 "${s0}")
file(WRITE ${WORK}/s0/gradebook.csv "${s0}")
refused("a merge of a shard cut short" "s0's gradebook is incomplete: shard 0/2 has 1 of its 2 submissions (missing: cy); run that shard again with the same command and --resume" merge ${WORK}/s0 ${WORK}/s1 --out ${WORK}/m3)
message(STATUS "shards, merge, the reference once per input and every refusal as expected")
