# Runs `causalqwen tokenize` on three lines and checks the exact ids (the same ids the reference
# JavaScript tokenizer gives for these strings), the --numbers form, and the error on bad input.
#   cmake -DCLI=<causalqwen> -DTOKENIZER=<tokenizer.json> -DWORK=<dir> -P cli_tokenize.cmake
file(WRITE ${WORK}/cli_input.jsonl "\"Hello, world!\"\n\"x = 1,234.5\"\n\"\\u4e2d\\u6587\"\n")
execute_process(COMMAND ${CLI} tokenize --tokenizer ${TOKENIZER}
                INPUT_FILE ${WORK}/cli_input.jsonl OUTPUT_VARIABLE plain RESULT_VARIABLE rc1)
execute_process(COMMAND ${CLI} tokenize --tokenizer ${TOKENIZER} --numbers
                INPUT_FILE ${WORK}/cli_input.jsonl OUTPUT_VARIABLE numbers RESULT_VARIABLE rc2)
execute_process(COMMAND ${CLI} tokenize --tokenizer ${TOKENIZER}
                INPUT_FILE ${CMAKE_CURRENT_LIST_FILE} OUTPUT_VARIABLE junk ERROR_VARIABLE junk_err
                RESULT_VARIABLE rc3)
set(expected_plain "[9707,11,1879,0]\n[87,284,220,16,11,17,18,19,13,20]\n[104811]\n")
set(expected_numbers
  "{\"ids\":[9707,11,1879,0],\"values\":[0.0,0.0,0.0,0.0]}\n{\"ids\":[87,284,220,151669],\"values\":[0.0,0.0,0.0,1234.5]}\n{\"ids\":[104811],\"values\":[0.0]}\n")
if(NOT rc1 EQUAL 0 OR NOT plain STREQUAL expected_plain)
  message(FATAL_ERROR "tokenize: exit ${rc1}, got\n${plain}expected\n${expected_plain}")
endif()
if(NOT rc2 EQUAL 0 OR NOT numbers STREQUAL expected_numbers)
  message(FATAL_ERROR "tokenize --numbers: exit ${rc2}, got\n${numbers}expected\n${expected_numbers}")
endif()
if(rc3 EQUAL 0 OR NOT junk_err MATCHES "line 1")
  message(FATAL_ERROR "tokenize on non-JSON input should fail naming the line, got ${rc3}: ${junk_err}")
endif()
message(STATUS "causalqwen tokenize: ok")
