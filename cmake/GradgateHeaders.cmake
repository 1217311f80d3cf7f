# gradgate_headers(<target> <path>...): the headers a target offers, each path relative to the
# project root: a folder (its own headers, not its subfolders') or one header. They are seen as
# "<path>/<file>" by the target and by whoever links it, and by no one else: each target gets an
# include root of its own in the build tree that holds links to exactly these headers, instead of
# the whole source tree. An include of a header of a target that is not linked fails to compile,
# so the build enforces the layering of docs/architecture.md.
function(gradgate_headers target)
  set(root "${CMAKE_BINARY_DIR}/headers/${target}")
  file(REMOVE_RECURSE "${root}")
  foreach(path IN LISTS ARGN)
    set(source "${PROJECT_SOURCE_DIR}/${path}")
    if(IS_DIRECTORY "${source}")
      file(GLOB headers CONFIGURE_DEPENDS LIST_DIRECTORIES false "${source}/*.h" "${source}/*.cuh")
      set(folder "${path}")
    elseif(EXISTS "${source}")
      set(headers "${source}")
      get_filename_component(folder "${path}" DIRECTORY)
    else()
      message(FATAL_ERROR "gradgate_headers(${target}): no header or folder ${path}")
    endif()
    file(MAKE_DIRECTORY "${root}/${folder}")
    foreach(header IN LISTS headers)
      get_filename_component(name "${header}" NAME)
      file(CREATE_LINK "${header}" "${root}/${folder}/${name}" SYMBOLIC)
    endforeach()
  endforeach()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE $<BUILD_INTERFACE:${root}>)
  else()
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>)
  endif()
endfunction()
