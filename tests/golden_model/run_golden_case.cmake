# One golden case as one ctest command: run `causalqwen forward` on the reference's checkpoint and
# inputs (float32, gradients, sampling), then compare every tensor with compare_forward.py.
#   cmake -DCLI=… -DPYTHON=… -DCOMPARE=…/compare_forward.py -DCASE_DIR=…/ref/<case> -P run_golden_case.cmake
foreach(var CLI PYTHON COMPARE CASE_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_golden_case.cmake: -D${var}=… is required")
  endif()
endforeach()
set(actual ${CASE_DIR}/actual.safetensors)
file(REMOVE ${actual})  # a stale output from an earlier run must not pass

set(forward_cmd ${CLI} forward --model ${CASE_DIR}/model --inputs ${CASE_DIR}/inputs.json
                --out ${actual} --grad --sampling --dtype f32)
string(REPLACE ";" " " shown "${forward_cmd}")
message(STATUS "${shown}")
execute_process(COMMAND ${forward_cmd} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "causalqwen forward failed (exit status ${rc})")
endif()
if(NOT EXISTS ${actual})
  message(FATAL_ERROR "causalqwen forward exited 0 but wrote no ${actual}")
endif()

execute_process(COMMAND ${PYTHON} ${COMPARE} ${CASE_DIR}/expected_f64.safetensors
                        ${CASE_DIR}/expected_f32.safetensors ${actual} --report
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "compare_forward.py: ${actual} differs from the reference (see the table above)")
endif()
