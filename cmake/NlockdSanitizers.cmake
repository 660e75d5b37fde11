# SPDX-License-Identifier: Apache-2.0
if(NLOCKD_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
elseif(NLOCKD_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # g++ 12 warns that TSan does not model Asio's atomic_thread_fence; with -Werror that
    # would stop the build inside Asio's headers.
    add_compile_options(-Wno-tsan)
  endif()
  add_link_options(-fsanitize=thread)
elseif(NOT NLOCKD_SANITIZE STREQUAL "")
  message(FATAL_ERROR "NLOCKD_SANITIZE must be empty, 'address' or 'thread'")
endif()

if(NLOCKD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "NLOCKD_FUZZ needs clang (CC=clang CXX=clang++)")
  endif()
  # ASan only: clang 14 cannot emit UBSan checks in coroutines ("Cannot represent a difference
  # across sections"); the g++ ASan+UBSan build covers undefined behaviour.
  add_compile_options(-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer)
  # Clang 14 supports C++20 coroutines but does not announce them the way Asio 1.22 checks.
  add_compile_definitions(ASIO_HAS_CO_AWAIT=1 ASIO_HAS_STD_COROUTINE=1)
  add_link_options(-fsanitize=address)
endif()
