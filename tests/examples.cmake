# ctest checks of the example programs (kestrel-run, the C example `simple`, the Python binding)
# against llama2.c's run.c outputs in ../shared/models/*/expected.json. Fixtures convert the
# models once. Without ../shared the checks fail, unless KESTREL_ALLOW_MISSING_SHARED=1 is set in
# the environment, when they are reported as skipped (exit code 77).
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(WARNING "python3 not found: the example tests are not registered")
  return()
endif()
if(NOT TARGET kestrel-convert OR NOT TARGET kestrel-run)
  message(STATUS "examples not built: the example tests are not registered")
  return()
endif()

set(KESTREL_CHECK ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_expected.py)
# In a cross build the programs run under the emulator (qemu-aarch64; it reads QEMU_CPU).
set(KESTREL_RUNNER ${CMAKE_CROSSCOMPILING_EMULATOR})
set(KESTREL_TEST_MODELS ${CMAKE_BINARY_DIR}/test-models)
set(KESTREL_STORIES_DIR ${KESTREL_SHARED_DIR}/models/stories260K)
set(KESTREL_AIDREAMS_DIR ${KESTREL_SHARED_DIR}/models/aidreams260K)
set(KESTREL_STORIES_F32 ${KESTREL_TEST_MODELS}/stories260K-f32.vqf)
set(KESTREL_AIDREAMS_F32 ${KESTREL_TEST_MODELS}/aidreams260K-f32.vqf)
file(MAKE_DIRECTORY ${KESTREL_TEST_MODELS})

# Fixtures: the converted models.
add_test(NAME kestrel_fixture_stories_f32
         COMMAND ${KESTREL_CHECK} run
                 --require ${KESTREL_STORIES_DIR}/stories260K.bin --require ${KESTREL_STORIES_DIR}/tok512.bin --
                 ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-convert> ${KESTREL_STORIES_DIR}/stories260K.bin
                 --tokenizer ${KESTREL_STORIES_DIR}/tok512.bin -o ${KESTREL_STORIES_F32})
set_tests_properties(kestrel_fixture_stories_f32 PROPERTIES FIXTURES_SETUP kestrel_stories_f32 SKIP_RETURN_CODE 77)
add_test(NAME kestrel_fixture_aidreams_f32
         COMMAND ${KESTREL_CHECK} run
                 --require ${KESTREL_AIDREAMS_DIR}/aidreams260K.bin --require ${KESTREL_AIDREAMS_DIR}/tok512.bin --
                 ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-convert> ${KESTREL_AIDREAMS_DIR}/aidreams260K.bin
                 --tokenizer ${KESTREL_AIDREAMS_DIR}/tok512.bin -o ${KESTREL_AIDREAMS_F32})
set_tests_properties(kestrel_fixture_aidreams_f32 PROPERTIES FIXTURES_SETUP kestrel_aidreams_f32 SKIP_RETURN_CODE 77)

# kestrel-run reproduces run.c exactly.
add_test(NAME kestrel_run_expected_stories260K
         COMMAND ${KESTREL_CHECK} expect --expected ${KESTREL_STORIES_DIR}/expected.json --require ${KESTREL_STORIES_F32} --
                 ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-run> -m ${KESTREL_STORIES_F32} -p {prompt} -n {n} --temp 0)
set_tests_properties(kestrel_run_expected_stories260K PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32)
add_test(NAME kestrel_run_expected_aidreams260K
         COMMAND ${KESTREL_CHECK} expect --expected ${KESTREL_AIDREAMS_DIR}/expected.json --require ${KESTREL_AIDREAMS_F32} --
                 ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-run> -m ${KESTREL_AIDREAMS_F32} -p {prompt} -n {n} --temp 0)
set_tests_properties(kestrel_run_expected_aidreams260K PROPERTIES FIXTURES_REQUIRED kestrel_aidreams_f32)

