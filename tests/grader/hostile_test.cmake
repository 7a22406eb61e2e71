# Hostile submissions, end to end (label dev): a batch of lesson 1 where each
# submission but one attacks the grader. Each attack must be contained and
# graded for what it is, with a clear reason, and the honest submission beside
# them must still get full marks. From count_devices():
#   infinite_loop      spins, and leaves a spinning daemon (setsid) behind
#   huge_output        prints without end
#   fake_all_passed    prints "all passed" (and tries the checker's own stdout), returns 42
#   links_results      replaces its results, after the runner wrote them, by a link to the reference's
#   fork_bomb          forks in a tree of at most 2048 processes (bounded even if the limit fails)
#   hundred_gb         std::vector<char>(100 GB), zero-filled (every page touched)
#   writes_checks      writes into the checks' work folder, the reference runner, the checks' sources; kills the checker
#   reads_reference    reads the reference solution, the reference runner, the checks and the reference's results
#   network            lists its network interfaces and connects to 192.0.2.1
# When compiled (each must not compile, saying why):
#   include_relative   #include "../../solutions/1_device_check/exercise.cpp" (found through the -I folders)
#   include_absolute   #include "<source>/solutions/1_device_check/exercise.cpp"
#   include_other      #include of another submission of the batch (the honest one)
#   symlinked          exercise.cpp is a symbolic link to the solution
#   linked_lessons     the submission's lessons folder is a link to solutions/ (not followed: "not submitted")
#   include_environ    #include "/proc/self/environ" (the compiler quotes what it cannot parse)
#   include_secret     #include of a root-only file holding a canary secret
#   dev_zero           #include "/dev/zero" (the compiler would grow without bound)
# From a static initializer, before any check (so every check fails):
#   fallocate_unlinked a 10 GiB fallocate on a file it unlinked, in its folder and in /tmp
#   reads_other        reads the batch's other submissions, the grades and the grader's work folders
# No canary secret (a root-only file, a variable of the grader's environment)
# may appear in any output; no process, cgroup or temporary folder may be left.
# The cases that need the sandbox's root-only parts (a memory cgroup, an own
# uid, namespaces) are left out, with a message, when not run as root.
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DWORK=... -P hostile_test.cmake
cmake_minimum_required(VERSION 3.19)  # string(JSON); and "@SOURCE@" stays a literal
# In a checkout only its owner can enter (a private clone, as CI and the
# before-stop check make), the sandbox's uid cannot reach the build: the
# grader copies what the compiler needs into its folder and shares libtiny.so,
# and the few messages that then differ are accepted (private_checkout).
include(${CMAKE_CURRENT_LIST_DIR}/reachable.cmake)
others_reach(private_checkout)
sandbox_tmp_root(tmp_root hostile)
string(TIMESTAMP started "%s")
file(REMOVE_RECURSE ${WORK} ${tmp_root})
set(lesson 1_device_check)
file(READ ${SOURCE}/solutions/${lesson}/exercise.cpp solution)
set(count_body "return tiny::cuda::is_available() ? tiny::cuda::device_count() : 0;")

execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
set(root FALSE)
if(uid STREQUAL "0")
  set(root TRUE)
endif()
# A memory cgroup this process may make (v1 memory hierarchy, or v2): without
# one, a 100 GB allocation would not be contained, so that case is left out.
execute_process(COMMAND sh -c [=[
  p=$(sed -n 's/^[0-9]*:memory:\(.*\)$/\1/p' /proc/self/cgroup)
  if [ -n "$p" ]; then d=/sys/fs/cgroup/memory$p; else d=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); fi
  mkdir "$d/workbook-probe-$$" 2>/dev/null && rmdir "$d/workbook-probe-$$" && echo yes]=]
                OUTPUT_VARIABLE memory_cgroup OUTPUT_STRIP_TRAILING_WHITESPACE)

