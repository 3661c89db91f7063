# Collects one ✓/✗ line per dependency and prints them together at the end of
# configuration, with an install hint for whatever is missing.

set_property(GLOBAL PROPERTY TANDEM_SUMMARY_LINES "")

function(tandem_report name found detail)
  if(found)
    set(line "  ✓ ${name}: ${detail}")
  else()
    set(line "  ✗ ${name}: ${detail}")
  endif()
  set_property(GLOBAL APPEND PROPERTY TANDEM_SUMMARY_LINES "${line}")
endfunction()

function(tandem_print_summary)
  get_property(lines GLOBAL PROPERTY TANDEM_SUMMARY_LINES)
  message(STATUS "")
  message(STATUS "Tandem ${PROJECT_VERSION} configuration (${CMAKE_BUILD_TYPE}):")
  foreach(line IN LISTS lines)
    message(STATUS "${line}")
  endforeach()
  message(STATUS "")
endfunction()
