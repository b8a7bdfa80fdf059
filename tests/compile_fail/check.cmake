# Compiles SOURCE twice: with -DSKY_COMPILE_OK it must compile (so the test can fail), without
# it it must fail with an error matching EXPECT.
foreach(define "-DSKY_COMPILE_OK" "")
  execute_process(
    COMMAND ${CXX} -std=c++20 -fsyntax-only ${define} -I${INCLUDE_DIR} ${EXTRA_FLAGS} ${SOURCE}
    RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
  if(define)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "the control build of ${SOURCE} failed:\n${err}")
    endif()
  else()
    if(rc EQUAL 0)
      message(FATAL_ERROR "${SOURCE} compiled, but it must not")
    endif()
    if(NOT err MATCHES "${EXPECT}")
      message(FATAL_ERROR "${SOURCE} failed to compile, but without '${EXPECT}':\n${err}")
    endif()
  endif()
endforeach()
message(STATUS "${SOURCE}: fails to compile as it must")
