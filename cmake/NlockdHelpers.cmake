# SPDX-License-Identifier: Apache-2.0
# Warnings every nlockd target compiles with.
add_library(nlockd_warnings INTERFACE)
target_compile_options(nlockd_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wnon-virtual-dtor
  # g++ 12 reports Asio's coroutine frame allocator as a mismatched new/delete (a false
  # positive on coroutines; GCC bug 109224).
  $<$<CXX_COMPILER_ID:GNU>:-Wno-mismatched-new-delete>
  # g++ 12 at -O3 reports std::string concatenation as overlapping (GCC bug 105329).
  $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict>
  $<$<BOOL:${NLOCKD_WERROR}>:-Werror>)

# nlockd_module(NAME SOURCES ... DEPS ...): the static library nlockd_NAME, alias nlockd::NAME,
# with includes rooted at src/ and include/.
function(nlockd_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(nlockd_${name} STATIC ${ARG_SOURCES})
  add_library(nlockd::${name} ALIAS nlockd_${name})
  target_include_directories(nlockd_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src
                                                   ${PROJECT_SOURCE_DIR}/include
                                                   ${PROJECT_BINARY_DIR}/include)
  target_link_libraries(nlockd_${name} PUBLIC ${ARG_DEPS} PRIVATE nlockd_warnings)
endfunction()

# nlockd_library_modules(MODULE ...): these modules also go into the installed libnlockd
# (static and shared), so they are compiled position-independent, with their symbols hidden
# unless the public API exports them (include/nlockd/export.hpp).
function(nlockd_library_modules)
  foreach(module ${ARGN})
    set_target_properties(nlockd_${module} PROPERTIES
      POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  endforeach()
endfunction()

# nlockd_test(NAME LABEL unit|integration|db SOURCES ... DEPS ...): a gtest binary run by ctest.
function(nlockd_test name)
  if(NOT NLOCKD_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "LABEL;TIMEOUT" "SOURCES;DEPS" ${ARGN})
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main
                                        nlockd_warnings)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT})
endfunction()
