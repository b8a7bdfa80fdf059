# Builds and runs tests/packaging/consumer against sky, one way (MODE):
#   find_package:     install this build into a scratch prefix, then find_package(sky CONFIG)
#   add_subdirectory: add sky's source tree to the consumer's build
set(work ${BINARY_DIR}/packaging-${MODE})
# Run by another user than the one who built (e.g. an unprivileged ctest over root's build), the
# build tree cannot take the scratch build: that is a test that cannot run here, not a failure.
execute_process(COMMAND test -w ${BINARY_DIR} RESULT_VARIABLE not_writable)
if(NOT not_writable EQUAL 0)
  message("skipped: the build tree ${BINARY_DIR} is not writable by this user")
  return()
endif()
file(REMOVE_RECURSE ${work})
file(MAKE_DIRECTORY ${work})
set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${work}/prefix)
  if(NOT EXISTS ${work}/prefix/bin/sky)
    message(FATAL_ERROR "the sky tool was not installed to bin/")
  endif()
  run(${work}/prefix/bin/sky --version)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/packaging/consumer -B ${work}/build -G Ninja
      -DCMAKE_PREFIX_PATH=${work}/prefix -DSKY_CONSUME=find_package ${launcher}
      # An installed libsky built with sanitizers (the asan and tsan presets) links only into a
      # program built with the same flags; a plain build passes empty ones.
      "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${EXE_LINKER_FLAGS}")
else()
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/packaging/consumer -B ${work}/build -G Ninja
      -DSKY_CONSUME=add_subdirectory -DSKY_SOURCE_DIR=${SOURCE_DIR} ${launcher})
endif()
run(${CMAKE_COMMAND} --build ${work}/build)
run(${work}/build/consumer)
file(REMOVE_RECURSE ${work})
