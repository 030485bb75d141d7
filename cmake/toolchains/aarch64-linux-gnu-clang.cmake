# The aarch64 cross build with clang instead of GCC (clang is what Android's NDK and most phone
# toolchains compile with): clang's own aarch64 target, with Debian's cross GCC installation
# (g++-aarch64-linux-gnu) for the C++ library, the startup files and the linker, and the same arm64
# multiarch packages as aarch64-linux-gnu.cmake. scripts/test-arm.sh builds and tests with both.
include(${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-gnu.cmake)
set(CMAKE_C_COMPILER clang)
set(CMAKE_CXX_COMPILER clang++)
set(CMAKE_C_COMPILER_TARGET aarch64-linux-gnu)
set(CMAKE_CXX_COMPILER_TARGET aarch64-linux-gnu)
