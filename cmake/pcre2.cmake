# PCRE2 >= 10.45 (Unicode 16 tables, as HF tokenizers 0.23 uses), built by scripts/build-pcre2.sh
# into RETAIN_PCRE2_ROOT (make setup does it). The system's PCRE2 is never used: Debian 12's
# 10.42 knows Unicode 14 only, and a tokenizer that silently splits new scripts differently from
# HF is worse than a configure error. Defines the imported target retain::pcre2.
set(RETAIN_PCRE2_ROOT "$ENV{HOME}/.cache/retain/pcre2" CACHE PATH
    "Prefix of PCRE2 >= 10.45 built by scripts/build-pcre2.sh")
find_path(RETAIN_PCRE2_INCLUDE_DIR pcre2.h PATHS ${RETAIN_PCRE2_ROOT}/include NO_DEFAULT_PATH)
find_library(RETAIN_PCRE2_LIBRARY libpcre2-8.a PATHS ${RETAIN_PCRE2_ROOT}/lib NO_DEFAULT_PATH)
if(NOT RETAIN_PCRE2_INCLUDE_DIR OR NOT RETAIN_PCRE2_LIBRARY)
  message(FATAL_ERROR "PCRE2 not found in ${RETAIN_PCRE2_ROOT} (expected include/pcre2.h and "
                      "lib/libpcre2-8.a): run `make setup`, or "
                      "`scripts/build-pcre2.sh ${RETAIN_PCRE2_ROOT}`")
endif()
file(STRINGS ${RETAIN_PCRE2_INCLUDE_DIR}/pcre2.h pcre2_version_lines
     REGEX "^#define PCRE2_(MAJOR|MINOR)[ \t]+[0-9]+")
string(REGEX REPLACE ".*PCRE2_MAJOR[ \t]+([0-9]+).*" "\\1" pcre2_major "${pcre2_version_lines}")
string(REGEX REPLACE ".*PCRE2_MINOR[ \t]+([0-9]+).*" "\\1" pcre2_minor "${pcre2_version_lines}")
if("${pcre2_major}.${pcre2_minor}" VERSION_LESS 10.45)
  message(FATAL_ERROR "${RETAIN_PCRE2_INCLUDE_DIR}/pcre2.h is PCRE2 ${pcre2_major}.${pcre2_minor};"
                      " retain needs >= 10.45 (Unicode 16): run scripts/build-pcre2.sh")
endif()
message(STATUS "PCRE2 ${pcre2_major}.${pcre2_minor}: ${RETAIN_PCRE2_LIBRARY}")
add_library(retain::pcre2 STATIC IMPORTED GLOBAL)
set_target_properties(retain::pcre2 PROPERTIES IMPORTED_LOCATION ${RETAIN_PCRE2_LIBRARY}
                      INTERFACE_INCLUDE_DIRECTORIES ${RETAIN_PCRE2_INCLUDE_DIR}
                      INTERFACE_COMPILE_DEFINITIONS PCRE2_STATIC)
