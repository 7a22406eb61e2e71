# A grade that cannot be forged or blown up (issue 19), end to end: lesson 1
# submissions beside an honest one. One resets the GPU counters the
# checks grade, one answers wrongly and rewrites its results on disk from an
# atexit hook (issue 19's attack: that scored full marks), one ends the program
# itself after writing forged results, and one fails to compile on a 1 MiB
# identifier (a 100 MB one made a 1.0 GB results.json). Four go for the
# channel the runner sends its results through (a pipe it inherits as
# descriptor 3, with no name anywhere): one looks for it by the names a channel
# had or could have (results.pipe, from a static initializer, and any FIFO
# near its folder, from a program it starts) and, having written forged
# results there, ends the runner before it sends its own; one sends wrong
# results in place of the runner's; one writes forged
# results on /proc/self/fd/3 (or fd 3) while its answer is wrong; one writes garbage on
# the descriptor from a static initializer. Three change the emulated GPUs
# from a static initializer (below). None scores what it did not earn.
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DWORK=... -P forged_results_test.cmake
file(REMOVE_RECURSE ${WORK})
set(lesson 1_device_check)
file(READ ${SOURCE}/solutions/${lesson}/exercise.cpp solution)
set(count_body "return tiny::cuda::is_available() ? tiny::cuda::device_count() : 0;")
string(FIND "${solution}" "${count_body}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "solutions/${lesson}/exercise.cpp no longer holds \"${count_body}\": update this test")
endif()
set(prelude "#include <dirent.h>\n#include <fcntl.h>\n#include <sys/stat.h>\n#include <unistd.h>\n#include <cstdio>\n#include <cstdlib>\n#include <string>\n")
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
# Attacks on the results channel: helpers put before the solution's text.
set(channel_prelude [=[
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "tiny/tiny.h"

namespace {
std::string forged_text() {
  return "{\"_status\": \"ok\", \"count\": " +
         std::to_string(tiny::cuda::is_available() ? tiny::cuda::device_count() : 0) + ", \"_tensors\": []}";
}
void write_forged(int fd) {
  const std::string text = forged_text();
  (void)!write(fd, text.data(), text.size());
}
// The channel as a FIFO in the run's folder, by its name (the runner removed
// it once it had opened it, but a static initializer comes first).
const int by_name = open("results.pipe", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
}  // namespace
]=])
function(channel_attack name body)
  submission(${name} "${body}")
  file(READ ${WORK}/submissions/${name}/${lesson}/exercise.cpp text)
  file(WRITE ${WORK}/submissions/${name}/${lesson}/exercise.cpp "${channel_prelude}${text}")
endfunction()
channel_attack(channel_by_name [=[
  if (by_name >= 0) write_forged(by_name);
  // A program of its own writes the forged results into every FIFO it finds near its folder.
  const std::string command = "for f in $(find . .. /tmp -maxdepth 2 -type p 2>/dev/null); do printf '%s' '" +
                              forged_text() + "' > $f; done";
  (void)!std::system(command.c_str());
  _exit(0);  // the runner never sends its own results
]=])
# Forged results sent in place of the runner's: believed only as far as they are right.
channel_attack(forges_and_leaves [=[
  const std::string wrong = "{\"_status\": \"ok\", \"count\": 42, \"_tensors\": []}";
  (void)!write(3, wrong.data(), wrong.size());  // the descriptor the runner inherited
  _exit(0);
]=])
channel_attack(forges_on_descriptor [=[
  // By its name in /proc (the pipe is the checker's, mode 0600: another uid cannot open it), else as it is.
  const int fd = open("/proc/self/fd/3", O_WRONLY);
  write_forged(fd >= 0 ? fd : 3);
  return 42;
]=])
submission(garbage_first "${count_body}")
file(APPEND ${WORK}/submissions/garbage_first/${lesson}/exercise.cpp [=[
namespace {
[[maybe_unused]] const bool garbage = [] {
  if (const char* fd = std::getenv("WORKBOOK_RESULTS_FD")) (void)!write(std::atoi(fd), "garbage", 7);
  return true;
}();
}  // namespace
]=])
# Two choose the GPU the emulator models, from a static initializer (before
# the emulator reads TINY_EMULATED_GPU_MODEL): one names the H200, one a model
# file of its own that calls itself h100-sxm with ten times the memory
# bandwidth (lesson 5's step_speed passed so, and lesson 9's fixed_program).
# Neither run is believed, whatever it computed; nor one that changes
# TINY_EMULATED_GPUS.
function(chooses_its_gpu name setup)
  submission(${name} "${count_body}")
  file(APPEND ${WORK}/submissions/${name}/${lesson}/exercise.cpp "
namespace {
[[maybe_unused]] const bool chosen = [] {
${setup}
  return true;
}();
}  // namespace
")
endfunction()
chooses_its_gpu(chooses_its_gpu_by_name [=[  setenv("TINY_EMULATED_GPU_MODEL", "h200", 1);]=])
file(READ ${SOURCE}/framework/src/gpu/model/gpu_models.json models)
string(JSON h100 GET "${models}" models h100-sxm)
string(JSON bandwidth GET "${h100}" memory_bandwidth_gbps)
math(EXPR bandwidth "${bandwidth} * 10")
string(JSON h100 SET "${h100}" memory_bandwidth_gbps ${bandwidth})
string(JSON defaults GET "${models}" defaults)
set(fast_model "{\"defaults\": ${defaults}, \"models\": {\"h100-sxm\": ${h100}}}")
string(CONFIGURE [=[
  if (std::FILE* f = std::fopen("fast_gpu.json", "w")) {
    std::fputs(R"json(@fast_model@)json", f);
    std::fclose(f);
  }
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) != nullptr) setenv("TINY_EMULATED_GPU_MODEL", (std::string(cwd) + "/fast_gpu.json").c_str(), 1);]=]
       by_file @ONLY)
