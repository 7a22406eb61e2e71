# The HTML report end to end (issue 20 item 7): a submission whose lesson 4
# forgets zero_grad fails train_step, and the report still draws that check's
# loss curve, the student's losses beside the reference's (they part from step
# 2 on); the Machine table names the devices lesson 4 ran on (emulated, their
# memory, the GPU their clock models), as the checker recorded them.
# Run by CTest as: cmake -DGRADER=... -DSOURCE=... -DWORK=... -P report_test.cmake
file(REMOVE_RECURSE ${WORK})
set(lesson 4_full_loop)
file(READ ${SOURCE}/solutions/${lesson}/exercise.cpp solution)
set(zero_grad "optimizer.zero_grad();  // the gradients of the previous step are still there")
string(REPLACE "${zero_grad}" "// (no zero_grad: the gradients add up)" wrong "${solution}")
if(wrong STREQUAL solution)
  message(FATAL_ERROR "solutions/${lesson}/exercise.cpp no longer has \"${zero_grad}\": update this test")
endif()
file(WRITE ${WORK}/submission/${lesson}/exercise.cpp "${wrong}")
execute_process(COMMAND ${GRADER} grade 4 --submission ${WORK}/submission --no-timing --seed 3
                        --html ${WORK}/report.html
                OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT EXISTS ${WORK}/report.html)
  message(FATAL_ERROR "grade wrote no report:\n${out}")
endif()
file(READ ${WORK}/report.html html)

# The failing check, up to the next check.
set(head "<span class=\"badge fail\">FAIL</span><b>train_step</b>")
string(FIND "${html}" "${head}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "train_step did not fail in the report (the submission forgets zero_grad):\n${out}")
endif()
string(SUBSTRING "${html}" ${at} -1 block)
string(FIND "${block}" "<div class=\"check\">" end)
string(SUBSTRING "${block}" 0 ${end} block)
string(FIND "${block}" "<title>training loss per step</title>" plot)
if(plot EQUAL -1)
  message(FATAL_ERROR "the failing train_step check has no loss curve in the report:\n${block}")
endif()
string(REGEX MATCHALL "<polyline[^>]* points=\"[^\"]+\"" lines "${block}")
list(LENGTH lines n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "the failing train_step's loss curve has ${n} line(s), expected 2 (yours and the reference's):\n${block}")
endif()
list(GET lines 0 yours)
list(GET lines 1 reference)
string(REGEX REPLACE ".*points=" "" yours "${yours}")
string(REGEX REPLACE ".*points=" "" reference "${reference}")
if(yours STREQUAL reference)
  message(FATAL_ERROR "the two lines of the loss curve are the same, yet the losses differ from step 2 on:\n${block}")
endif()
foreach(label ">yours</text>" ">reference</text>" "font-weight=\"600\">step</text>" "font-weight=\"600\">training loss</text>")
  string(FIND "${block}" "${label}" found)
  if(found EQUAL -1)
    message(FATAL_ERROR "the loss curve lacks ${label}:\n${block}")
  endif()
endforeach()

# The Machine table: lesson 4's own row, with the devices its checks ran on.
string(FIND "${html}" "<h2>Machine</h2>" at)
string(SUBSTRING "${html}" ${at} -1 machine)
string(FIND "${machine}" "</table>" end)
string(SUBSTRING "${machine}" 0 ${end} machine)
if(NOT machine MATCHES "<th rowspan=\"[0-9]+\">lesson 4</th><td>cuda:0[^<]*</td><td><b>emulated</b> on the host's CPU</td><td>[0-9.]+ [KMG]iB( each)?</td><td>[A-Za-z0-9][^<]*</td></tr>")
  message(FATAL_ERROR "the Machine table does not name the devices lesson 4 ran on:\n${machine}")
endif()
message(STATUS "train_step failed and its report draws both loss series; the Machine table names lesson 4's devices")
