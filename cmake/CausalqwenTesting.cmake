# Test helpers shared by every folder under tests/.
#
#   cq_add_doctest(NAME src... [LIBS lib...] [LABELS l...] [TIMEOUT s])
#       a doctest executable (main from the shared object library) registered with ctest
#   cq_add_static_test(NAME src)
#       a translation unit made only of static_asserts: compiling it is the test
#   cq_add_failtest(NAME src REGEX sentence)
#       a translation unit that must NOT compile, and whose compiler output must contain
#       the sentence (PASS_REGULAR_EXPRESSION), so that an unrelated error cannot pass.
find_package(doctest REQUIRED)

if(NOT TARGET causalqwen_doctest_main)
  add_library(causalqwen_doctest_main OBJECT ${PROJECT_SOURCE_DIR}/tests/doctest_main.cpp)
  target_link_libraries(causalqwen_doctest_main PUBLIC doctest::doctest causalqwen_project_options)
endif()

function(cq_add_doctest name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS} $<TARGET_OBJECTS:causalqwen_doctest_main>)
  target_link_libraries(${name} PRIVATE causalqwen::causalqwen causalqwen_project_options
                                        doctest::doctest ${ARG_LIBS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND ${name} --no-intro=false)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  # the library's programs' thread settings: idle OpenMP threads spin briefly, then sleep
  # (spinning as long as libgomp's default takes the cores other work needs; sleeping at once
  # pays a futex wake-up per parallel region)
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "unit;${ARG_LABELS}"
                                          ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;GOMP_SPINCOUNT=10000")
endfunction()

function(cq_add_static_test name src)
  add_library(${name} OBJECT EXCLUDE_FROM_ALL ${src})
  target_link_libraries(${name} PRIVATE causalqwen::causalqwen causalqwen_project_options)
  # Compiling the object is the test: ctest builds it, and a failed static_assert fails it.
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target ${name})
  set_tests_properties(${name} PROPERTIES LABELS "static")
endfunction()

function(cq_add_failtest name src)
  cmake_parse_arguments(ARG "" "REGEX" "" ${ARGN})
  add_library(${name} OBJECT EXCLUDE_FROM_ALL ${src})
  target_link_libraries(${name} PRIVATE causalqwen::causalqwen causalqwen_project_options)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} --build ${PROJECT_BINARY_DIR} --target ${name})
  set_tests_properties(${name} PROPERTIES
    PASS_REGULAR_EXPRESSION "${ARG_REGEX}" LABELS "failtest" TIMEOUT 300)
endfunction()
