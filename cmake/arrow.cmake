# Apache Arrow and Parquet C++ from the venv's pyarrow wheel (its headers and its libarrow /
# libparquet), found like LibTorch: through the venv's Python. The wheel ships versioned shared
# objects only (libarrow.so.2600), which are linked by full path and found at run time through
# the rpath. Without pyarrow (the GPU machine's bundle has no room for its 60 MB) retain builds
# without parquet support and says so when a parquet file is given; the JSONL layouts still work.
# Defines RETAIN_ARROW and, when ON, the imported targets retain::arrow and retain::parquet.
execute_process(
  COMMAND ${RETAIN_PYTHON} -c
          "import pyarrow; print(pyarrow.__version__); print(pyarrow.get_include()); print(pyarrow.get_library_dirs()[0])"
  OUTPUT_VARIABLE pyarrow_out OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE pyarrow_found
  ERROR_QUIET)
set(RETAIN_ARROW OFF)
if(pyarrow_found EQUAL 0)
  string(REPLACE "\n" ";" pyarrow_out "${pyarrow_out}")
  list(GET pyarrow_out 0 RETAIN_ARROW_VERSION)
  list(GET pyarrow_out 1 arrow_include_dir)
  list(GET pyarrow_out 2 arrow_library_dir)
  # libarrow.so.2600 for pyarrow 26.x: the SONAME's number is major * 100 + minor.
  file(GLOB arrow_library ${arrow_library_dir}/libarrow.so.[0-9]*)
  file(GLOB parquet_library ${arrow_library_dir}/libparquet.so.[0-9]*)
  if(arrow_library AND parquet_library AND EXISTS ${arrow_include_dir}/parquet/arrow/reader.h)
    list(GET arrow_library 0 arrow_library)
    list(GET parquet_library 0 parquet_library)
    add_library(retain::arrow SHARED IMPORTED GLOBAL)
    set_target_properties(retain::arrow PROPERTIES IMPORTED_LOCATION ${arrow_library}
                          INTERFACE_INCLUDE_DIRECTORIES ${arrow_include_dir})
    add_library(retain::parquet SHARED IMPORTED GLOBAL)
    set_target_properties(retain::parquet PROPERTIES IMPORTED_LOCATION ${parquet_library}
                          INTERFACE_LINK_LIBRARIES retain::arrow)
    set(RETAIN_ARROW ON)
    set(RETAIN_ARROW_LIBRARY_DIR ${arrow_library_dir})
    message(STATUS "Arrow/Parquet ${RETAIN_ARROW_VERSION} (pyarrow): ${arrow_library_dir}")
  endif()
endif()
if(NOT RETAIN_ARROW)
  message(STATUS "pyarrow not found with ${RETAIN_PYTHON}: building without parquet support "
                 "(`make setup` installs it)")
endif()
