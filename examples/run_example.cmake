# Runs one example and checks it as a user would: it exits 0 and its output (stdout and stderr
# together) matches every expected regular expression. Used by sky_add_example's ctest entries:
#   cmake -DEXE=path -DARGS="a;b" -DEXPECT="re1;re2" -P run_example.cmake
execute_process(COMMAND ${EXE} ${ARGS} OUTPUT_VARIABLE out ERROR_VARIABLE out
                RESULT_VARIABLE rc TIMEOUT 240)
message("${out}")
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "example exited with ${rc}")
endif()
foreach(re IN LISTS EXPECT)
  if(NOT out MATCHES "${re}")
    message(FATAL_ERROR "example output lacks: ${re}")
  endif()
endforeach()