# kestrel-run's failures: a nonzero exit and a message naming the status.
add_test(NAME kestrel_run_error_missing_model
         COMMAND ${KESTREL_CHECK} fail --one-line --stderr-regex "^kestrel-run: .*KESTREL_ERROR_IO" --
                 ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-run> -m ${KESTREL_TEST_MODELS}/does-not-exist.vqf -p hello -n 4)
add_test(NAME kestrel_run_error_unknown_backend
         COMMAND ${KESTREL_CHECK} fail --one-line --stderr-regex "^kestrel-run: .*nope.*KESTREL_ERROR_BACKEND_UNAVAILABLE" --require ${KESTREL_STORIES_F32} --
                 ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-run> -m ${KESTREL_STORIES_F32} --backend nope -p hello -n 4)
set_tests_properties(kestrel_run_error_unknown_backend PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32)
add_test(NAME kestrel_run_error_negative_temperature
         COMMAND ${KESTREL_CHECK} fail --stderr-regex "kestrel-run: .*temperature.*KESTREL_ERROR_INVALID_ARGUMENT" --require ${KESTREL_STORIES_F32} --
                 ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-run> -m ${KESTREL_STORIES_F32} --temp -1 -p hello -n 4)
set_tests_properties(kestrel_run_error_negative_temperature PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32)
add_test(NAME kestrel_run_error_usage
         COMMAND ${KESTREL_CHECK} fail --stderr-regex "^kestrel-run: no model given" -- ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-run> -p hello)

# kestrel-bench: one result per test and thread count, in JSON and markdown, with the measured
# bandwidth and decode's fraction of it; on the auto-selected backend and on generic.
if(TARGET kestrel-bench)
  foreach(backend auto generic)
    set(backend_arg)
    if(NOT backend STREQUAL "auto")
      set(backend_arg --backend ${backend})
    endif()
    add_test(NAME kestrel_bench_output_${backend}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_bench.py --model ${KESTREL_STORIES_F32}
                     ${backend_arg} -- ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-bench>)
    set_tests_properties(kestrel_bench_output_${backend} PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32
                         SKIP_RETURN_CODE 77)
  endforeach()
  # Decode after 100 positions of context (-d), with an f32 KV cache (--kv; f16 is the default).
  add_test(NAME kestrel_bench_output_depth
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_bench.py --model ${KESTREL_STORIES_F32}
                   --depth 100 --kv f32 -- ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-bench>)
  set_tests_properties(kestrel_bench_output_depth PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32 SKIP_RETURN_CODE 77)
  add_test(NAME kestrel_bench_error_missing_model
           COMMAND ${KESTREL_CHECK} fail --one-line --stderr-regex "^kestrel-bench: .*does-not-exist" --
                   ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-bench> -m ${KESTREL_TEST_MODELS}/does-not-exist.vqf)
  add_test(NAME kestrel_bench_error_kv
           COMMAND ${KESTREL_CHECK} fail --one-line --stderr-regex "^kestrel-bench: --kv must be f32 or f16, got 'q8'" --
                   ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-bench> -m ${KESTREL_STORIES_F32} --kv q8)
  set_tests_properties(kestrel_bench_error_kv PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32)
  add_test(NAME kestrel_bench_error_threads
           COMMAND ${KESTREL_CHECK} fail --one-line --stderr-regex "^kestrel-bench: -t takes" --
                   ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-bench> -m ${KESTREL_STORIES_F32} -t 1,x)
  add_test(NAME kestrel_bench_error_context
           COMMAND ${KESTREL_CHECK} fail --one-line --stderr-regex "^kestrel-bench: -p \\+ -d \\+ -n = 600 exceeds the model's context of 512"
                   --require ${KESTREL_STORIES_F32} --
                   ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-bench> -m ${KESTREL_STORIES_F32} -p 500 -n 100)
  set_tests_properties(kestrel_bench_error_context PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32)
endif()

