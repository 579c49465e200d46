# causalqwen eval on the model the demo smoke test trained (-DDEMO=its output directory): on the
# demo's held-out sentences (held_out.jsonl, grouped by template family) it must report the very
# MAE the demo reported (result.json), print the coverage table and the per-group lines, and
# write its JSON report and SVG picture; bad input is refused with one line naming the file (and
# line). Run by ctest with -DCLI= -DDEMO= -DTOKENIZER= (a tokenizer that is not the model's)
# -DWORK= (a scratch directory).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(failures "")
include(${CMAKE_CURRENT_LIST_DIR}/../support/cli_run.cmake)
set(eval ${CLI} eval --model ${DEMO}/model --seq-len 64 --batch-size 16 --plain)

run(${eval} --data ${DEMO}/held_out.jsonl --out ${WORK}/report.json --plot ${WORK}/calibration.svg --baseline 7)
message(STATUS "${last_output}")
foreach(expected "central interval  coverage" "90%" "PIT F_Y\\(y\\) in 10 bins" "expected calibration error"
                 "by group:" "copy" "baseline: always 7 has MAE" "report -> " "calibration picture -> ")
  if(NOT last_output MATCHES "${expected}")
    string(APPEND failures "\n  eval output lacks '${expected}'")
  endif()
endforeach()
file(READ ${DEMO}/result.json demo_result)
file(READ ${WORK}/report.json report)
string(JSON demo_mae GET "${demo_result}" reg_mae)
string(JSON eval_mae GET "${report}" calibration overall numbers mae)
if(NOT demo_mae STREQUAL eval_mae)
  string(APPEND failures "\n  the demo's held-out MAE ${demo_mae} differs from eval's ${eval_mae}")
else()
  message(STATUS "held-out MAE: demo ${demo_mae}, eval ${eval_mae}")
endif()
string(JSON demo_coverage GET "${demo_result}" coverage_90)
string(JSON eval_coverage GET "${report}" calibration overall numbers intervals 2 coverage)
if(NOT demo_coverage STREQUAL eval_coverage)
  string(APPEND failures "\n  the demo's 90% coverage ${demo_coverage} differs from eval's ${eval_coverage}")
endif()
file(READ ${WORK}/calibration.svg svg LIMIT 200)
if(NOT svg MATCHES "^<svg")
  string(APPEND failures "\n  calibration.svg does not start with <svg")
endif()

# --- bad input ----------------------------------------------------------------------------------
file(WRITE ${WORK}/empty.jsonl "\n")
expect_refusal(eval_empty "empty.jsonl: the file holds no line" ${eval} --data ${WORK}/empty.jsonl)
file(WRITE ${WORK}/no_numbers.jsonl "{\"text\": \"no digits here\"}\n{\"text\": \"none here either\"}\n")
expect_refusal(eval_no_numbers "no_numbers.jsonl: none of its 2 lines holds a number" ${eval} --data ${WORK}/no_numbers.jsonl)
file(WRITE ${WORK}/bad_group.jsonl "{\"text\": \"a 1\", \"group\": \"x\"}\n{\"text\": \"b 2\", \"group\": 7}\n")
expect_refusal(eval_group_not_string "bad_group.jsonl:2: \"group\" must be a string, got number"
               ${eval} --data ${WORK}/bad_group.jsonl)
expect_refusal(eval_tokenizer_mismatch "tiny_tokenizer.json: <NUM> has the id [0-9]+ in this tokenizer but [0-9]+ in the model"
               ${eval} --data ${DEMO}/held_out.jsonl --tokenizer ${TOKENIZER})
expect_refusal(eval_baseline_no_numbers "no_numbers.jsonl: no line holds a number, so it gives no median"
               ${eval} --data ${DEMO}/held_out.jsonl --baseline-data ${WORK}/no_numbers.jsonl)

# the position cap: the demo's model records its training sequence length (64); a model whose
# config.json states none gets the default cap, 32768; a data file that is one endless line
expect_refusal(eval_seq_len_past_positions "--seq-len 1048576 must be at most the model's max_position_embeddings 64 \\(config.json\\)"
               ${CLI} eval --model ${DEMO}/model --data ${DEMO}/held_out.jsonl --seq-len 1048576 --batch-size 65536)
file(COPY ${DEMO}/model/ DESTINATION ${WORK}/model_no_cap)
file(READ ${DEMO}/model/config.json config_text)
string(REGEX REPLACE "\"max_position_embeddings\": [0-9]+,?" "" no_cap "${config_text}")
file(WRITE ${WORK}/model_no_cap/config.json "${no_cap}")
expect_refusal(eval_default_position_cap "--seq-len 1048576 must be at most the model's max_position_embeddings 32768 \\(the default cap: config.json states none\\)"
               ${CLI} eval --model ${WORK}/model_no_cap --data ${DEMO}/held_out.jsonl --seq-len 1048576)
if(EXISTS /dev/zero)
  expect_refusal(eval_dev_zero "/dev/zero:1: the line is longer than 64 MiB, the limit of a line" ${eval} --data /dev/zero)
endif()

# the regression head's reading (config.json reg_head): the demo's weights read as a Gaussian and
# as a point (mse) are scored with that distribution's scores; an unknown reading is refused
foreach(head gaussian mse laplace)
  file(COPY ${DEMO}/model/ DESTINATION ${WORK}/model_${head})
  string(REGEX REPLACE "\"reg_head\": \"cauchy\"" "\"reg_head\": \"${head}\"" head_config "${config_text}")
  if(head_config STREQUAL config_text)
    string(APPEND failures "\n  the demo's config.json holds no \"reg_head\": \"cauchy\"")
  endif()
  file(WRITE ${WORK}/model_${head}/config.json "${head_config}")
