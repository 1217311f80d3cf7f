# Detects the optional parts (CUDA, DPDK) and sets GRADGATE_HAVE_CUDA / GRADGATE_HAVE_DPDK to 0/1.

# CUDA: nvcc is often installed outside PATH.
if(NOT GRADGATE_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Ampere and Hopper unless the user chose (CMAKE_CUDA_ARCHITECTURES or CUDAARCHS): set before
    # enable_language, which would otherwise pick the compiler's default.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
      set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to build for")
    endif()
    enable_language(CUDA)
    # CMake 3.25 predates nvcc's C++20 support: tell it the flag (the kernels target requires C++20
    # of everything that links it, CUDA sources included).
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(GRADGATE_HAVE_CUDA 1)
  elseif(GRADGATE_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GRADGATE_WITH_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
if(NOT GRADGATE_HAVE_CUDA)
  set(GRADGATE_HAVE_CUDA 0)
endif()

# DPDK: through pkg-config, as an imported target.
if(NOT GRADGATE_WITH_DPDK STREQUAL "OFF")
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(DPDK QUIET IMPORTED_TARGET libdpdk)
  endif()
  if(DPDK_FOUND)
    set(GRADGATE_HAVE_DPDK 1)
  elseif(GRADGATE_WITH_DPDK STREQUAL "ON")
    message(FATAL_ERROR "GRADGATE_WITH_DPDK=ON but pkg-config found no libdpdk")
  endif()
endif()
if(NOT GRADGATE_HAVE_DPDK)
  set(GRADGATE_HAVE_DPDK 0)
endif()

# The transports built in, for `gradgate version`, /v1/status and gradgate_build_info.
set(GRADGATE_TRANSPORTS "tcp")
if(GRADGATE_HAVE_DPDK)
  string(APPEND GRADGATE_TRANSPORTS ",dpdk")
endif()

message(STATUS "gradgate: CUDA ${GRADGATE_HAVE_CUDA}, DPDK ${GRADGATE_HAVE_DPDK}")
