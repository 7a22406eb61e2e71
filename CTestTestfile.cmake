# `ctest -R lesson_N` typed here, in the repository root, runs lesson N's checks
# on your lessons/N_name/exercise.cpp, as `./workbook check N` does. CTest reads
# this file from the folder it runs in; the tests themselves live in the build
# that ./workbook makes (build/default; `ctest --test-dir build/default` works too).
if(EXISTS "build/default/CTestTestfile.cmake")
  subdirs("build/default")
else()
  message(SEND_ERROR "there is no build here yet (build/default): run ./workbook check 1 once (it builds "
                     "the workbook, a few minutes the first time), then ctest -R lesson_1 works from this folder")
endif()
