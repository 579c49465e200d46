# Every class of bad input to the causalqwen program ends with exit status 1 or 2 and exactly one
# line on standard error, which names the file or option and what was expected; never a signal,
# an uncaught exception or a result written with exit 0. Run by ctest with -DCLI= -DMODEL= (the
# golden model's tiny checkpoint: max_position_embeddings 32, vocab 23, <NUM> = 20) -DTOKENIZER=
# (tests/support/data/tiny_tokenizer.json) -DWORK= (a scratch directory).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(failures "")

include(${CMAKE_CURRENT_LIST_DIR}/../support/cli_run.cmake)

set(gen_model ${CLI} generate --model ${MODEL})
set(gen ${gen_model} --tokenizer ${TOKENIZER})
set(fwd ${CLI} forward --model ${MODEL} --out ${WORK}/never.safetensors)

# --- the command line ---------------------------------------------------------------------------
expect_refusal(max_new_tokens_negative "--max-new-tokens.*-1" ${gen} --prompt abc --max-new-tokens -1)
expect_refusal(max_new_tokens_2_64 "--max-new-tokens" ${gen} --prompt abc --max-new-tokens 18446744073709551615)
expect_refusal(max_new_tokens_1e12 "--max-new-tokens.*1000000000000" ${gen} --prompt abc --max-new-tokens 1000000000000)
expect_refusal(max_new_tokens_past_positions "--max-new-tokens 40 must be at most the model's max_position_embeddings 32"
               ${gen} --prompt abc --max-new-tokens 40)
expect_refusal(long_prompt "prompt 0 has 55 tokens; with max_new_tokens 8 the model would see 62 positions, more than its 32"
               ${gen} --prompt "abc abc abc abc abc abc abc abc abc abc abc abc abc abc" --max-new-tokens 8)
# compare-modes applies the same cap (--max-new-tokens, then prompt + new tokens) and policy
set(cmp ${CLI} compare-modes --model ${MODEL} --tokenizer ${TOKENIZER} --samples 1)
expect_refusal(compare_modes_max_new_tokens_past_positions "--max-new-tokens 40 must be at most the model's max_position_embeddings 32 \\(config.json\\)"
               ${cmp} --prompt abc --max-new-tokens 40)
expect_refusal(compare_modes_long_prompt "prompt 0 has 55 tokens; with max_new_tokens 8 the model would see 62 positions, more than its 32"
               ${cmp} --prompt "abc abc abc abc abc abc abc abc abc abc abc abc abc abc" --max-new-tokens 8)
execute_process(COMMAND ${cmp} --prompt "abc abc abc abc abc abc abc abc abc abc abc abc abc abc" --max-new-tokens 8
                        --long-prompt keep-end RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "per step: token")
  set(failures "${failures}\n  compare_modes_long_prompt_keep_end: exit status '${rc}' (expected 0 and the table)\n    stderr: ${err}")
