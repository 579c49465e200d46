# causalqwen calibrate and the recalibrated intervals in eval, on a copy of the model the demo
# smoke test trained (-DDEMO=its output directory): the held-out sentences split into odd lines
# (calibration) and even lines (evaluation, disjoint); eval before calibrating prints no
# recalibration; calibrate writes calibration.json; eval after it reports coverage before and
# after, the very same uncalibrated scores and statistics as before, and a --predictions file
# from which recompute_scores.py (python3) recomputes every score of the report; --plot writes the
# risk-coverage picture beside the calibration one; bad options and a bad calibration.json are
# refused with one line. Run by ctest with -DCLI= -DDEMO= -DPYTHON= -DWORK=.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(failures "")
include(${CMAKE_CURRENT_LIST_DIR}/../support/cli_run.cmake)
file(COPY ${DEMO}/model DESTINATION ${WORK})
set(model ${WORK}/model)

# the held-out lines, odd ones to calibrate on, even ones to evaluate on
file(STRINGS ${DEMO}/held_out.jsonl lines ENCODING UTF-8)
set(cal "")
set(test "")
set(i 0)
foreach(line IN LISTS lines)
  math(EXPR odd "${i} % 2")
  if(odd)
    string(APPEND cal "${line}\n")
  else()
    string(APPEND test "${line}\n")
  endif()
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE ${WORK}/cal.jsonl "${cal}")
file(WRITE ${WORK}/test.jsonl "${test}")
set(eval ${CLI} eval --model ${model} --data ${WORK}/test.jsonl --seq-len 64 --batch-size 16 --plain)

run(${eval} --out ${WORK}/before.json)
if(last_output MATCHES "recalibrated intervals")
  string(APPEND failures "\n  eval of a model without calibration.json printed a recalibration")
endif()
foreach(expected "proper scores of the number forecasts" "CRPS mean" "IS 90%" "skill = 1 − score/baseline's")
  if(NOT last_output MATCHES "${expected}")
    string(APPEND failures "\n  eval output lacks '${expected}'")
  endif()
endforeach()

run(${CLI} calibrate --model ${model} --data ${WORK}/cal.jsonl --seq-len 64 --plain --levels 0.5,0.8,0.9)
message(STATUS "${last_output}")
if(NOT last_output MATCHES "conformal calibration of the intervals.*calibration -> " OR NOT EXISTS ${model}/calibration.json)
  string(APPEND failures "\n  calibrate did not write ${model}/calibration.json")
endif()

run(${eval} --out ${WORK}/after.json --predictions ${WORK}/predictions.jsonl --plot ${WORK}/calibration.svg)
message(STATUS "${last_output}")
foreach(expected "recalibrated intervals \\(conformal" " 90%  .* -> " "predictions \\([0-9]+ numbers\\) -> "
                 "risk-coverage picture -> ")
  if(NOT last_output MATCHES "${expected}")
    string(APPEND failures "\n  eval output lacks '${expected}'")
  endif()
endforeach()
file(READ ${WORK}/before.json before)
file(READ ${WORK}/after.json after)
# a calibration changes only the calibrated scores: the statistics and uncalibrated scores stay
string(JSON before_stats GET "${before}" calibration)
string(JSON after_stats GET "${after}" calibration)
string(JSON before_scores GET "${before}" scores uncalibrated)
string(JSON after_scores GET "${after}" scores uncalibrated)
if(NOT before_stats STREQUAL after_stats OR NOT before_scores STREQUAL after_scores)
  string(APPEND failures "\n  calibration.json changed the uncalibrated statistics or scores")
endif()
string(JSON before_calibrated TYPE "${before}" scores calibrated)
string(JSON after_levels LENGTH "${after}" scores calibrated overall levels)
if(NOT before_calibrated STREQUAL "NULL" OR NOT after_levels EQUAL 3)
  string(APPEND failures "\n  calibrated scores: before '${before_calibrated}', after ${after_levels} levels (expected null and 3)")
endif()
if(NOT EXISTS ${WORK}/calibration-risk-coverage.svg)
  string(APPEND failures "\n  no calibration-risk-coverage.svg beside calibration.svg")
endif()