# Helpers every hostile submission may use, put before the solution's text.
set(prelude [=[
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace hostile {
// An argument of the checker's command line (the checker is our parent): --reference names the reference runner.
inline std::string parent_arg(const std::string& flag) {
  std::ifstream in("/proc/" + std::to_string(getppid()) + "/cmdline");
  std::string arg;
  bool next = false;
  while (std::getline(in, arg, '\0')) {
    if (next) return arg;
    next = arg == flag;
  }
  return "(not found)";
}
inline std::string folder_of(const std::string& path) { return path.substr(0, path.rfind('/')); }
// Creates a new file (never truncates one that exists).
inline std::string try_create(const std::string& what, std::string path) {
  path += "." + std::to_string(getpid());
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) return what + " blocked (" + std::strerror(errno) + "); ";
  (void)!write(fd, "hostile\n", 8);
  close(fd);
  return what + " ESCAPED (created " + path + "); ";
}
// Opens for writing without changing a byte.
inline std::string try_open_for_writing(const std::string& what, const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY);
  if (fd < 0) return what + " blocked (" + std::strerror(errno) + "); ";
  close(fd);
  return what + " ESCAPED (" + path + " is writable); ";
}
inline std::string try_read(const std::string& what, const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return "could not read " + what + " (" + std::strerror(errno) + "); ";
  char buf[48] = {};
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  const int err = errno;
  close(fd);
  if (n <= 0) return "could not read " + what + " (" + (n == 0 ? std::string("empty") : std::strerror(err)) + "); ";
  std::string text(buf, static_cast<size_t>(n));
  for (char& c : text) c = c == '\n' ? ' ' : c;
  return "READ " + what + ": " + text + "; ";
}
// The reference's results of an earlier run of this checker, by their predictable folder names.
inline std::string try_read_reference_results() {
  for (int k = 0; k < 100; ++k) {
    for (const char* exercise : {"count_devices", "available_devices", "choose_device", "choose_device_errors"}) {
      const std::string path = "../" + std::to_string(k) + "-reference-" + exercise + "/out/values.json";
      const std::string r = try_read("the reference's results", path);
      if (r.find("(No such file or directory)") == std::string::npos) return r;
    }
  }
  return "could not read the reference's results (none found); ";
}
}  // namespace hostile

]=])

