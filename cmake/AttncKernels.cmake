# attnc_add_kernel: an attention kernel compiled by attnc at build time into a static library
# target with a generated C++ header, for applications that link kernels ahead of time.
#
#   attnc_add_kernel(NAME SPEC "heads=8 d_k=64 mask=causal"
#                    [BACKEND auto|mlir|halide|reference]     default auto: the
#                                                             tuned record's (TUNED), else
#                                                             the fastest that covers the
#                                                             spec (attnc backends)
#                    [TARGETS host x86-64-avx2 x86-64-avx512 ...]  default host; several make
#                                                             a fat kernel, run on the best one
#                                                             the host supports
#                    [SCHEDULE name=value ... | TUNED [TUNING_DB file]]
#                    [EMIT asm stmt ...])                     more artifacts, per target
#
# NAME (a C identifier) becomes a STATIC IMPORTED target linking attnc::runtime; its header
# <NAME.h> declares attnc::kernels::NAME, whose call operator takes one DLTensor per kernel
# argument. Without SCHEDULE or TUNED the targets' default schedules are used, so builds do
# not depend on this machine's tuning database; TUNED uses the best tuned schedules (from
# TUNING_DB when given, then also a dependency if it exists). attnc re-runs only when the spec, the options
# or attnc itself change. Files go to ${CMAKE_CURRENT_BINARY_DIR}/attnc_kernels/NAME.
#
# Needs the targets attnc::compiler and attnc::runtime: from find_package(attnc), or in attnc's
# own build tree.
include_guard(GLOBAL)

function(attnc_add_kernel name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "TUNED" "SPEC;BACKEND;TUNING_DB" "TARGETS;SCHEDULE;EMIT")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "attnc_add_kernel(${name}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}; "
                        "allowed: SPEC BACKEND TARGETS SCHEDULE TUNED TUNING_DB EMIT")
  endif()
  if(NOT name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "attnc_add_kernel(${name}): the name becomes C symbols and a C++ class, "
                        "so it must be a C identifier")
  endif()
  if(NOT ARG_SPEC)
    message(FATAL_ERROR "attnc_add_kernel(${name}): SPEC \"key=value ...\" is required")
  endif()
  if(ARG_SCHEDULE AND ARG_TUNED)
    message(FATAL_ERROR "attnc_add_kernel(${name}): give SCHEDULE or TUNED, not both")
  endif()
  if(ARG_TUNING_DB AND NOT ARG_TUNED)
    message(FATAL_ERROR "attnc_add_kernel(${name}): TUNING_DB goes with TUNED")
  endif()
  if(NOT TARGET attnc::compiler OR NOT TARGET attnc::runtime)
    message(FATAL_ERROR "attnc_add_kernel(${name}): attnc::compiler and attnc::runtime are "
                        "not defined; call find_package(attnc) first")
  endif()
  if(NOT ARG_BACKEND)
    set(ARG_BACKEND auto)
  endif()
  if(NOT ARG_TARGETS)
    set(ARG_TARGETS host)
  endif()

  set(out "${CMAKE_CURRENT_BINARY_DIR}/attnc_kernels/${name}")
  list(JOIN ARG_TARGETS "," targets)
  list(JOIN ARG_EMIT "," extra)
  set(emit lib)
  if(extra)
    string(APPEND emit ",${extra}")
  endif()
  set(command $<TARGET_FILE:attnc::compiler> compile "${ARG_SPEC}" --backend ${ARG_BACKEND}
              --target ${targets} --emit ${emit} --name ${name} -o "${out}")
  set(depends attnc::compiler $<TARGET_FILE:attnc::compiler>)
  if(ARG_SCHEDULE)
    list(JOIN ARG_SCHEDULE "," schedule)
    list(APPEND command --schedule ${schedule})
  elseif(NOT ARG_TUNED)
    list(APPEND command --no-tuning)
  elseif(ARG_TUNING_DB)
    get_filename_component(db "${ARG_TUNING_DB}" ABSOLUTE)
    set(command ${CMAKE_COMMAND} -E env "ATTNC_TUNING_DB=${db}" ${command})
    if(EXISTS "${db}") # one made later is seen at the next configure
      list(APPEND depends "${db}")
    endif()
  endif()

  add_custom_command(
    OUTPUT "${out}/lib${name}.a" "${out}/${name}.h"
    COMMAND ${command}
    DEPENDS ${depends}
    COMMENT "attnc: compiling kernel ${name} for ${targets}"
    VERBATIM)
  add_custom_target(${name}_attnc DEPENDS "${out}/lib${name}.a" "${out}/${name}.h")

  file(MAKE_DIRECTORY "${out}")
  add_library(${name} STATIC IMPORTED GLOBAL)
  set_target_properties(${name} PROPERTIES
    IMPORTED_LOCATION "${out}/lib${name}.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES CXX
    INTERFACE_INCLUDE_DIRECTORIES "${out}"
    INTERFACE_COMPILE_FEATURES cxx_std_20)
  find_package(Threads REQUIRED)
  target_link_libraries(${name} INTERFACE attnc::runtime Threads::Threads ${CMAKE_DL_LIBS})
  add_dependencies(${name} ${name}_attnc)
endfunction()