# bench/compare_table.py (the llama.cpp comparison's table): its ratios and confidence interval on
# made-up results whose figures are worked out by hand.
add_test(NAME bench_compare_table
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_compare_table.py
                 ${PROJECT_SOURCE_DIR}/bench/compare_table.py)

# kestrel-alternate: both files timed every round, a ratio per round, and clear errors.
if(TARGET kestrel-alternate)
  foreach(test_arg "-n;4" "-p;8")
    string(REPLACE ";" "" test_name "${test_arg}")
    add_test(NAME kestrel_alternate_output${test_name}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_alternate.py --model ${KESTREL_STORIES_F32}
                     --rounds 3 ${test_arg} -- ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-alternate>)
    set_tests_properties(kestrel_alternate_output${test_name} PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32)
    # --env-b: B's session alone made under a setting (here one that prints its logits).
    add_test(NAME kestrel_alternate_env_b${test_name}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_alternate.py --model ${KESTREL_STORIES_F32}
                     --rounds 2 --env-b ${test_arg} -- ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-alternate>)
    set_tests_properties(kestrel_alternate_env_b${test_name} PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32)
  endforeach()
  add_test(NAME kestrel_alternate_error_env
           COMMAND ${KESTREL_CHECK} fail --one-line --stderr-regex "^kestrel-alternate: --env-b takes NAME=VALUE, got '=1'" --
                   ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-alternate> -a x.vqf -b y.vqf -n 4 --env-b =1)
  add_test(NAME kestrel_alternate_error_missing_model
           COMMAND ${KESTREL_CHECK} fail --one-line --stderr-regex "^kestrel-alternate: .*does-not-exist" --
                   ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-alternate> -a ${KESTREL_STORIES_F32}
                   -b ${KESTREL_TEST_MODELS}/does-not-exist.vqf -n 4)
  set_tests_properties(kestrel_alternate_error_missing_model PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32)
  add_test(NAME kestrel_alternate_error_test
           COMMAND ${KESTREL_CHECK} fail --stderr-regex "give exactly one of -p \\(prefill\\) and -n \\(decode\\)" --
                   ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-alternate> -a x.vqf -b y.vqf -p 8 -n 4)
  add_test(NAME kestrel_alternate_error_context
           COMMAND ${KESTREL_CHECK} fail --one-line --stderr-regex "^kestrel-alternate: .*: 601 positions exceed the model's context of 512"
                   --require ${KESTREL_STORIES_F32} --
                   ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-alternate> -a ${KESTREL_STORIES_F32} -b ${KESTREL_STORIES_F32} -n 600)
  set_tests_properties(kestrel_alternate_error_context PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32)
endif()

# bench/make_synthetic_gguf.py (the GGUF files of bench/compare_llama_cpp.sh): a tiny Qwen3-shaped
# file with the shared Qwen3 tokenizer converts with the default type, keeping its quantization, and
# decodes with every value finite.
if(TARGET kestrel-inspect)
  set(runner_arg)
  if(KESTREL_RUNNER)
    set(runner_arg --runner ${KESTREL_RUNNER})
  endif()
  foreach(type q4_0 q8_0 bf16)
    # Each also leaves synthetic-tiny-${type}.vqf in the test-models folder for the tests below.
    add_test(NAME bench_synthetic_gguf_${type}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_synthetic_gguf.py
                     --tokenizer ${KESTREL_SHARED_DIR}/tokenizers/qwen3/tokenizer.json
                     --workdir ${KESTREL_TEST_MODELS} --type ${type} ${runner_arg} --
                     $<TARGET_FILE:kestrel-convert> $<TARGET_FILE:kestrel-inspect> $<TARGET_FILE:kestrel-run>)
    set_tests_properties(bench_synthetic_gguf_${type} PROPERTIES SKIP_RETURN_CODE 77
                         FIXTURES_SETUP kestrel_synthetic_tiny_${type})
  endforeach()
  # kestrel-bench --roles where products do run on two threads (the tiny model's 151936-row LM
  # head): the idle share and its start-wait part on every two-thread result, none on one thread.
  if(TARGET kestrel-bench)
    add_test(NAME kestrel_bench_output_split_products
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_bench.py
                     --model ${KESTREL_TEST_MODELS}/synthetic-tiny-q4_0.vqf --split-products --
                     ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-bench>)
    set_tests_properties(kestrel_bench_output_split_products PROPERTIES
                         FIXTURES_REQUIRED kestrel_synthetic_tiny_q4_0 SKIP_RETURN_CODE 77)
  endif()
