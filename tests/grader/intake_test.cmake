# Issue 20 item 1, end to end: a batch whose submissions hold lesson 1 wherever
# students put it: nested deep in a folder, in a .zip, in a .tar.gz, twice in one
# folder, in an archive holding a symbolic link (refused), and a file that is no
# submission. Each is graded for what it is; the ones not graded say why in
# their "submission layout" item and the gradebook; the skipped file is listed
# in the batch's output; nothing is unpacked beside the submissions.
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DRECIPE=... -DWORK=... -P intake_test.cmake
cmake_minimum_required(VERSION 3.19)
include(${CMAKE_CURRENT_LIST_DIR}/temp_tree.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)
file(REMOVE_RECURSE ${WORK})
set(lesson 1_device_check)
set(solution ${SOURCE}/solutions/${lesson}/exercise.cpp)
set(batch ${WORK}/batch)

file(COPY ${solution} DESTINATION ${batch}/nested/my\ work/2026/lessons/${lesson})
file(WRITE ${batch}/nested/my\ work/2026/lessons/quiz.txt "1. the CPU\n")
# Archives, made from a staging folder outside the batch.
file(COPY ${solution} DESTINATION ${WORK}/stage/zipped/workbook/lessons/${lesson})
file(COPY ${solution} DESTINATION ${WORK}/stage/tarred/lessons/${lesson})
file(MAKE_DIRECTORY ${batch})
execute_process(COMMAND ${CMAKE_COMMAND} -E tar cf ${batch}/zipped.zip --format=zip workbook
                WORKING_DIRECTORY ${WORK}/stage/zipped RESULT_VARIABLE rc1)
execute_process(COMMAND ${CMAKE_COMMAND} -E tar czf ${batch}/tarred.tar.gz lessons
                WORKING_DIRECTORY ${WORK}/stage/tarred RESULT_VARIABLE rc2)
# A symbolic link to the reference, where exercise.cpp should be.
file(MAKE_DIRECTORY ${WORK}/stage/linked/lessons/${lesson})
file(CREATE_LINK ${solution} ${WORK}/stage/linked/lessons/${lesson}/exercise.cpp SYMBOLIC)
execute_process(COMMAND ${CMAKE_COMMAND} -E tar czf ${batch}/linked.tar.gz lessons
                WORKING_DIRECTORY ${WORK}/stage/linked RESULT_VARIABLE rc3)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0 OR NOT rc3 EQUAL 0)
  message(FATAL_ERROR "cannot make the test's archives (${rc1} ${rc2} ${rc3})")
endif()
file(COPY ${solution} DESTINATION ${batch}/twice/lessons/${lesson})
file(COPY ${solution} DESTINATION ${batch}/twice/backup/${lesson})
file(WRITE ${batch}/notes.txt "the class list\n")
file(GLOB_RECURSE before RELATIVE ${batch} LIST_DIRECTORIES true ${batch}/*)

execute_process(COMMAND ${GRADER} grade 1 --batch ${batch} --out ${WORK}/out --timeout 5 --no-timing --jobs 2 --unsafe
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "the batch said:\n${out}\n${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the batch failed (${rc})")
endif()
expect_row(gradebook.csv nested 5 5 passed "")
expect_row(gradebook.csv zipped 5 5 passed "")
expect_row(gradebook.csv tarred 5 5 passed "")
expect_row(gradebook.csv twice 0 5 "not submitted" "lesson 1 not submitted")
expect_row(gradebook.csv linked 0 5 "not submitted" "lesson 1 not submitted")
file(READ ${WORK}/out/gradebook.csv gradebook)
expect_not_in("gradebook.csv" "${gradebook}" "notes")

# The first item of every results.json is the layout, found or not.
foreach(name nested zipped tarred twice linked)
  file(READ ${WORK}/out/${name}/results.json results)
  string(JSON first GET "${results}" tests 0 name)
  string(JSON first_max GET "${results}" tests 0 max_score)
  if(NOT first STREQUAL "submission layout" OR NOT first_max EQUAL 0)
    message(FATAL_ERROR "${name}'s first item is not the submission layout worth 0 points:\n${results}")
  endif()
endforeach()
expect(nested/results.json "found at my work/2026/lessons/1_device_check/exercise.cpp")
expect(nested/results.json "quiz.txt (not graded):\\n1. the CPU")
expect(zipped/results.json "found at zipped.zip: workbook/lessons/1_device_check/exercise.cpp")
expect(tarred/results.json "found at tarred.tar.gz: lessons/1_device_check/exercise.cpp")
expect(twice/results.json "2 files are 1_device_check/exercise.cpp: backup/1_device_check/exercise.cpp and lessons/1_device_check/exercise.cpp")
expect(twice/scoreboard.txt "keep one and submit again")
expect(linked/results.json "linked.tar.gz was refused: the entry \\\"lessons/1_device_check/exercise.cpp\\\" is a symbolic link")
expect(linked/report.html "Submission layout")
expect(twice/junit.xml "<testsuite name=\"submission_layout\" tests=\"1\" failures=\"1\"")
expect(nested/junit.xml "<testsuite name=\"submission_layout\" tests=\"1\" failures=\"0\"")
# What is not a submission is listed where the instructor reads, with the reason.
expect_in("the batch's output" "${out}" "left out: notes.txt (a file that is not a .zip, .tar.gz or .tgz submission)")
expect_in("the batch's progress" "${err}" "skipped in --batch: notes.txt")
# Nothing unpacked beside the submissions: the batch folder is as it was.
file(GLOB_RECURSE after RELATIVE ${batch} LIST_DIRECTORIES true ${batch}/*)
if(NOT after STREQUAL before)
  message(FATAL_ERROR "the batch folder changed:\nbefore: ${before}\nafter: ${after}")
endif()
file(REMOVE_RECURSE ${WORK})
