# GoogleTest for the tests: the installed package, or else the sources in
# GRADGATE_GTEST_SOURCE_DIR (a copy of the googletest repository, e.g. /usr/src/googletest), built
# here. Either way the tests link GTest::gtest_main.
set(GRADGATE_GTEST_SOURCE_DIR "" CACHE PATH "GoogleTest sources, used when no GTest is installed")

find_package(GTest QUIET)
if(NOT GTest_FOUND)
  if(NOT EXISTS "${GRADGATE_GTEST_SOURCE_DIR}/CMakeLists.txt")
    message(FATAL_ERROR "GoogleTest not found: install it or set GRADGATE_GTEST_SOURCE_DIR to its "
                        "sources (got '${GRADGATE_GTEST_SOURCE_DIR}')")
  endif()
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  # SYSTEM: its headers are not held to the project's warnings.
  add_subdirectory(${GRADGATE_GTEST_SOURCE_DIR} ${CMAKE_BINARY_DIR}/_deps/googletest
                   EXCLUDE_FROM_ALL SYSTEM)
  # Its own sources trip newer compilers' false positives (-Wrestrict in gtest.cc): not ours to fix.
  target_compile_options(gtest PRIVATE -w)
  target_compile_options(gtest_main PRIVATE -w)
endif()
