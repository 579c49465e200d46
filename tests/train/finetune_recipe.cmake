# The fine-tuning recipe end to end with the causalqwen program on a tiny base Qwen2 that
# `init --preset` writes: stage 1 converts it with the recipe's flags (threshold, α and its
# anneal, regression gain, median bias of the training numbers, λ annealed from 50 to 1) and
# trains the heads alone; stage 2 trains everything from stage 1's checkpoint; `eval` scores the
# result. Checks the conversion's settings, the λ schedule in the log, the learning-rate defaults,
# and that bad combinations are refused with one line. Run by ctest with -DCLI= -DWORK=.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(failures "")
include(${CMAKE_CURRENT_LIST_DIR}/../support/cli_run.cmake)

# check(NAME CONDITION…): adds NAME to the failures unless the condition holds
macro(check name)
  if(NOT (${ARGN}))
    string(APPEND failures "\n  ${name}")
  endif()
endmacro()

run(${CLI} synth --out ${WORK}/train.jsonl --count 1500 --seed 3)
run(${CLI} synth --out ${WORK}/val.jsonl --count 64 --seed 3 --split val)
run(${CLI} bpe --corpus ${WORK}/train.jsonl --vocab-size 300 --out ${WORK}/tokenizer.json)
run(${CLI} init --preset tiny --tokenizer ${WORK}/tokenizer.json --out ${WORK}/base --seed 2)
file(READ ${WORK}/base/config.json base_config)
string(JSON base_num ERROR_VARIABLE no_num GET "${base_config}" num_token_id)
check("the base's config.json holds no CausalQwen key (num_token_id: ${base_num})" no_num)

set(common --tokenizer ${WORK}/tokenizer.json --data ${WORK}/train.jsonl --val-fraction 0 --batch-size 4 --seq-len 32 --eval-every 0
           --checkpoint-every 0 --threads 1)
# stage 1: convert with the recipe, heads alone, λ 50 → 1 over 20 steps
run(${CLI} train --model ${WORK}/base --out ${WORK}/stage1 --steps 30 --freeze backbone --threshold 1 --alpha 1
        --alpha-end 0 --alpha-steps 30 --reg-init-gain 1 --reg-bias median --lambda 50 --lambda-final 1 --lambda-steps 20
        ${common})
message(STATUS "stage 1: ${last_output}")
check("stage 1 converts with threshold 1, alpha 1, gain 1"
      last_output MATCHES "converted the base checkpoint .*: threshold 1, alpha 1, regression gain 1, regression bias [0-9.e+-]+")
check("stage 1 uses the heads-alone default lr 1e-3" last_output MATCHES "training with lr 0.001 [(]the default")
file(STRINGS ${WORK}/stage1/metrics.jsonl lines)
set(lambdas "")
foreach(line IN LISTS lines)
  string(JSON split GET "${line}" split)
  if(split STREQUAL "train")
    string(JSON step GET "${line}" step)
    string(JSON lambda GET "${line}" lambda)
    list(APPEND lambdas "${step}:${lambda}")
  endif()
endforeach()
message(STATUS "lambda by step: ${lambdas}")
list(GET lambdas 0 first)
list(GET lambdas 10 eleventh)
list(GET lambdas 29 last)
check("λ is 50 at the first step (${first})" first STREQUAL "1:50.0" OR first STREQUAL "1:50")
check("λ is 25.5 at step 11 (${eleventh})" eleventh STREQUAL "11:25.5")
check("λ is 1 at the last step (${last})" last STREQUAL "30:1.0" OR last STREQUAL "30:1")
file(READ ${WORK}/stage1/checkpoints/LATEST stage1_latest)
string(STRIP "${stage1_latest}" stage1_latest)
set(stage1 ${WORK}/stage1/checkpoints/${stage1_latest})
file(READ ${stage1}/config.json stage1_config)
string(JSON threshold GET "${stage1_config}" ovr_threshold)
string(JSON gain GET "${stage1_config}" reg_init_gain)
string(JSON bias GET "${stage1_config}" reg_bias_init)
check("stage 1's checkpoint states threshold 1 and gain 1 (${threshold}, ${gain})"
      (threshold STREQUAL "1.0" OR threshold STREQUAL "1") AND (gain STREQUAL "1.0" OR gain STREQUAL "1"))
check("the median bias is not 0 (${bias})" NOT bias STREQUAL "0.0")

# stage 2: everything, from stage 1's checkpoint
run(${CLI} train --model ${stage1} --out ${WORK}/stage2 --steps 20 ${common})
check("stage 2 uses the fine-tuning default lr 1e-4" last_output MATCHES "training with lr 0.0001 [(]the default")
file(READ ${WORK}/stage2/checkpoints/LATEST stage2_latest)
string(STRIP "${stage2_latest}" stage2_latest)

# eval afterwards
run(${CLI} eval --model ${WORK}/stage2/checkpoints/${stage2_latest} --tokenizer ${WORK}/tokenizer.json
        --data ${WORK}/val.jsonl --seq-len 32 --baseline-data ${WORK}/train.jsonl --out ${WORK}/report.json --plain)
file(READ ${WORK}/report.json report)
string(JSON numbers GET "${report}" calibration overall numbers numbers)
string(JSON baseline GET "${report}" calibration overall numbers baseline value)
check("eval scores the held-out numbers (${numbers})" numbers GREATER 0)
check("eval's baseline is the training median, the stage-1 bias (${baseline} vs ${bias})" baseline STREQUAL bias)

# bad combinations
file(WRITE ${WORK}/no_numbers.jsonl "")
foreach(word one two three four five six seven eight nine ten eleven twelve)
  file(APPEND ${WORK}/no_numbers.jsonl "{\"text\": \"a sentence without digits, the ${word}th\"}\n")
endforeach()
expect_refusal(reg_bias_median_without_numbers "--reg-bias median needs numbers in the training data, but .*no_numbers.jsonl holds none"
               ${CLI} train --model ${WORK}/base --tokenizer ${WORK}/tokenizer.json --data ${WORK}/no_numbers.jsonl
               --out ${WORK}/never --reg-bias median)
expect_refusal(threshold_on_a_causal_checkpoint "is a CausalQwen checkpoint whose heads are trained already"
               ${CLI} train --model ${stage1} --out ${WORK}/never --threshold 2 ${common})
expect_refusal(lambda_final_without_lambda "--lambda-final and --lambda-steps anneal --lambda: give --lambda too"
               ${CLI} train --model ${WORK}/base --out ${WORK}/never --lambda-final 1 ${common})
expect_refusal(reg_bias_word "--reg-bias must be median or a number, got 'mean'"
               ${CLI} train --model ${WORK}/base --out ${WORK}/never --reg-bias mean ${common})

if(failures)
  message(FATAL_ERROR "fine-tuning recipe:${failures}")
endif()
message(STATUS "FINETUNE_RECIPE_OK")