endif()
expect_refusal(compare_modes_long_prompt_policy "--long-prompt" ${cmp} --prompt abc --long-prompt cut)
# the documented alternative: keep-end drops the prompt's first tokens and generates
execute_process(COMMAND ${gen} --prompt "abc abc abc abc abc abc abc abc abc abc abc abc abc abc" --max-new-tokens 8
                        --long-prompt keep-end RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  set(failures "${failures}\n  long_prompt_keep_end: exit status '${rc}' (expected 0)\n    stderr: ${err}")
endif()
expect_refusal(long_prompt_policy "--long-prompt" ${gen} --prompt abc --long-prompt cut)
expect_refusal(prompt_number_beyond_float "prompt 0 holds the number 1e300, which does not fit the model's 32-bit floats"
               ${gen} --prompt "a 1e300 b" --max-new-tokens 2)

# --- prompts JSONL ------------------------------------------------------------------------------
file(WRITE ${WORK}/prompts_overflow.jsonl "\"abc\"\n{\"prompt\": \"abc\", \"n\": 1e400}\n")
expect_refusal(prompts_number_overflow "prompts_overflow.jsonl:2: not valid JSON"
               ${gen} --prompts ${WORK}/prompts_overflow.jsonl)

# --- tokenizer.json -----------------------------------------------------------------------------
file(READ ${TOKENIZER} tokenizer_text)
foreach(id 2147483647 2147483648 4294967301)
  string(REPLACE "\"added_tokens\": []" "\"added_tokens\": [{\"id\": ${id}, \"content\": \"<e>\"}]" bad "${tokenizer_text}")
  file(WRITE ${WORK}/tokenizer_id_${id}.json "${bad}")
  expect_refusal(tokenizer_added_id_${id} "tokenizer_id_${id}.json: added_tokens\\[0\\]\\.id must be an integer in \\[0, 50000000\\]"
                 ${gen_model} --tokenizer ${WORK}/tokenizer_id_${id}.json --prompt abc)
endforeach()
string(REPLACE "\"added_tokens\": []" "\"added_tokens\": [{\"id\": 300, \"content\": \"<e>\", \"special\": \"yes\"}]"
       bad "${tokenizer_text}")
file(WRITE ${WORK}/tokenizer_special.json "${bad}")
expect_refusal(tokenizer_special_type "tokenizer_special.json: added_tokens\\[0\\]\\.special must be true or false"
               ${gen_model} --tokenizer ${WORK}/tokenizer_special.json --prompt abc)
string(REPLACE "\"version\": \"1.0\"" "\"version\": 1e400" bad "${tokenizer_text}")
file(WRITE ${WORK}/tokenizer_overflow.json "${bad}")
expect_refusal(tokenizer_number_overflow "tokenizer_overflow.json: not valid JSON"
               ${gen_model} --tokenizer ${WORK}/tokenizer_overflow.json --prompt abc)

# --- config.json --------------------------------------------------------------------------------
file(READ ${MODEL}/config.json config_text)
# bad_config(NAME REGEX FIELD VALUE [FIELD VALUE]…): the model with those config.json fields replaced.
function(bad_config name regex)
  set(dir ${WORK}/model_${name})
  file(COPY ${MODEL}/ DESTINATION ${dir})
  set(bad "${config_text}")
  set(pairs ${ARGN})
  while(pairs)
    list(POP_FRONT pairs field value)
    string(REGEX REPLACE "\"${field}\": [^,}]+" "\"${field}\": ${value}" bad "${bad}")
  endwhile()
  file(WRITE ${dir}/config.json "${bad}")
  expect_refusal(config_${name} "${regex}" ${CLI} generate --model ${dir} --tokenizer ${TOKENIZER} --prompt abc)
  set(failures "${failures}" PARENT_SCOPE)
endfunction()
bad_config(vocab_2_40 "config.json: field 'vocab_size' must be an integer in \\[1, 67108864\\]" vocab_size 1099511627776)
bad_config(intermediate_2_50 "field 'intermediate_size' must be an integer in \\[1, 1048576\\]" intermediate_size 1125899906842624)
bad_config(layers_2_40 "field 'num_hidden_layers' must be an integer in \\[1, 4096\\]" num_hidden_layers 1099511627776)
bad_config(too_big_for_memory "config.json: the model would need about [0-9]+ bytes for its parameters alone"
           vocab_size 67108864 hidden_size 65536 causal_size 65536)
bad_config(rope_overflow "config.json: not valid JSON" rope_theta 1e400)
bad_config(max_position_type "field 'max_position_embeddings' must be an integer" max_position_embeddings "\"long\"")

# --- batch JSON (forward) -----------------------------------------------------------------------
function(bad_batch name text regex)
  file(WRITE ${WORK}/batch_${name}.json "${text}")
  expect_refusal(batch_${name} "batch_${name}.json: ${regex}" ${fwd} --inputs ${WORK}/batch_${name}.json)
  set(failures "${failures}" PARENT_SCOPE)
endfunction()
bad_batch(ragged "{\"input_ids\": [[1, 2, 3], [4, 5, 6]], \"labels\": [[2, 3, -100], [5, 6]]}"
          "field 'labels' row 1 must be an array of 3 values")
bad_batch(number_overflow "{\"input_ids\": [[1, 2]], \"numeric_values\": [[0, 1e400]]}" "not valid JSON")
bad_batch(value_beyond_float "{\"input_ids\": [[1, 20]], \"numeric_values\": [[0, 1e308]]}"
          "field 'numeric_values' \\[0\\]\\[1\\] = 1e\\+?308 does not fit the model's 32-bit floats")
bad_batch(position_huge "{\"input_ids\": [[1, 2]], \"position_ids\": [[0, 9223372036854775807]]}"
          "field 'position_ids' \\[0\\]\\[1\\] = 9223372036854775807 must lie in \\[0, 16777216\\)")
bad_batch(position_past_model "{\"input_ids\": [[1, 2]], \"position_ids\": [[0, 40]]}"
          "field 'position_ids' \\[0\\]\\[1\\] = 40 must be below the model's max_position_embeddings 32")
bad_batch(mask_all_zero "{\"input_ids\": [[1, 2], [3, 4]], \"attention_mask\": [[1, 1], [0, 0]]}"
          "field 'attention_mask' row 1 is all 0")
bad_batch(id_beyond_int64 "{\"input_ids\": [[1, 18446744073709551615]]}"
          "field 'input_ids' \\[0\\]\\[1\\] must be an integer in")

# finite inputs that make a non-finite result in f64 (1e308 fits a double): reported, not written
file(WRITE ${WORK}/batch_f64_overflow.json
     "{\"input_ids\": [[1, 20, 20]], \"numeric_values\": [[0, 1e308, -1e308]], \"labels\": [[20, 20, 1]], \"target_values\": [[1e308, -1e308, 0]]}")
expect_refusal(forward_non_finite_output "forward: [0-9]+ output tensors hold non-finite values, the first [a-z_.]+ .*nothing written"
               ${fwd} --inputs ${WORK}/batch_f64_overflow.json --dtype f64)
if(EXISTS ${WORK}/never.safetensors)
  set(failures "${failures}\n  forward_non_finite_output: the output file was written")
endif()

# --- a training run's checkpoints/LATEST (train --resume) -------------------------------------
file(WRITE ${WORK}/train.jsonl "{\"text\": \"the value is 3\"}\n{\"text\": \"and 4 more\"}\n")
execute_process(COMMAND ${CLI} bpe --corpus ${WORK}/train.jsonl --vocab-size 300 --out ${WORK}/train_tokenizer.json
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  set(failures "${failures}\n  train_tokenizer: bpe exit status '${rc}'\n    stderr: ${err}")
endif()
foreach(latest "../../etc" "step-" "")
  string(MAKE_C_IDENTIFIER "latest_${latest}" name)
  file(MAKE_DIRECTORY ${WORK}/${name}/checkpoints)
  file(WRITE ${WORK}/${name}/checkpoints/LATEST "${latest}\n")
  expect_refusal(${name} "${name}/checkpoints/LATEST: names '[^']*', expected a checkpoint name such as step-00000120"
                 ${CLI} train --preset tiny --tokenizer ${WORK}/train_tokenizer.json --data ${WORK}/train.jsonl
                 --out ${WORK}/${name} --steps 2 --resume)
endforeach()
expect_refusal(keep_tiles_without_streaming "--keep-tiles 8 is memory for --optimizer streaming's tiles; --optimizer adamw forms no tiles"
               ${CLI} train --preset tiny --tokenizer ${WORK}/train_tokenizer.json --data ${WORK}/train.jsonl
               --out ${WORK}/keep_tiles --steps 2 --keep-tiles 8)
expect_refusal(keep_tiles_overflow "--keep-tiles 18446744073709551615 MiB does not fit in a byte count"
               ${CLI} train --preset tiny --tokenizer ${WORK}/train_tokenizer.json --data ${WORK}/train.jsonl
               --out ${WORK}/keep_tiles --steps 2 --optimizer streaming --keep-tiles 18446744073709551615)

# --- numbers on the command line: signed, in range, finite (numeric_options.hpp) --------------
set(train_t ${CLI} train --preset tiny --tokenizer ${WORK}/train_tokenizer.json --data ${WORK}/train.jsonl)
foreach(value 288230376151711745 1152921504606846976 9223372036854775808)
  expect_refusal(train_batch_size_${value} "--batch-size ${value}: expected an integer in \\[1, 2\\^20\\]"
                 ${train_t} --steps 2 --batch-size ${value} --out ${WORK}/never)
endforeach()
foreach(value 4611686018427387904 9223372036854775808 -5)
  expect_refusal(train_seq_len_${value} "--seq-len ${value}: expected an integer in \\[1, 2\\^24\\]"
                 ${train_t} --steps 2 --seq-len ${value} --out ${WORK}/never)
endforeach()
expect_refusal(demo_batch_2_60 "--batch 1152921504606846976: expected an integer in \\[1, 2\\^20\\]"
               ${CLI} demo --out ${WORK}/never --batch 1152921504606846976)
expect_refusal(train_steps_negative "--steps -1: expected an integer in \\[1, 10\\^9\\]" ${train_t} --steps -1 --out ${WORK}/never)
expect_refusal(train_seed_negative "--seed -1: expected an integer in \\[0, 2\\^63-1\\]" ${train_t} --seed -1 --out ${WORK}/never)
expect_refusal(generate_top_k_negative "--top-k -1: expected an integer in" ${gen} --prompt abc --top-k -1)
expect_refusal(generate_top_k_2_64 "--top-k 18446744073709551616: expected an integer in" ${gen} --prompt abc --top-k 18446744073709551616)
expect_refusal(generate_interval_nan "--interval nan: expected a finite number in \\(0, 1\\)" ${gen} --prompt abc --interval nan)
expect_refusal(report_threshold_nan "--threshold nan: expected a finite number in \\(-inf, inf\\)"
               ${CLI} report --model ${MODEL} --inputs ${MODEL}/../inputs.json --threshold nan)
expect_refusal(train_clip_nan "--clip nan: expected a finite number in \\[0, inf\\)" ${train_t} --clip nan --out ${WORK}/never)
# an option of two names: the refusal names the one typed
expect_refusal(train_alpha_nan "error: --alpha nan: expected a finite number in \\[0, 1\\]" ${train_t} --alpha nan --out ${WORK}/never)
expect_refusal(train_alpha_start_nan "error: --alpha-start nan: expected a finite number in \\[0, 1\\]"
               ${train_t} --alpha-start nan --out ${WORK}/never)
expect_refusal(train_alpha_twice "--alpha-start excludes --alpha" ${train_t} --alpha 0.5 --alpha-start 0.5 --out ${WORK}/never)
foreach(value nan inf -1 1e309)
  expect_refusal(train_lr_${value} "--lr ${value}: expected a finite number in \\(0, inf\\)" ${train_t} --lr=${value} --out ${WORK}/never)
endforeach()
expect_refusal(train_keep_tiles_text "--keep-tiles 12x: expected an integer in" ${train_t} --keep-tiles 12x --out ${WORK}/never)

# --- sizes: what is being allocated and how much, checked before the allocation ----------------
expect_refusal(train_batch_beyond_memory "a \\[B,S\\] = \\[1048576,16777216\\] batch needs [0-9.]+ [KMGTPE]iB \\([0-9]+ bytes\\), more than the [0-9.]+ [KMGTPE]iB \\([0-9]+ bytes\\) of (memory available now|this machine.s physical memory)"
               ${train_t} --steps 2 --batch-size 1048576 --seq-len 16777216 --out ${WORK}/never)
expect_refusal(demo_batch_beyond_memory "a \\[B,S\\] = \\[1048576,16777216\\] batch needs .* more than the .* bytes\\) of (memory available now|this machine.s physical memory)"
               ${CLI} demo --out ${WORK}/demo_never --steps 1 --train-sentences 40 --val-sentences 8 --vocab 280 --plain
               --batch 1048576 --seq 16777216)
expect_refusal(synth_count_beyond_memory "1000000000 synthetic sentences needs .* bytes\\), more than the .* bytes\\) of (memory available now|this machine.s physical memory)"
               ${CLI} synth --out ${WORK}/never.jsonl --count 1000000000)
expect_refusal(compare_modes_samples_2_40 "--samples 1099511627776: expected an integer in \\[1, 1024\\]"
               ${CLI} compare-modes --model ${MODEL} --tokenizer ${TOKENIZER} --prompt abc --samples 1099511627776)
# (eval --seq-len 1048576 --batch-size 65536, past the position cap: eval_cli.cmake, on a model with its tokenizer)

# --- the position cap of a model whose config.json states none: the default, 32768 -------------
file(COPY ${MODEL}/ DESTINATION ${WORK}/model_no_cap)
string(REGEX REPLACE "\"max_position_embeddings\": [0-9]+,?" "" no_cap "${config_text}")
file(WRITE ${WORK}/model_no_cap/config.json "${no_cap}")
expect_refusal(default_position_cap "--max-new-tokens 40000 must be at most the model's max_position_embeddings 32768 \\(the default cap: config.json states none\\)"
               ${CLI} generate --model ${WORK}/model_no_cap --tokenizer ${TOKENIZER} --prompt abc --max-new-tokens 40000)
expect_refusal(compare_modes_default_position_cap "--max-new-tokens 40000 must be at most the model's max_position_embeddings 32768 \\(the default cap: config.json states none\\)"
               ${CLI} compare-modes --model ${WORK}/model_no_cap --tokenizer ${TOKENIZER} --prompt abc --max-new-tokens 40000)

# --- streams: read errors and endless lines are refused, never taken for the end of the input -----
function(expect_refusal_stdin name regex input)
  execute_process(COMMAND ${ARGN} INPUT_FILE ${input} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  string(STRIP "${err}" line)
  if(NOT rc STREQUAL "1" AND NOT rc STREQUAL "2")
    set(failures "${failures}\n  ${name}: exit status '${rc}' (expected 1 or 2)\n    stderr: ${err}" PARENT_SCOPE)
  elseif(line MATCHES "\n" OR NOT line MATCHES "${regex}")
    set(failures "${failures}\n  ${name}: stderr does not match '${regex}' on one line\n    stderr: ${err}" PARENT_SCOPE)
  else()
    message(STATUS "${name}: exit ${rc}: ${line}")
  endif()
endfunction()
if(EXISTS /dev/zero)
  expect_refusal_stdin(tokenize_dev_zero "tokenize: stdin:1: the line is longer than 64 MiB, the limit of a line" /dev/zero
                       ${CLI} tokenize --tokenizer ${TOKENIZER})
  expect_refusal(generate_prompts_dev_zero "/dev/zero:1: the line is longer than 64 MiB" ${gen} --prompts /dev/zero)
  expect_refusal(train_dev_zero "/dev/zero:1: the line is longer than 64 MiB"
                 ${CLI} train --preset tiny --tokenizer ${WORK}/train_tokenizer.json --steps 2 --data /dev/zero --out ${WORK}/never)
  expect_refusal(forward_dev_zero "/dev/zero: holds more than 256 MiB, the limit of a JSON file" ${fwd} --inputs /dev/zero)
  expect_refusal(tokenizer_dev_zero "/dev/zero: holds more than 256 MiB, the limit of a JSON file" ${gen_model} --tokenizer /dev/zero --prompt abc)
  expect_refusal(bpe_dev_zero "/dev/zero:1: the line is longer than 64 MiB" ${CLI} bpe --corpus /dev/zero --vocab-size 300 --out ${WORK}/never.json)
endif()
file(WRITE ${WORK}/prompts_empty.jsonl "")
expect_refusal(prompts_empty "prompts_empty.jsonl: the file holds no prompt \\(it is empty\\)" ${gen} --prompts ${WORK}/prompts_empty.jsonl)
file(WRITE ${WORK}/prompts_blank.jsonl "\n  \n")
expect_refusal(prompts_blank "prompts_blank.jsonl: the file holds no prompt \\(2 lines, all blank\\)" ${gen} --prompts ${WORK}/prompts_blank.jsonl)
# invalid bytes in a parse error are escaped, not copied to the terminal
execute_process(COMMAND printf "\"ab\\377\"\\n" OUTPUT_FILE ${WORK}/prompts_bad_byte.jsonl)
execute_process(COMMAND ${gen} --prompts ${WORK}/prompts_bad_byte.jsonl RESULT_VARIABLE rc ERROR_VARIABLE err)
string(HEX "${err}" err_hex)
if(NOT rc EQUAL 1 OR NOT err MATCHES "prompts_bad_byte.jsonl:1: not valid JSON" OR NOT err MATCHES "\\\\xff" OR err_hex MATCHES "^(..)*ff")
  set(failures "${failures}\n  prompts_bad_byte: expected exit 1 and the byte written as \\xff, got ${rc}: ${err}")
endif()

# --- messages -----------------------------------------------------------------------------------
expect_refusal(report_text_empty "--text: 1 required TEXT missing"
               ${CLI} report --model ${MODEL} --tokenizer ${TOKENIZER} --text "")
expect_refusal(bpe_special_twice "bpe: --special 'a' is given twice: each special token has one id"
               ${CLI} bpe --corpus ${WORK}/train.jsonl --vocab-size 300 --out ${WORK}/never.json --special a a)

# --- resume: the state must match its folder and the run; LATEST missing is not a fresh start ----
execute_process(COMMAND ${train_t} --steps 2 --batch-size 2 --seq-len 8 --out ${WORK}/resume_run --resume
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "resume: [^\n]*resume_run/checkpoints holds no checkpoint yet: starting from step 0")
  set(failures "${failures}\n  resume_fresh: exit ${rc}, expected 0 and 'holds no checkpoint yet: starting from step 0'\n    ${out}${err}")
endif()
set(state ${WORK}/resume_run/checkpoints/step-00000002/trainer_state.json)
if(EXISTS ${state})
  file(READ ${state} state_text)
  expect_refusal(resume_past_steps "step-00000002: the checkpoint is at step 2, past this run's 1 steps"
                 ${train_t} --steps 1 --batch-size 2 --seq-len 8 --out ${WORK}/resume_run --resume)
  foreach(step 999 9223372036854775808)
    string(REGEX REPLACE "\"step\": *2" "\"step\": ${step}" bad_state "${state_text}")
    file(WRITE ${state} "${bad_state}")
    expect_refusal(resume_state_step_${step} "step-00000002/trainer_state.json: field 'step' is ${step}, but the checkpoint's directory is step-00000002"
                   ${train_t} --steps 2 --batch-size 2 --seq-len 8 --out ${WORK}/resume_run --resume)
  endforeach()
  file(WRITE ${state} "${state_text}")
  file(REMOVE ${WORK}/resume_run/checkpoints/LATEST)
  expect_refusal(resume_without_latest "resume_run/checkpoints: holds 1 checkpoint directories \\(step-00000002\\) but no LATEST"
                 ${train_t} --steps 4 --batch-size 2 --seq-len 8 --out ${WORK}/resume_run --resume)
else()
  set(failures "${failures}\n  resume_fresh: no checkpoint ${state} written")
endif()

if(failures)
  message(FATAL_ERROR "bad input not refused as one line with exit status 1 or 2:${failures}")
endif()
