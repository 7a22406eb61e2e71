# skip_unless_others_reach(): for a test that runs the grader as another user
# (nobody): in a clone only its owner can enter (a private folder), that user
# cannot even start it, so say so and stop: CTest marks the test skipped
# (SKIP_REGULAR_EXPRESSION "skipped: "). The sandbox's own uid needs no such
# skip: the grader copies the headers the compiler needs and shares
# libtiny.so (others_reach() below tells the tests which case they are in).
macro(skip_unless_others_reach)
  execute_process(COMMAND id -u OUTPUT_VARIABLE _uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_uid STREQUAL "0")
    execute_process(COMMAND setpriv --reuid=65534 --regid=65534 --clear-groups test -x ${GRADER}
                    RESULT_VARIABLE _unreachable)
    if(NOT _unreachable EQUAL 0)
      message("skipped: the sandbox's own uid cannot reach ${GRADER} (a checkout in a private folder); "
              "run this test from a checkout other users may enter")
      return()
    endif()
  endif()
endmacro()

# others_reach(VAR): sets VAR to TRUE when, as root, the sandbox's own uid
# cannot reach the build (a private checkout), FALSE otherwise.
macro(others_reach var)
  set(${var} FALSE)
  execute_process(COMMAND id -u OUTPUT_VARIABLE _uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_uid STREQUAL "0")
    execute_process(COMMAND setpriv --reuid=65534 --regid=65534 --clear-groups test -x ${GRADER}
                    RESULT_VARIABLE _unreachable)
    if(NOT _unreachable EQUAL 0)
      set(${var} TRUE)
      message(STATUS "a private checkout: the sandbox's own uid cannot reach ${GRADER}")
    endif()
  endif()
endmacro()

# sandbox_tmp_root(VAR NAME): the graders' temporary folder for a test (to be
# found empty afterwards): ${WORK}/tmp, or, in a private checkout, a folder in
# /tmp where the sandbox's uid reaches it (the runs load libtiny.so from there).
macro(sandbox_tmp_root var name)
  others_reach(_private)
  set(${var} ${WORK}/tmp)
  if(_private)
    string(RANDOM LENGTH 12 ALPHABET abcdefghijklmnopqrstuvwxyz _tag)
    set(${var} /tmp/workbook-${name}-tmp-${_tag})
  endif()
endmacro()
