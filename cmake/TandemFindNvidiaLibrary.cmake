# Shared search for NVIDIA libraries (cuDNN, NCCL) in the usual places: <NAME>_ROOT,
# CUDA_HOME, /usr/local/cuda, and NVIDIA's Python wheels
# (<site-packages>/nvidia/<wheel>/{include,lib}), which is how many GPU machines
# ship them.
#
# tandem_find_nvidia_library(NAME <prefix> WHEEL <dir> HEADER <file> VERSION_HEADER <file>
#                            LIBRARIES <names...> MACROS <MAJOR MINOR PATCH macro names>)
# sets <prefix>_INCLUDE_DIR, <prefix>_LIBRARY and <prefix>_VERSION, then calls
# find_package_handle_standard_args and creates the imported target <prefix>::<lowercase>.
# When the library comes from a wheel, <prefix>_WHEEL_CUDA_MAJOR is the CUDA major it was built
# for (12 for nvidia-cudnn-cu12), read from the wheel's .dist-info; empty otherwise.

function(tandem_nvidia_wheel_roots out_var)
  set(roots "")
  find_program(TANDEM_PYTHON3 NAMES python3 python)
  if(TANDEM_PYTHON3)
    execute_process(
      COMMAND "${TANDEM_PYTHON3}" -c "import site; print(';'.join(site.getsitepackages() + [site.getusersitepackages()]))"
      OUTPUT_VARIABLE site_dirs OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
    if(NOT failed)
      foreach(dir IN LISTS site_dirs)
        if(IS_DIRECTORY "${dir}/nvidia")
          list(APPEND roots "${dir}/nvidia")
        endif()
      endforeach()
    endif()
  endif()
  set(${out_var} "${roots}" PARENT_SCOPE)
endfunction()

macro(tandem_find_nvidia_library)
  cmake_parse_arguments(_tfn "" "NAME;WHEEL;HEADER;VERSION_HEADER" "LIBRARIES;MACROS" ${ARGN})
  tandem_nvidia_wheel_roots(_tfn_wheels)
  set(_tfn_hints ${${_tfn_NAME}_ROOT} $ENV{${_tfn_NAME}_ROOT} $ENV{CUDA_HOME} $ENV{CUDA_PATH} /usr/local/cuda)
  foreach(_tfn_root IN LISTS _tfn_wheels)
    list(APPEND _tfn_hints "${_tfn_root}/${_tfn_WHEEL}")
  endforeach()

  find_path(${_tfn_NAME}_INCLUDE_DIR ${_tfn_HEADER} HINTS ${_tfn_hints} PATH_SUFFIXES include)
  find_library(${_tfn_NAME}_LIBRARY NAMES ${_tfn_LIBRARIES} HINTS ${_tfn_hints} PATH_SUFFIXES lib64 lib)

  if(${_tfn_NAME}_INCLUDE_DIR AND EXISTS "${${_tfn_NAME}_INCLUDE_DIR}/${_tfn_VERSION_HEADER}")
    set(_tfn_parts "")
    foreach(_tfn_macro IN LISTS _tfn_MACROS)
      file(STRINGS "${${_tfn_NAME}_INCLUDE_DIR}/${_tfn_VERSION_HEADER}" _tfn_line REGEX "#define ${_tfn_macro} +[0-9]+")
      string(REGEX MATCH "[0-9]+$" _tfn_value "${_tfn_line}")
      list(APPEND _tfn_parts "${_tfn_value}")
    endforeach()
    list(JOIN _tfn_parts "." ${_tfn_NAME}_VERSION)
  endif()

  set(${_tfn_NAME}_WHEEL_CUDA_MAJOR "")
  if(${_tfn_NAME}_LIBRARY MATCHES "^(.*)/nvidia/${_tfn_WHEEL}/")
    file(GLOB _tfn_dist_info "${CMAKE_MATCH_1}/nvidia_${_tfn_WHEEL}_cu*.dist-info")
    if(_tfn_dist_info MATCHES "nvidia_${_tfn_WHEEL}_cu([0-9]+)-")
      set(${_tfn_NAME}_WHEEL_CUDA_MAJOR "${CMAKE_MATCH_1}")
    endif()
  endif()

  include(FindPackageHandleStandardArgs)
  find_package_handle_standard_args(${_tfn_NAME}
    REQUIRED_VARS ${_tfn_NAME}_LIBRARY ${_tfn_NAME}_INCLUDE_DIR VERSION_VAR ${_tfn_NAME}_VERSION)

  string(TOLOWER "${_tfn_NAME}" _tfn_lower)
  if(${_tfn_NAME}_FOUND AND NOT TARGET ${_tfn_NAME}::${_tfn_lower})
    add_library(${_tfn_NAME}::${_tfn_lower} UNKNOWN IMPORTED)
    set_target_properties(${_tfn_NAME}::${_tfn_lower} PROPERTIES
      IMPORTED_LOCATION "${${_tfn_NAME}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${${_tfn_NAME}_INCLUDE_DIR}")
  endif()
endmacro()
