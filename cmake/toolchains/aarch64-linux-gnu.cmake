# Cross-compiles Kestrel for aarch64 Linux with Debian's g++-aarch64-linux-gnu and the arm64
# multiarch -dev packages (scripts/install-arm-deps.sh); ctest runs the test binaries under
# qemu-user. See ../shared/docs/arm-cross.md.
#
# No CMAKE_SYSROOT: Debian's cross GCC already finds its libc and the multiarch libraries.
# The emulator carries no -cpu (it would override QEMU_CPU, which picks the CPU model per ctest run)
# and no -L (mixing the cross ld.so with the multiarch libc.so.6 makes fork() hang).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)

# pkg-config (libpcre2-8, libutf8proc) must read the arm64 multiarch .pc files, never the host's:
# otherwise an x86-64 library would be linked into aarch64 binaries.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
