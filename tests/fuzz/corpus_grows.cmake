# ctest fuzz_grow_<target> (label fuzz-grow, libFuzzer builds only): runs a libFuzzer target for
# RUNS executions (the seeds included) from a fixed seed over its seed corpus, into an emptied
# output corpus, and fails unless the corpus then holds at least MIN_NEW more inputs than after
# the seeds were loaded (libFuzzer's "corp: N" on its INITED and DONE lines): some mutated inputs
# must reach code or comparisons the seeds did not. A target whose inputs cannot reach the code
# under test (its bytes never read, or every input refused before its bytes matter) stays at the
# seeds' corpus, however long it runs, and fails here.
#   cmake -DFUZZER=exe -DSEEDS=dir -DOUT=dir -DRUNS=n -DMIN_NEW=k -DMAX_SECONDS=s -P corpus_grows.cmake
foreach(var FUZZER SEEDS OUT RUNS MIN_NEW MAX_SECONDS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "corpus_grows.cmake: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})
execute_process(
  COMMAND ${FUZZER} -seed=1 -runs=${RUNS} -max_total_time=${MAX_SECONDS} -timeout=10 -print_final_stats=1
          ${OUT} ${SEEDS}
  RESULT_VARIABLE status
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)
if(NOT status EQUAL 0)
  message("${out}")
  message(FATAL_ERROR "${FUZZER} exited with ${status} (a finding; see above)")
endif()
string(REGEX MATCH "#[0-9]+[ \t]+INITED[^\n]*" inited "${out}")
string(REGEX MATCH "#[0-9]+[ \t]+DONE[^\n]*" done "${out}")
string(REGEX MATCH "corp: ([0-9]+)/" _ "${inited}")
set(seed_entries "${CMAKE_MATCH_1}")
string(REGEX MATCH "corp: ([0-9]+)/" _ "${done}")
set(final_entries "${CMAKE_MATCH_1}")
string(REGEX MATCH "stat::number_of_executed_units: *([0-9]+)" _ "${out}")
set(executed "${CMAKE_MATCH_1}")
if(seed_entries STREQUAL "" OR final_entries STREQUAL "" OR executed STREQUAL "")
  message("${out}")
  message(FATAL_ERROR "${FUZZER}: no INITED / DONE line or final statistics in libFuzzer's output (see above)")
endif()
math(EXPR grown "${final_entries} - ${seed_entries}")
message("seeds loaded: ${inited}")
message("done:         ${done}")
message("${executed} executions from seed 1: the corpus grew from ${seed_entries} to ${final_entries} inputs "
        "(at least ${MIN_NEW} more expected)")
if(grown LESS MIN_NEW)
  message(FATAL_ERROR "${FUZZER}: the corpus did not grow (${seed_entries} inputs after the seeds, ${final_entries} "
                      "after ${executed} executions; at least ${MIN_NEW} more expected): its inputs do not reach the "
                      "code they are meant to fuzz")
endif()
