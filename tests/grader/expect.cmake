# expect(FILE TEXT): fails the end-to-end grader test unless ${WORK}/out/FILE
# holds TEXT (shared by batch_test.cmake and hostile_test.cmake).
function(expect file pattern)
  file(READ ${WORK}/out/${file} text)
  string(FIND "${text}" "${pattern}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${file} lacks \"${pattern}\":\n${text}")
  endif()
endfunction()