endforeach()
run(${CLI} eval --model ${WORK}/model_gaussian --seq-len 64 --batch-size 16 --plain --data ${DEMO}/held_out.jsonl
    --out ${WORK}/gaussian.json --plot ${WORK}/gaussian.svg)
foreach(expected "regression head: gaussian" "read as gaussian" "mean Gaussian NLL" "central interval  coverage"
                 "risk-coverage picture -> ")
  if(NOT last_output MATCHES "${expected}")
    string(APPEND failures "\n  eval of a Gaussian head lacks '${expected}'")
  endif()
endforeach()
file(READ ${WORK}/gaussian.json gaussian_report)
string(JSON g_head GET "${gaussian_report}" reg_head)
string(JSON g_distribution GET "${gaussian_report}" scores uncalibrated overall distribution)
string(JSON g_calibration GET "${gaussian_report}" calibration overall numbers distribution)
string(JSON g_coverage GET "${gaussian_report}" scores uncalibrated overall levels 2 coverage)
string(JSON c_nll GET "${report}" scores uncalibrated overall nll mean)
string(JSON g_nll GET "${gaussian_report}" scores uncalibrated overall nll mean)
string(JSON g_mae GET "${gaussian_report}" scores uncalibrated overall mae)
string(JSON c_mae GET "${report}" scores uncalibrated overall mae)
if(NOT g_head STREQUAL "gaussian" OR NOT g_distribution STREQUAL "gaussian" OR NOT g_calibration STREQUAL "gaussian"
   OR g_coverage STREQUAL "" OR g_nll STREQUAL c_nll OR NOT g_mae STREQUAL c_mae)
  string(APPEND failures "\n  the Gaussian head's report: reg_head ${g_head}, distribution ${g_distribution}/${g_calibration}, "
                         "coverage 90% ${g_coverage}, NLL ${g_nll} (Cauchy ${c_nll}), MAE ${g_mae} (Cauchy ${c_mae})")
endif()
run(${CLI} eval --model ${WORK}/model_mse --seq-len 64 --batch-size 16 --plain --data ${DEMO}/held_out.jsonl
    --out ${WORK}/mse.json --plot ${WORK}/mse.svg)
foreach(expected "regression head: mse" "read as point" "a point head: no NLL, interval or PIT")
  if(NOT last_output MATCHES "${expected}")
    string(APPEND failures "\n  eval of an mse head lacks '${expected}'")
  endif()
endforeach()
if(last_output MATCHES "risk-coverage picture" OR last_output MATCHES "central interval  coverage")
  string(APPEND failures "\n  eval of an mse head printed intervals")
endif()
file(READ ${WORK}/mse.json mse_report)
string(JSON m_nll TYPE "${mse_report}" scores uncalibrated overall nll)
string(JSON m_levels LENGTH "${mse_report}" scores uncalibrated overall levels)
string(JSON m_mean_nll TYPE "${mse_report}" calibration overall numbers mean_nll)
string(JSON m_risk TYPE "${mse_report}" risk_coverage)
string(JSON m_mae GET "${mse_report}" scores uncalibrated overall mae)
string(JSON m_rmse TYPE "${mse_report}" scores uncalibrated overall rmse)
if(NOT m_nll STREQUAL "NULL" OR NOT m_levels EQUAL 0 OR NOT m_mean_nll STREQUAL "NULL" OR NOT m_risk STREQUAL "NULL"
   OR NOT m_mae STREQUAL c_mae OR NOT m_rmse STREQUAL "NUMBER")
  string(APPEND failures "\n  the mse head's report: nll ${m_nll}, levels ${m_levels}, mean_nll ${m_mean_nll}, "
                         "risk_coverage ${m_risk}, MAE ${m_mae} (Cauchy ${c_mae}), rmse ${m_rmse}")
endif()
expect_refusal(eval_unknown_reg_head "model_laplace/config.json: field 'reg_head' must be \"cauchy\", \"gaussian\" or \"mse\", got \"laplace\""
               ${CLI} eval --model ${WORK}/model_laplace --data ${DEMO}/held_out.jsonl --seq-len 64)
expect_refusal(generate_mse_interval "model_mse/config.json: field 'reg_head' is \"mse\": the model predicts each number as a point"
               ${CLI} generate --model ${WORK}/model_mse --prompt "a 1" --max-new-tokens 2 --interval 0.9)
expect_refusal(generate_gaussian_plus_minus "model_gaussian/config.json: field 'reg_head' is \"gaussian\": --show-uncertainty"
               ${CLI} generate --model ${WORK}/model_gaussian --prompt "a 1" --max-new-tokens 2 --show-uncertainty)
run(${CLI} generate --model ${WORK}/model_gaussian --prompt "a 1" --max-new-tokens 4 --interval 0.9 --json)
expect_refusal(serve_gaussian "model_gaussian/config.json: field 'reg_head' is \"gaussian\": serve reports every number as a Cauchy"
               ${CLI} serve --model ${WORK}/model_gaussian --port 65001)
expect_refusal(calibrate_mse "model_mse/config.json: field 'reg_head' is \"mse\": .* so calibrate .* is refused"
               ${CLI} calibrate --model ${WORK}/model_mse --data ${DEMO}/held_out.jsonl --seq-len 64)

if(failures)
  message(FATAL_ERROR "eval:${failures}")
endif()
message(STATUS "EVAL_CLI_OK")
