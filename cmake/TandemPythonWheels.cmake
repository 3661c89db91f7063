# Many GPU machines ship cuDNN, NCCL and cuBLAS as NVIDIA's Python wheels:
# <site-packages>/nvidia/{cudnn,nccl,cublas}/{include,lib}. This lists those
# roots so the Find modules can search them.

function(tandem_nvidia_wheel_roots out_var)
  set(roots "")
  find_program(TANDEM_PYTHON3 NAMES python3 python)
  if(TANDEM_PYTHON3)
    execute_process(
      COMMAND "${TANDEM_PYTHON3}" -c "import site,sys; print(';'.join(site.getsitepackages() + [site.getusersitepackages()]))"
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
