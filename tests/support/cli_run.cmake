# Shared by the ctest scripts that drive the causalqwen program (cmake -P): run(COMMAND ARGS…)
# executes a command, stops the script with its output when it fails, and leaves its standard
# output in `last_output`.
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()
