# Every dependency comes from Debian's packages (scripts/install-deps.sh installs them).
# Public: the header-only front needs only the standard library and cereal, and sky/asio.hpp
# Boost.Asio (1.81: per-operation cancellation, deferred, parallel_group).
# Private: everything else stays inside libsky.
find_package(Threads REQUIRED)
find_package(cereal CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(CURL REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBSSH2 REQUIRED IMPORTED_TARGET libssh2)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
# yaml-cpp: kubeconfig files (src/providers/kubernetes).
pkg_check_modules(YAML_CPP REQUIRED IMPORTED_TARGET yaml-cpp)
find_package(Boost 1.81 REQUIRED)
# GCC's libbacktrace (libgcc-12-dev, beside the compiler): Boost.Stacktrace names a crashed
# worker's frames with it on the client (src/runtime/crash_report.cpp). The driver finds it by name.
if(NOT TARGET Backtrace::backtrace)
  add_library(Backtrace::backtrace INTERFACE IMPORTED)
  set_target_properties(Backtrace::backtrace PROPERTIES INTERFACE_LINK_LIBRARIES backtrace)
endif()
