# workbook_temp_tree(ROOT FOLDER...): a student's tree of its own for the
# end-to-end grader tests, so that `check`, `watch` and `hint` work on files
# the test controls, never on the real lessons/: ROOT/lessons/FOLDER holds the
# lesson's exercise.h and lesson.json (copied from SOURCE) and ROOT/recipe.json
# is the build's recipe (RECIPE) with ROOT as its source tree, ROOT/build and
# ROOT/student as its build folders, and only these lessons. The checkers,
# reference runners and glue stay the build's. Put each lesson's exercise.cpp
# in ROOT/lessons/FOLDER yourself; pass --recipe ROOT/recipe.json to the grader.
function(workbook_temp_tree root)
  file(REMOVE_RECURSE ${root})
  file(READ ${RECIPE} recipe)
  string(JSON count LENGTH "${recipe}" lessons)
  set(kept "")
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON lesson GET "${recipe}" lessons ${i})
    string(JSON folder GET "${lesson}" folder)
    list(FIND ARGN "${folder}" wanted)
    if(NOT wanted EQUAL -1)
      if(NOT kept STREQUAL "")
        string(APPEND kept ",")
      endif()
      string(APPEND kept "${lesson}")
      file(MAKE_DIRECTORY ${root}/lessons/${folder})
      file(COPY ${SOURCE}/lessons/${folder}/exercise.h ${SOURCE}/lessons/${folder}/lesson.json
           DESTINATION ${root}/lessons/${folder})
    endif()
  endforeach()
  string(JSON recipe SET "${recipe}" lessons "[${kept}]")
  string(JSON recipe SET "${recipe}" source_dir "\"${root}\"")
  string(JSON recipe SET "${recipe}" build_dir "\"${root}/build\"")
  string(JSON recipe SET "${recipe}" student_dir "\"${root}/student\"")
  file(WRITE ${root}/recipe.json "${recipe}")
endfunction()

# solution_with(FOLDER FIND REPLACE OUT): writes to OUT the lesson's reference
# solution with FIND (which must be there) replaced by REPLACE: a student's
# exercise.cpp with one mistake.
function(solution_with folder find replace out)
  file(READ ${SOURCE}/solutions/${folder}/exercise.cpp text)
  string(FIND "${text}" "${find}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "solutions/${folder}/exercise.cpp no longer holds \"${find}\": update this test")
  endif()
  string(REPLACE "${find}" "${replace}" text "${text}")
  file(WRITE ${out} "${text}")
endfunction()

# expect_in(WHAT TEXT PATTERN): fails the test unless TEXT (named WHAT in the message) holds PATTERN.
function(expect_in what text pattern)
  string(FIND "${text}" "${pattern}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${what} lacks \"${pattern}\":\n${text}")
  endif()
endfunction()

# expect_not_in(WHAT TEXT PATTERN): fails the test when TEXT holds PATTERN.
function(expect_not_in what text pattern)
  string(FIND "${text}" "${pattern}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${what} holds \"${pattern}\", which it must not:\n${text}")
  endif()
endfunction()