# every score of the report, recomputed from the predictions in Python
execute_process(COMMAND ${PYTHON} ${CMAKE_CURRENT_LIST_DIR}/recompute_scores.py ${WORK}/predictions.jsonl
                        ${WORK}/after.json ${model}/calibration.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "recompute_scores.py: ${out}${err}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "SCORES_AGREE")
  string(APPEND failures "\n  the scores recomputed from --predictions disagree with the report:\n${out}${err}")
endif()

# temperature, by group: written and read back by eval
run(${CLI} calibrate --model ${model} --data ${WORK}/cal.jsonl --seq-len 64 --plain --method temperature --by group
    --min-group-size 5)
if(NOT last_output MATCHES "temperature calibration.*by group")
  string(APPEND failures "\n  calibrate --method temperature --by group did not report its groups")
endif()
run(${eval})
if(NOT last_output MATCHES "recalibrated intervals \\(temperature")
  string(APPEND failures "\n  eval did not apply the temperature calibration")
endif()
run(${eval} --no-calibration)
if(last_output MATCHES "recalibrated intervals")
  string(APPEND failures "\n  eval --no-calibration applied the calibration")
endif()

# --- bad input ----------------------------------------------------------------------------------
set(calibrate ${CLI} calibrate --model ${model} --data ${WORK}/cal.jsonl --seq-len 64 --plain)
expect_refusal(calibrate_level_range "--levels 1.5: expected a finite number in \\(0, 1\\)" ${calibrate} --levels 0.5,1.5)
expect_refusal(calibrate_level_nan "--levels nan: expected a finite number in \\(0, 1\\)" ${calibrate} --levels nan)
expect_refusal(calibrate_level_order "--levels: levels must increase, got 0.5 after 0.9" ${calibrate} --levels 0.9,0.5)
file(WRITE ${WORK}/two.jsonl "{\"text\": \"a 1 b 2\"}\n{\"text\": \"c 3\"}\n")
expect_refusal(calibrate_too_few "two.jsonl: [0-9]+ numbers scored: .*level 0.95 needs at least 19 calibration numbers"
               ${CLI} calibrate --model ${model} --data ${WORK}/two.jsonl --seq-len 64 --levels 0.95)
expect_refusal(calibrate_no_groups "two.jsonl: --by group needs a \"group\""
               ${CLI} calibrate --model ${model} --data ${WORK}/two.jsonl --seq-len 64 --by group)
expect_refusal(calibrate_min_group "--min-group-size" ${calibrate} --min-group-size 0)
expect_refusal(eval_selective_level "--selective-level 1.5: expected a finite number in \\(0, 1\\)" ${eval} --selective-level 1.5)
file(WRITE ${model}/calibration.json "{\"format\": \"causalqwen-interval-calibration-1\", \"method\": \"conformal\"}\n")
expect_refusal(eval_bad_calibration "calibration.json: .*distribution" ${eval})
file(WRITE ${model}/calibration.json "{\"format\": \"causalqwen-interval-calibration-1\", \"method\": \"conformal\", \"distribution\": \"cauchy\", \"min_group_size\": 50, \"data\": \"x\", \"pooled\": {\"numbers\": 3, \"levels\": [{\"level\": 0.9, \"rank\": 3, \"score\": 1, \"multiplier\": 0}]}, \"groups\": {}}\n")
expect_refusal(eval_bad_multiplier "calibration.json: pooled.levels\\[0\\].multiplier must be a finite number > 0" ${eval})
expect_refusal(generate_bad_multiplier "calibration.json: pooled.levels\\[0\\].multiplier must be a finite number > 0"
               ${CLI} generate --model ${model} --prompt "It is" --max-new-tokens 2 --interval 0.9)
file(REMOVE ${model}/calibration.json)
set(generate ${CLI} generate --model ${model} --prompt "It is" --max-new-tokens 2)
expect_refusal(generate_max_width_negative "--max-width -1: expected a finite number in \\(0, inf\\)" ${generate} --max-width -1)
expect_refusal(generate_max_width_nan "--max-width nan: expected a finite number in \\(0, inf\\)" ${generate} --max-width nan)
expect_refusal(generate_relative_inf "--max-relative-width inf: expected a finite number in \\(0, inf\\)" ${generate} --max-relative-width inf)
expect_refusal(generate_width_level "--width-level 1: expected a finite number in \\(0, 1\\)" ${generate} --max-width 1 --width-level 1)
run(${generate} --max-width 1e-300 --json)
if(NOT last_output MATCHES "\"text\"")
  string(APPEND failures "\n  generate --max-width --json printed no result")
endif()

if(failures)
  message(FATAL_ERROR "calibrate:${failures}")
endif()
message(STATUS "CALIBRATE_CLI_OK")