endif()

# The C example.
if(TARGET kestrel-simple)
  add_test(NAME example_c_simple_expected
           COMMAND ${KESTREL_CHECK} expect --expected ${KESTREL_STORIES_DIR}/expected.json --case 0
                   --require ${KESTREL_STORIES_F32} --
                   ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-simple> ${KESTREL_STORIES_F32} {prompt} {n})
  set_tests_properties(example_c_simple_expected PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32)
  add_test(NAME example_c_simple_error
           COMMAND ${KESTREL_CHECK} fail --one-line --stderr-regex "^simple: load: .*KESTREL_ERROR_IO" --
                   ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-simple> ${KESTREL_TEST_MODELS}/does-not-exist.vqf)
endif()

# The Python (ctypes) binding: the host's Python cannot load a cross-built library.
if(NOT CMAKE_CROSSCOMPILING)
set(KESTREL_GENERATE_PY ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/examples/python/generate.py
    --lib $<TARGET_FILE:kestrel>)
add_test(NAME example_python_expected
         COMMAND ${KESTREL_CHECK} expect --expected ${KESTREL_STORIES_DIR}/expected.json --require ${KESTREL_STORIES_F32} --
                 ${KESTREL_GENERATE_PY} -m ${KESTREL_STORIES_F32} -p {prompt} -n {n} --temp 0)
set_tests_properties(example_python_expected PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32)
add_test(NAME example_python_error_missing_model
         COMMAND ${KESTREL_CHECK} fail --one-line --stderr-regex "^generate.py: KESTREL_ERROR_IO \\(2\\): " --
                 ${KESTREL_GENERATE_PY} -m ${KESTREL_TEST_MODELS}/does-not-exist.vqf -p hello -n 4)
endif()

foreach(t kestrel_fixture_stories_f32 kestrel_fixture_aidreams_f32 kestrel_run_expected_stories260K
          kestrel_run_expected_aidreams260K kestrel_run_error_unknown_backend kestrel_run_error_negative_temperature
          example_c_simple_expected example_python_expected kestrel_bench_output_auto kestrel_bench_output_generic kestrel_bench_output_depth
          kestrel_bench_error_context)
  if(TEST ${t})
    set_tests_properties(${t} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "examples;shared")
  endif()
endforeach()

# Built-in diagnostics: per-layer statistics and logit fingerprints, read-only and deterministic.
add_test(NAME diagnostics_dump_layers_and_logits
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_diagnostics.py ${KESTREL_STORIES_F32} 5
                 ${KESTREL_RUNNER} $<TARGET_FILE:kestrel-run>)
set_tests_properties(diagnostics_dump_layers_and_logits PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32
                     SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "examples;shared")

# Installation: find_package(Kestrel) (shared and static), pkg-config, and only the C API exported.
if(NOT CMAKE_CROSSCOMPILING)
add_test(NAME install_and_downstream_build
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/check_install.sh ${CMAKE_BINARY_DIR} ${PROJECT_SOURCE_DIR}
                 ${KESTREL_STORIES_F32})
set_tests_properties(install_and_downstream_build PROPERTIES FIXTURES_REQUIRED kestrel_stories_f32 TIMEOUT 300
                     RUN_SERIAL TRUE)
endif()
