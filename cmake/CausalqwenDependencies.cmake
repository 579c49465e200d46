# The dependencies of the causalqwen INTERFACE targets, all from Debian packages
# (cmake/install-deps.sh installs them). Shared by the build and by the installed
# package config, so a consumer finds exactly what the library was built against.
# CAUSALQWEN_DEPENDENCY_SET says how much to find: `cauchy` (causalqwen::cauchy's own: Eigen,
# xtensor, xsimd, fmt), `model` (+ causalqwen::model's: OpenMP, oneDNN) or, when unset, every
# dependency (causalqwen::causalqwen's, and the optional cpp-httplib of the program).
include(CMakeFindDependencyMacro)
find_dependency(Eigen3 3.4 REQUIRED NO_MODULE)
find_dependency(xtl REQUIRED)
find_dependency(xsimd REQUIRED)
find_dependency(xtensor REQUIRED)
find_dependency(fmt REQUIRED)
if(NOT CAUSALQWEN_DEPENDENCY_SET STREQUAL "cauchy")
  find_dependency(OpenMP REQUIRED COMPONENTS CXX)
  # oneDNN (libdnnl-dev), optional: when found, the bf16 and int8 products of many rows run on its
  # matmul where it runs AMX (include/causalqwen/linalg/kernels/onednn_bf16.hpp). The target
  # CausalqwenDeps::onednn carries the library, its headers and CAUSALQWEN_HAVE_ONEDNN.
  if(NOT TARGET CausalqwenDeps::onednn)
    find_library(CAUSALQWEN_ONEDNN_LIBRARY NAMES dnnl)
    find_path(CAUSALQWEN_ONEDNN_INCLUDE oneapi/dnnl/dnnl.hpp)
    if(CAUSALQWEN_ONEDNN_LIBRARY AND CAUSALQWEN_ONEDNN_INCLUDE)
      add_library(CausalqwenDeps::onednn INTERFACE IMPORTED GLOBAL)
      set_target_properties(CausalqwenDeps::onednn PROPERTIES
        INTERFACE_LINK_LIBRARIES "${CAUSALQWEN_ONEDNN_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${CAUSALQWEN_ONEDNN_INCLUDE}"
        INTERFACE_COMPILE_DEFINITIONS CAUSALQWEN_HAVE_ONEDNN)
    endif()
  endif()
endif()
if(NOT CAUSALQWEN_DEPENDENCY_SET MATCHES "^(cauchy|model)$")
  find_dependency(nlohmann_json 3.10 REQUIRED)
  # The tokenizer (text/): PCRE2 (8-bit, with JIT) for the pre-tokenizer regex, utf8proc for NFC.
  find_dependency(PkgConfig REQUIRED)
  if(NOT TARGET PkgConfig::CQ_PCRE2)
    pkg_check_modules(CQ_PCRE2 REQUIRED IMPORTED_TARGET GLOBAL libpcre2-8)
  endif()
  if(NOT TARGET PkgConfig::CQ_UTF8PROC)
    pkg_check_modules(CQ_UTF8PROC REQUIRED IMPORTED_TARGET GLOBAL libutf8proc)
  endif()
  # `causalqwen serve` (tools/causalqwen/cmd_serve.cpp) only: cpp-httplib, as Debian builds it
  # (libcpp-httplib-dev: the header and a shared library compiled with OpenSSL, zlib and Brotli,
  # whose flags pkg-config gives). Optional: without it the program has no serve command.
  if(NOT TARGET PkgConfig::CQ_HTTPLIB)
    pkg_check_modules(CQ_HTTPLIB IMPORTED_TARGET GLOBAL cpp-httplib)
  endif()
endif()