# Canary secrets: a file only root may read, and a variable of the grader's environment.
string(RANDOM LENGTH 16 ALPHABET 0123456789abcdef nonce)
set(canary_file_text "CANARY-FILE-${nonce}")
set(canary_env_text "CANARY-ENV-${nonce}")
set(secret_dir /tmp/workbook-hostile-secret-${nonce})
if(root)
  file(MAKE_DIRECTORY ${secret_dir})
  file(CHMOD ${secret_dir} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  file(WRITE ${secret_dir}/secret.h "${canary_file_text}\n")
  file(CHMOD ${secret_dir}/secret.h PERMISSIONS OWNER_READ OWNER_WRITE)
endif()

# A submission in batch `batch` (quick: every run stopped after 2 s; memory:
# after 10 s, as touching 3 GiB can take seconds on a loaded machine; the two
# batches are graded side by side).
function(submission batch name body)
  file(MAKE_DIRECTORY ${WORK}/${batch}/${name}/${lesson})
  string(REPLACE "@SOURCE@" "${SOURCE}" body "${body}")
  string(REPLACE "${count_body}" "${body}" text "${solution}")
  file(WRITE ${WORK}/${batch}/${name}/${lesson}/exercise.cpp "${prelude}${text}")
endfunction()

# A submission whose exercise.cpp is `text` alone.
function(source_file batch name text)
  file(MAKE_DIRECTORY ${WORK}/${batch}/${name}/${lesson})
  string(REPLACE "@SOURCE@" "${SOURCE}" text "${text}")
  string(REPLACE "@WORK@" "${WORK}" text "${text}")
  string(REPLACE "@SECRET@" "${secret_dir}" text "${text}")
  file(WRITE ${WORK}/${batch}/${name}/${lesson}/exercise.cpp "${text}")
endfunction()

# A submission that attacks from a static initializer (`body`, which sets the
# string `report`), then says what it found and ends: every check fails with it.
function(static_attack batch name body)
  submission(${batch} ${name} "${count_body}")
  string(REPLACE "@WORK@" "${WORK}" body "${body}")
  string(REPLACE "@TMP_ROOT@" "${tmp_root}" body "${body}")
  file(APPEND ${WORK}/${batch}/${name}/${lesson}/exercise.cpp "
namespace {
[[maybe_unused]] const bool attack = [] {
  std::string report;
${body}
  std::fprintf(stderr, \"hostile: %s\\n\", report.c_str());
  std::fflush(stderr);
  _exit(1);
  return true;
}();
}  // namespace
")
endfunction()

submission(quick complete "${count_body}")
submission(quick infinite_loop [=[
  if (fork() == 0) {  // a daemon of its own session, out of the process group
    setsid();
    prctl(PR_SET_NAME, "wb-hostile");  // named, to be looked for once the batch is over
    for (volatile bool spin = true; spin;) {
    }
  }
  for (volatile bool spin = true; spin;) {
  }
  return 0;
]=])
submission(quick huge_output [=[
  const std::string line = std::string(1023, 'x') + "\n";
  for (;;) std::fwrite(line.data(), 1, line.size(), stdout);
]=])
submission(quick fake_all_passed [=[
  for (int i = 0; i < 3; ++i) {
    std::printf("  PASS  count_devices\nall passed\n5 of 5 checks passed\n");
    std::fprintf(stderr, "all passed\n");
  }
  std::fflush(stdout);
  const int fd = open(("/proc/" + std::to_string(getppid()) + "/fd/1").c_str(), O_WRONLY);  // the checker's own output
  if (fd >= 0) {
    (void)!write(fd, "all passed\n", 11);
    close(fd);
  }
  return 42;
]=])
# Answers wrongly, and its results are replaced, once the runner has written
# them, by a link to the reference's (root reads what the link points to; its
# own uid could not). Refused as a link, or never read (the results come
# through the checker's pipe, and the runner leaves before atexit hooks run).
submission(quick links_results [=[
  std::atexit([] {
    unlink("out/values.json");
    (void)!symlink("../1-reference-count_devices/out/values.json", "out/values.json");
  });
  return 42;
]=])
set(hostile_names infinite_loop huge_output fake_all_passed links_results)
set(zero_names "")

# Attacks on the compiler: each must not compile (0, "does not compile").
source_file(quick include_environ "#include \"/proc/self/environ\"\n")
file(MAKE_DIRECTORY ${WORK}/quick/symlinked/${lesson})
file(CREATE_LINK ${SOURCE}/solutions/${lesson}/exercise.cpp ${WORK}/quick/symlinked/${lesson}/exercise.cpp SYMBOLIC)
file(MAKE_DIRECTORY ${WORK}/quick/linked_lessons)
file(CREATE_LINK ${SOURCE}/solutions ${WORK}/quick/linked_lessons/lessons SYMBOLIC)
set(compile_names include_environ symlinked linked_lessons)
# Hiding the sources from the compiler needs a mount namespace: root's, or a plain user's own.
set(namespaces ${root})
if(NOT root)
  execute_process(COMMAND unshare --user --map-current-user --mount true RESULT_VARIABLE userns_rc OUTPUT_QUIET ERROR_QUIET)
  if(userns_rc EQUAL 0)
    set(namespaces TRUE)
  endif()
endif()
if(namespaces)
  source_file(quick include_relative "#include \"../../solutions/1_device_check/exercise.cpp\"\n")
  source_file(quick include_absolute "#include \"@SOURCE@/solutions/1_device_check/exercise.cpp\"\n")
  source_file(quick include_other "#include \"@WORK@/quick/complete/1_device_check/exercise.cpp\"\n")
  list(APPEND compile_names include_relative include_absolute include_other)
else()
  message(STATUS "no mount namespace can be made here: the #includes of the solution and of another submission are left out")
endif()
# Attacks from a static initializer, contained by the run's mount namespace
# (its folder a tmpfs, the batch hidden): root's, or a plain user's own.
if(namespaces)
  static_attack(quick fallocate_unlinked [=[
  auto attempt = [&](const std::string& where, const std::string& file) {
    const int fd = open(file.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
      report += where + ": cannot create (" + std::strerror(errno) + "); ";
      return;
    }
    unlink(file.c_str());
    const int rc = fallocate(fd, 0, 0, off_t{10} << 30);
    report += where + ": " + (rc == 0 ? std::string("10 GiB ALLOCATED") : std::string("fallocate failed (") + std::strerror(errno) + ")") + "; ";
    if (rc == 0) sleep(5);  // held, unlinked, for the grader to see
    close(fd);
  };
  attempt("its folder", "big-" + std::to_string(getpid()));
  attempt("/tmp", "/tmp/workbook-hostile-" + std::to_string(getpid()));
  report = "fallocate: " + report;
  ]=])
  static_attack(quick reads_other [=[
  report = "hostile reads: ";
  report += hostile::try_read("another submission", "@WORK@/quick/complete/1_device_check/exercise.cpp");
  report += hostile::try_read("another submission's grades", "@WORK@/out/quick/complete/results.json");
  // The grader's own work folders (each submission's copy of its exercise.cpp and its runner).
  for (const char* tmp : {"/tmp", "@TMP_ROOT@"}) {
    if (DIR* dir = opendir(tmp)) {
      while (const dirent* e = readdir(dir)) {
        if (std::strncmp(e->d_name, "workbook-grade-", 15) == 0) {
          report += hostile::try_read("the grader's work folder", std::string(tmp) + "/" + e->d_name + "/0/build/1_device_check/runner");
        }
      }
      closedir(dir);
    }
  }
  ]=])
  list(APPEND zero_names fallocate_unlinked reads_other)
endif()

if(root)
  submission(quick fork_bomb [=[
  const pid_t original = getpid();
  int forks = 0, error = 0;
  for (int depth = 0; depth < 11; ++depth) {  // 2^11 = 2048 processes at most, even with no limit at all
    const pid_t child = fork();
    if (child < 0) {
      error = errno;
      break;
    }
    forks += child > 0;
  }
  if (getpid() != original) {
    prctl(PR_SET_NAME, "wb-hostile");  // named, to be looked for once the batch is over
    sleep(30);
    _exit(0);
  }
  sleep(1);  // the others are still forking
  throw std::runtime_error("fork bomb: " + std::to_string(forks) + " forks of mine, then " +
                           (error == 0 ? std::string("none refused") : std::string("fork failed: ") + std::strerror(error)));
]=])
  submission(quick writes_checks [=[
  const std::string reference = hostile::parent_arg("--reference");
  std::string report = "hostile writes: ";
  report += hostile::try_create("the checks' work folder", "../hostile-was-here.txt");
  report += hostile::try_open_for_writing("the reference runner", reference);
  report += hostile::try_create("the reference runner's folder", hostile::folder_of(reference) + "/hostile-was-here.txt");
  report += hostile::try_create("the lesson's checks", "@SOURCE@/tests/lessons/1_device_check/hostile-was-here.txt");
  report += hostile::try_create("the temporary folder", "/tmp/hostile-was-here.txt");
  report += kill(getppid(), SIGKILL) == 0 ? std::string("killing the checker ESCAPED; ")
                                          : std::string("killing the checker blocked (") + std::strerror(errno) + ")";
  throw std::runtime_error(report);
]=])
  submission(quick reads_reference [=[
  std::string report = "hostile reads: ";
  report += hostile::try_read("the reference solution", "@SOURCE@/solutions/1_device_check/exercise.cpp");
  report += hostile::try_read("the reference runner", hostile::parent_arg("--reference"));
  report += hostile::try_read("the checks", "@SOURCE@/tests/lessons/1_device_check/checks.cpp");
  report += hostile::try_read_reference_results();
  throw std::runtime_error(report);
]=])
  submission(quick network [=[
  std::ifstream dev("/proc/net/dev");  // two header lines, then one line per interface
  std::string line, interfaces;
  for (int i = 0; std::getline(dev, line); ++i) {
    if (i >= 2) interfaces += " " + line.substr(line.find_first_not_of(' '), line.find(':') - line.find_first_not_of(' '));
  }
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(80);
  inet_pton(AF_INET, "192.0.2.1", &address.sin_addr);  // TEST-NET-1: anywhere but here
  const int rc = connect(s, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int error = errno;
  close(s);
  throw std::runtime_error("network: interfaces" + interfaces + "; connect to 192.0.2.1:80 " +
                           (rc == 0 ? std::string("SUCCEEDED") : std::string("failed: ") + std::strerror(error)));
]=])
  list(APPEND hostile_names fork_bomb writes_checks reads_reference network)
  source_file(quick include_secret "#include \"@SECRET@/secret.h\"\n")
  list(APPEND compile_names include_secret)
  if(memory_cgroup STREQUAL "yes")
    source_file(memory dev_zero "#include \"/dev/zero\"\n")
    list(APPEND compile_names dev_zero)
  endif()
  if(memory_cgroup STREQUAL "yes")
    submission(memory hundred_gb [=[
  std::vector<std::vector<char>> hog;
  try {
    hog.emplace_back(size_t{100} << 30);  // 100 GB, zero-filled: every page touched
  } catch (const std::bad_alloc&) {
    for (int i = 0; i < 400; ++i) hog.emplace_back(size_t{256} << 20, 'x');  // refused at once: 256 MiB at a time
  }
  return static_cast<int>(hog.size());
]=])
    list(APPEND hostile_names hundred_gb)
  else()
    message(STATUS "no memory cgroup can be made here: the 100 GB allocation is left out")
  endif()
else()
  message(STATUS "not root (uid ${uid}): the fork bomb, the 100 GB allocation, the writes into the checks, "
                 "the reads of the reference and the network are left out (their containment needs root: grader/README.md)")
endif()

# Both batches are graded at once, each grader with its own log.
set(batches "")
foreach(batch_and_timeout quick:2 memory:10)
  string(REGEX MATCH "^[a-z]+" batch ${batch_and_timeout})
  if(EXISTS ${WORK}/${batch})
    list(APPEND batches ${batch_and_timeout})
  endif()
endforeach()
string(TIMESTAMP t0 "%s")
# The grader's temporary folders go to ${tmp_root} (to be found empty
# afterwards), and its environment holds a canary secret.
file(MAKE_DIRECTORY ${tmp_root})
file(CHMOD ${tmp_root} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
set(unsafe "")
if(NOT root)
  set(unsafe --unsafe)  # a plain user's sandbox has no uid of its own: grading a batch needs --unsafe
endif()
execute_process(COMMAND sh -c [=[
  grader=$1; work=$2; export GRADER_SECRET_TOKEN=$3; unsafe=$4; export TMPDIR=$5; shift 5; pids=""
  export WORKBOOK_SANDBOX_UID=2100000000  # uids of these graders alone, to be found gone
  for spec in "$@"; do
    batch=${spec%%:*}; timeout=${spec#*:}
    "$grader" grade 1 --batch "$work/$batch" --out "$work/out/$batch" --timeout "$timeout" --no-timing --jobs 2 $unsafe \
      > "$work/$batch.log" 2>&1 &
    pids="$pids $!"
  done
  failed=0
  for pid in $pids; do wait $pid || failed=1; done
  exit $failed]=] sh ${GRADER} ${WORK} ${canary_env_text} "${unsafe}" ${tmp_root} ${batches}
                RESULT_VARIABLE rc)
string(TIMESTAMP t1 "%s")
math(EXPR seconds "${t1} - ${t0}")
foreach(spec ${batches})
  string(REGEX MATCH "^[a-z]+" batch ${spec})
  file(READ ${WORK}/${batch}.log log)
  if(NOT rc EQUAL 0 OR NOT EXISTS ${WORK}/out/${batch}/gradebook.csv)
    message(FATAL_ERROR "the ${batch} batch failed (${rc}):\n${log}")
  endif()
  file(READ ${WORK}/out/${batch}/gradebook.csv gradebook)
  message(STATUS "${batch} batch:\n${gradebook}")
endforeach()
message(STATUS "graded in ${seconds} s")

include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)
function(expect_not file pattern)
  file(READ ${WORK}/out/${file} text)
  string(FIND "${text}" "${pattern}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${file} holds \"${pattern}\": the sandbox did not hold:\n${text}")
  endif()
endfunction()

# The honest submission is graded normally beside the attacks.
expect_row(quick/gradebook.csv complete 5 5 passed "")
# Each attack fails every check that calls count_devices; describe_device does
# not, and passes, unless a run timed out: then the lesson's other checks fail at once.
foreach(name ${hostile_names})
  set(batch quick)
  if(name STREQUAL "hundred_gb")
    set(batch memory)
  endif()
  file(READ ${WORK}/out/${batch}/gradebook.csv gradebook)
  if(gradebook MATCHES "\n\"${name}\",[^\n]*lesson 1 timed out")
    expect_row(${batch}/gradebook.csv ${name} 0 5 "in progress" "lesson 1 timed out")
  else()
    expect_row(${batch}/gradebook.csv ${name} 1 5 "in progress" "")
  endif()
  file(READ ${WORK}/out/${batch}/${name}/results.json text)
  string(JSON first GET "${text}" tests 0 output)  # count_devices: what the student is shown
  message(STATUS "${name}:\n${first}")
endforeach()
expect(quick/infinite_loop/results.json "did not finish within the time limit")
expect(quick/huge_output/results.json "wrote more than 64 MiB of output (the limit of this check) and was stopped")
expect(quick/fake_all_passed/results.json "count_devices() on a machine without a GPU returned 42, expected 0")
file(READ ${WORK}/out/quick/links_results/results.json text)
if(NOT text MATCHES "left results that are not to be trusted: out/values.json is a link" AND
   NOT text MATCHES "count_devices\\(\\) on a machine without a GPU returned 42, expected 0")
  message(FATAL_ERROR "the results replaced by a link were believed:\n${text}")
endif()
if(root)
  file(READ ${WORK}/out/quick/fork_bomb/results.json bomb)
  if(NOT bomb MATCHES "tried to run more than [0-9]+ processes and threads at once" AND
     NOT bomb MATCHES "fork failed: Resource temporarily unavailable")
    message(FATAL_ERROR "the fork bomb was not stopped by the process limit:\n${bomb}")
  endif()
  foreach(what "the checks' work folder" "the reference runner" "the reference runner's folder" "the lesson's checks"
               "the temporary folder" "killing the checker")
    expect(quick/writes_checks/results.json "${what} blocked (")
  endforeach()
  expect_not(quick/writes_checks/results.json "ESCAPED")
  foreach(what "the reference solution" "the reference runner" "the checks" "the reference's results")
    expect(quick/reads_reference/results.json "could not read ${what} (")
  endforeach()
  # choose_device("auto") runs after the reference's run of choose_device("cpu"): its results exist, out of reach.
  expect(quick/reads_reference/results.json "could not read the reference's results (Permission denied)")
  expect_not(quick/reads_reference/results.json "READ ")
  expect(quick/network/results.json "network: interfaces lo; connect to 192.0.2.1:80 failed: Network is unreachable")
  if(memory_cgroup STREQUAL "yes")
    # On a loaded machine (load 12-22 on 2 cores) touching 3 GiB of pages can outlast the run's
    # 10 s limit: then the run was stopped by the clock instead, which contains it as well; the
    # gradebook row above already accepted "lesson 1 timed out" for it.
    file(READ ${WORK}/out/memory/gradebook.csv memory_gradebook)
    if(memory_gradebook MATCHES "\n\"hundred_gb\",[^\n]*lesson 1 timed out")
      message(STATUS "hundred_gb: stopped by the time limit before reaching the memory limit (a loaded machine)")
      expect(memory/hundred_gb/results.json "did not finish within the time limit")
    else()
      expect(memory/hundred_gb/results.json "ran out of memory (over the limit of this check, 3 GiB) and was stopped")
    endif()
  endif()
  # Nothing of the attacks outlives the batch: the daemon and the bomb's processes
  # (named wb-hostile) are all gone; zombies, dead already, wait for init to reap them.
  execute_process(COMMAND sh -c "sleep 0.2; for d in /proc/[0-9]*; do if [ \"$(cat $d/comm 2>/dev/null)\" = wb-hostile ] && ! grep -q '^State:.*Z' $d/status 2>/dev/null; then echo $d; fi; done | wc -l"
                  OUTPUT_VARIABLE left OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT left STREQUAL "0")
    message(FATAL_ERROR "${left} processes of the hostile submissions outlived the batch")
  endif()
endif()
# The attacks on the compiler: none compiles, each says why.
foreach(name ${compile_names})
  set(batch quick)
  if(name STREQUAL "dev_zero")
    set(batch memory)
  endif()
  file(READ ${WORK}/out/${batch}/gradebook.csv gradebook)
  # A link is refused before the build ("not submitted") or by it ("does not compile").
  if(NOT gradebook MATCHES "\n\"${name}\",0,5,[^\n]*,0,\"(does not compile|not submitted)\"\n")
    message(FATAL_ERROR "${name} was not refused:\n${gradebook}")
  endif()
  file(READ ${WORK}/out/${batch}/${name}/results.json text)
  string(JSON first GET "${text}" tests 0 output)
  message(STATUS "${name}:\n${first}")
endforeach()
if(namespaces)
  # Found through an -I folder: the compiler names it by that folder. In a
  # private checkout the -I folders are copies in the compiler's own folder,
  # from where the relative path leads nowhere.
  file(READ ${WORK}/out/quick/include_relative/results.json text)
  if(NOT text MATCHES "/\\.\\./\\.\\./solutions/1_device_check/exercise\\.cpp: Permission denied" AND
     NOT (private_checkout AND text MATCHES "fatal error: \\.\\./\\.\\./solutions/1_device_check/exercise\\.cpp: No such file or directory"))
    message(FATAL_ERROR "#include of the solution by a relative path was not refused as expected:\n${text}")
  endif()
  expect(quick/include_absolute/results.json "fatal error: ${SOURCE}/solutions/1_device_check/exercise.cpp: Permission denied")
  expect(quick/include_other/results.json "fatal error: ${WORK}/quick/complete/1_device_check/exercise.cpp: Permission denied")
endif()
expect(quick/symlinked/results.json "1_device_check/exercise.cpp is a symbolic link")
# The intake never follows a link to a folder: the solutions behind it are not even looked at.
expect(quick/linked_lessons/results.json "no 1_device_check/exercise.cpp anywhere in linked_lessons/")
if(root)
  expect(quick/include_secret/results.json "fatal error: ${secret_dir}/secret.h: Permission denied")
  if(memory_cgroup STREQUAL "yes")
    # Stopped by the cgroup, or refused more address space: the compiler says so either way.
    file(READ ${WORK}/out/memory/dev_zero/results.json text)
    if(NOT text MATCHES "the compiler ran out of memory \\(over the limit for compiling, 3 GiB\\)" AND
       NOT text MATCHES "cc1plus: out of memory allocating")
      message(FATAL_ERROR "#include \"/dev/zero\" was not stopped for its memory:\n${text}")
    endif()
  endif()
  # No process of the graders' sandbox uids is alive.
  execute_process(COMMAND sh -c "ps -eo uid=,stat= | awk '$1 >= 2100000000 && $1 < 2100000256 && $2 !~ /Z/' | wc -l"
                  OUTPUT_VARIABLE alive OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT alive STREQUAL "0")
    message(FATAL_ERROR "${alive} processes of the sandboxes' uids outlived the batch")
  endif()
  file(REMOVE_RECURSE ${secret_dir})
endif()

if(namespaces)
  # The attacks from a static initializer: every check fails, with what it found.
  foreach(name ${zero_names})
    expect_row(quick/gradebook.csv ${name} 0 5 "in progress")
    file(READ ${WORK}/out/quick/${name}/results.json text)
    string(JSON first GET "${text}" tests 0 output)
    message(STATUS "${name}:\n${first}")
  endforeach()
  file(READ ${WORK}/out/quick/fallocate_unlinked/results.json text)
  if(NOT text MATCHES "its folder: fallocate failed \\(No space left on device\\)" AND
     NOT text MATCHES "wrote more than 64 MiB of output")
    message(FATAL_ERROR "the 10 GiB fallocate was not stopped:\n${text}")
  endif()
  expect(quick/fallocate_unlinked/results.json "/tmp: cannot create (Read-only file system)")
  expect_not(quick/fallocate_unlinked/results.json "ALLOCATED")
  foreach(what "another submission" "another submission's grades")
    expect(quick/reads_other/results.json "could not read ${what} (")
  endforeach()
  if(root)
    expect_not(quick/reads_other/results.json "READ ")  # as a plain user, the grader's work folders are its own uid's
  endif()
endif()

# No canary secret in anything the graders wrote.
file(GLOB_RECURSE outputs ${WORK}/out/* ${WORK}/*.log)
foreach(file ${outputs})
  file(READ ${file} text)
  foreach(canary ${canary_file_text} ${canary_env_text})
    string(FIND "${text}" "${canary}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${file} holds the canary secret ${canary}:\n${text}")
    endif()
  endforeach()
endforeach()
# No temporary folder is left (the graders' TMPDIR), and no cgroup of a process that is gone.
file(GLOB left ${tmp_root}/* /tmp/workbook-hostile-[0-9]*)
if(left)
  message(FATAL_ERROR "left behind: ${left}")
endif()
execute_process(COMMAND sh -c [=[
  for d in $(sed -n 's/^[0-9]*:\([a-z,]*\):\(.*\)$/\/sys\/fs\/cgroup\/\1\2/p; s/^0::\(.*\)$/\/sys\/fs\/cgroup\1/p' /proc/self/cgroup); do
    for c in "$d"/workbook-*; do
      [ -d "$c" ] || continue
      pid=${c##*/workbook-}; pid=${pid%%-*}
      [ -d /proc/$pid ] || echo "$c"
    done
  done]=] OUTPUT_VARIABLE leaked_cgroups OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT leaked_cgroups STREQUAL "")
  message(FATAL_ERROR "cgroups left behind:\n${leaked_cgroups}")
endif()
file(GLOB leftovers ${SOURCE}/tests/lessons/1_device_check/hostile-was-here.txt.* /tmp/hostile-was-here.txt.*)
if(leftovers)
  file(REMOVE ${leftovers})
  message(FATAL_ERROR "a submission wrote ${leftovers}")
endif()
string(TIMESTAMP finished "%s")
math(EXPR seconds "${finished} - ${started}")
message(STATUS "hostile batch graded and checked in ${seconds} s")
file(REMOVE_RECURSE ${WORK} ${tmp_root})
