# Installs the build tree into a scratch prefix, then configures, builds and runs the consumer
# project against it with find_package(causalqwen CONFIG REQUIRED).
# Variables: BUILD_DIR, SOURCE_DIR, WORK_DIR.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
foreach(program consumer consumer_model)
  execute_process(COMMAND ${WORK_DIR}/build/${program} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "the consumer program ${program} ran but failed: ${rc}")
  endif()
endforeach()
message(STATUS "consumer built and ran against the installed causalqwen")