chooses_its_gpu(chooses_its_gpu_by_file "${by_file}")
chooses_its_gpu(chooses_its_gpu_count [=[  setenv("TINY_EMULATED_GPUS", "3", 1);]=])

string(REPEAT "x" 1048576 identifier)
file(MAKE_DIRECTORY ${WORK}/submissions/huge_identifier/${lesson})
file(WRITE ${WORK}/submissions/huge_identifier/${lesson}/exercise.cpp "int f() { return ${identifier}; }\n")

# Each submission on its own (--submission), as a student's own grade would be.
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)
foreach(name complete resets_counters rewrites_results_at_exit exits_itself channel_by_name forges_and_leaves
             forges_on_descriptor garbage_first huge_identifier chooses_its_gpu_by_name chooses_its_gpu_by_file
             chooses_its_gpu_count)
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
# The channel has no name: the forgery never reaches it, and the runner, ended, sent nothing.
expect(channel_by_name/scoreboard.txt "lesson 1: in progress")
expect(channel_by_name/results.json "\"score\": 1.0")
expect(channel_by_name/results.json "finished without sending its results")
expect(forges_and_leaves/results.json "\"score\": 1.0")
expect(forges_and_leaves/results.json "count_devices() on a machine without a GPU returned 42, expected 0")
# Written on the descriptor beside the runner's results: not one message, refused.
expect(forges_on_descriptor/results.json "\"score\": 1.0")
expect(forges_on_descriptor/results.json "sent results that cannot be read (the runner sends one message")
# Garbage before the runner's results spoils every check, describe_device's too.
expect(garbage_first/scoreboard.txt "lesson 1: in progress")
expect(garbage_first/results.json "\"score\": 0.0")
expect(garbage_first/results.json "sent results that cannot be read")

# A run on another modelled GPU, or on more GPUs, is not believed: each check that ran one fails.
foreach(name chooses_its_gpu_by_name chooses_its_gpu_by_file chooses_its_gpu_count)
  expect(${name}/scoreboard.txt "lesson 1: in progress")
endforeach()
expect(chooses_its_gpu_by_name/results.json
       "your code ran on an emulated GPU modelled on another GPU than the grader set (yours: h200 ")
expect(chooses_its_gpu_by_file/results.json
       "your code ran on an emulated GPU modelled on another GPU than the grader set (yours: h100-sxm ")
expect(chooses_its_gpu_count/results.json "your code ran on 3 GPUs where the grader set 2 (TINY_EMULATED_GPUS)")

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
