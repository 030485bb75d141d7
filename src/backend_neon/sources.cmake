# The ARM backends, included by src/CMakeLists.txt on aarch64 (paths are relative to src/).
# The library's baseline stays -march=armv8-a so one binary runs on every ARMv8 CPU; only the
# dotprod translation unit is compiled for ARMv8.2-A, and the registry runs its code only after
# cpu_supports() has seen dotprod and fp16 in the auxiliary vector. Keep inline or template code that
# other files also use out of that unit: the linker could keep its v8.2 copy for everyone.
set(KESTREL_NEON_SOURCES
  backend_neon/cpu_features_arm.cc
  backend_neon/neon_backends.cc
  backend_neon/neon_kernels.cc
  backend_neon/neon_dotprod_kernels.cc
)
set_source_files_properties(backend_neon/cpu_features_arm.cc backend_neon/neon_backends.cc backend_neon/neon_kernels.cc
                            PROPERTIES COMPILE_OPTIONS "-march=armv8-a;-ffp-contract=off")
set_source_files_properties(backend_neon/neon_dotprod_kernels.cc
                            PROPERTIES COMPILE_OPTIONS "-march=armv8.2-a+dotprod+fp16;-ffp-contract=off")
