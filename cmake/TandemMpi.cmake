# Decides whether the MPI process group is built (TANDEM_MPI=AUTO|ON|OFF; AUTO: when MPI is
# found) and reports it. Sets TANDEM_WITH_MPI, also as a cache entry (the README test reads it
# from CMakeCache.txt), on every path, so a reconfigure never keeps a stale value. Without MPI
# the build goes on: `--backend mpi` then says in one line how to get it (parallel/comm/
# no_mpi.cpp). Open MPI from Debian: apt-get install libopenmpi-dev openmpi-bin.

set(TANDEM_MPI AUTO CACHE STRING "Build the MPI process group: AUTO (when MPI is found), ON, OFF")
set_property(CACHE TANDEM_MPI PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${TANDEM_MPI}" _tandem_mpi_mode)
if(NOT _tandem_mpi_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TANDEM_MPI must be AUTO, ON or OFF, got '${TANDEM_MPI}'")
endif()

macro(tandem_set_with_mpi value)
  set(TANDEM_WITH_MPI ${value})
  set(TANDEM_WITH_MPI ${value} CACHE INTERNAL "Whether the MPI process group is built")
endmacro()

tandem_set_with_mpi(OFF)
if(_tandem_mpi_mode STREQUAL "OFF")
  tandem_report("MPI" FALSE "off (TANDEM_MPI=OFF): --backend mpi unavailable")
  return()
endif()

# The C bindings only (Tandem calls MPI's C API from C++; MPI's C++ bindings are long deprecated).
find_package(MPI QUIET COMPONENTS C)
if(NOT MPI_C_FOUND)
  set(_tandem_mpi_hint "missing (--backend mpi off): apt-get install libopenmpi-dev openmpi-bin")
  tandem_report("MPI" FALSE "${_tandem_mpi_hint}")
  if(_tandem_mpi_mode STREQUAL "ON")
    tandem_print_summary()
    message(FATAL_ERROR "TANDEM_MPI=ON, but MPI was not found: apt-get install libopenmpi-dev openmpi-bin")
  endif()
  return()
endif()

tandem_set_with_mpi(ON)
# "Open MPI 4.1.4" from its mpi.h; another MPI by the standard version it implements.
set(_tandem_mpi_library "MPI ${MPI_C_VERSION}")
file(STRINGS "${MPI_C_HEADER_DIR}/mpi.h" _tandem_ompi_version
     REGEX "^#define OMPI_(MAJOR|MINOR|RELEASE)_VERSION [0-9]+")
if(_tandem_ompi_version)
  string(REGEX REPLACE "[^;]* ([0-9]+)" "\\1" _tandem_ompi_version "${_tandem_ompi_version}")
  string(REPLACE ";" "." _tandem_ompi_version "${_tandem_ompi_version}")
  set(_tandem_mpi_library "Open MPI ${_tandem_ompi_version}")
endif()
tandem_report("MPI" TRUE "${_tandem_mpi_library} (--backend mpi under ${MPIEXEC_EXECUTABLE})")
