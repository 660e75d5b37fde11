# SPDX-License-Identifier: Apache-2.0
# The build's identity for `nlockd --version`, `nlockctl --version`, /api/v1/status and the
# nlockd_build_info metric: the project version, the git revision and the build type, in the
# private header nlockd_build_info.hpp (not installed).
#
# The revision comes from git at configure time; outside a git checkout (a release tarball, a
# Debian source package built without .git) it is "unknown". -DNLOCKD_GIT_REVISION=... sets it.
set(NLOCKD_GIT_REVISION "" CACHE STRING "git revision built (empty: ask git at configure time)")
set(nlockd_revision "${NLOCKD_GIT_REVISION}")
if(nlockd_revision STREQUAL "")
  set(nlockd_revision unknown)
  find_package(Git QUIET)
  if(GIT_FOUND AND EXISTS ${PROJECT_SOURCE_DIR}/.git)
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE git_revision
      RESULT_VARIABLE git_result OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(git_result EQUAL 0 AND NOT git_revision STREQUAL "")
      set(nlockd_revision ${git_revision})
      execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE git_dirty ERROR_QUIET)
      if(NOT git_dirty STREQUAL "")
        string(APPEND nlockd_revision "-dirty")
      endif()
      # Configure again when HEAD moves (a commit or a checkout), so the revision stays true.
      foreach(ref HEAD)
        execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --symbolic-full-name ${ref}
          WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE git_ref
          OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
        foreach(name HEAD ${git_ref})
          execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --path-format=absolute
            --git-path ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
            OUTPUT_VARIABLE git_file OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
          if(git_file AND EXISTS ${git_file})
            set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY
              CMAKE_CONFIGURE_DEPENDS ${git_file})
          endif()
        endforeach()
      endforeach()
    endif()
  endif()
endif()
set(nlockd_build_type "${CMAKE_BUILD_TYPE}")
if(nlockd_build_type STREQUAL "")
  set(nlockd_build_type None)
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/build_info.hpp.in
  ${PROJECT_BINARY_DIR}/include/nlockd_build_info.hpp @ONLY)
message(STATUS "nlockd ${PROJECT_VERSION}, revision ${nlockd_revision}, ${nlockd_build_type}")
