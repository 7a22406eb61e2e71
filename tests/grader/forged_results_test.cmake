# A grade that cannot be forged or blown up (issue 19), end to end: lesson 1
# submissions beside an honest one. One resets the GPU counters the
# checks grade, one answers wrongly and rewrites its results on disk from an
# atexit hook (issue 19's attack: that scored full marks), one ends the program
# itself after writing forged results, and one fails to compile on a 1 MiB
# identifier (a 100 MB one made a 1.0 GB results.json).
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DWORK=... -P forged_results_test.cmake
file(REMOVE_RECURSE ${WORK})
set(lesson 1_device_check)
file(READ ${SOURCE}/solutions/${lesson}/exercise.cpp solution)
set(count_body "return tiny::cuda::is_available() ? tiny::cuda::device_count() : 0;")
string(FIND "${solution}" "${count_body}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "solutions/${lesson}/exercise.cpp no longer holds \"${count_body}\": update this test")
endif()
set(prelude "#include <cstdio>\n#include <cstdlib>\n")
# What a runner's results said before issue 19, forged with the right count.
set(forge [=[
  std::atexit([] {
    if (FILE* f = std::fopen("out/values.json", "w")) {
      std::fprintf(f, "{\"_status\": \"ok\", \"count\": %d, \"_tensors\": []}\n",
                   tiny::cuda::is_available() ? tiny::cuda::device_count() : 0);
      std::fclose(f);
    }
  });
]=])

function(submission name body)
  file(MAKE_DIRECTORY ${WORK}/submissions/${name}/${lesson})
  string(REPLACE "${count_body}" "${body}" text "${solution}")
  file(WRITE ${WORK}/submissions/${name}/${lesson}/exercise.cpp "${prelude}${text}")
endfunction()
submission(complete "${count_body}")
submission(resets_counters "
  if (tiny::cuda::is_available()) {
    tiny::cuda::reset_device_counters(0);
    tiny::cuda::reset_peak_memory_stats(0);
  }
  ${count_body}")
submission(rewrites_results_at_exit "${forge}  return 42;")
submission(exits_itself "${forge}  std::exit(0);")
string(REPEAT "x" 1048576 identifier)
file(MAKE_DIRECTORY ${WORK}/submissions/huge_identifier/${lesson})
file(WRITE ${WORK}/submissions/huge_identifier/${lesson}/exercise.cpp "int f() { return ${identifier}; }\n")

# Each submission on its own (--submission), as a student's own grade would be.
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)
foreach(name complete resets_counters rewrites_results_at_exit exits_itself huge_identifier)
  file(MAKE_DIRECTORY ${WORK}/out/${name})
  execute_process(COMMAND ${GRADER} grade 1 --submission ${WORK}/submissions/${name} --timeout 20 --no-timing
                          --json ${WORK}/out/${name}/results.json --html ${WORK}/out/${name}/report.html
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "grading ${name} failed (${rc}):\n${out}\n${err}")
  endif()
  file(WRITE ${WORK}/out/${name}/scoreboard.txt "${out}")
endforeach()

expect(complete/results.json "\"score\": 5.0")
# Each attack fails every check that calls count_devices with a GPU; describe_device does not, and passes.
foreach(name resets_counters rewrites_results_at_exit exits_itself)
  expect(${name}/scoreboard.txt "lesson 1: in progress")
  expect(${name}/results.json "\"score\": 1.0")
endforeach()
string(CONCAT refused "count_devices() with 1 GPU: your code reset the GPU counters "
       "(tiny::cuda::reset_device_counters) and the peak memory statistics (tiny::cuda::reset_peak_memory_stats) "
       "during a graded run: the checks count the work your code does, so they cannot be reset")
expect(resets_counters/results.json "${refused}")
expect(rewrites_results_at_exit/results.json "count_devices() on a machine without a GPU returned 42, expected 0")
expect(exits_itself/results.json "finished without sending its results")

# The compiler quotes the identifier in every error: each message is cut, and so is results.json.
expect(huge_identifier/scoreboard.txt "lesson 1: does not compile")
expect(huge_identifier/results.json "bytes cut)")
file(SIZE ${WORK}/out/huge_identifier/results.json size)
if(size GREATER 262144)
  message(FATAL_ERROR "huge_identifier/results.json is ${size} bytes: a student's compiler errors must be cut")
endif()
file(SIZE ${WORK}/out/huge_identifier/report.html size)
if(size GREATER 262144)
  message(FATAL_ERROR "huge_identifier/report.html is ${size} bytes: a student's compiler errors must be cut")
endif()
file(REMOVE_RECURSE ${WORK})
