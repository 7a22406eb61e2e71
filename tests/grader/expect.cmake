# expect(FILE TEXT): fails the end-to-end grader test unless ${WORK}/out/FILE
# holds TEXT (shared by batch_test.cmake and hostile_test.cmake).
function(expect file pattern)
  file(READ ${WORK}/out/${file} text)
  string(FIND "${text}" "${pattern}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${file} lacks \"${pattern}\":\n${text}")
  endif()
endfunction()

# expect_row(FILE NAME POINTS MAX STATUS [PROBLEMS]): FILE (a gradebook.csv of a
# batch of one lesson) has NAME's row with POINTS of MAX, the lesson's STATUS
# and (when given) the problems column PROBLEMS; POINTS may be a regular expression.
function(expect_row file name points max status)
  file(READ ${WORK}/out/${file} text)
  set(problems "[^\"]*")
  if(ARGC GREATER 5)
    set(problems "${ARGV5}")
  endif()
  if(NOT text MATCHES "\n\"${name}\",\"?(${points})\"?,\"?${max}\"?,\"?[0-9.]+\"?,\"?[0-9]+\"?,\"?[0-9]+\"?,\"${problems}\",\"?(${points})\"?,\"${status}\"\n")
    message(FATAL_ERROR "${file} lacks the row of ${name}: ${points} of ${max} points, ${status}, problems \"${problems}\":\n${text}")
  endif()
endfunction()
