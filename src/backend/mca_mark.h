// Region markers for llvm-mca (scripts/llvm-mca-table.sh for ARM, scripts/llvm-mca-x86.sh for x86):
// compiled with -DKESTREL_LLVM_MCA, a kernel's block loop is written into the assembly as region
// "k<id>t<tokens>"; in the library the markers do not exist. The text starts with "//" on every
// target and the scripts turn it into the assembler comment llvm-mca reads.
#pragma once

#if defined(KESTREL_LLVM_MCA)
#define KESTREL_MCA_MARK(what, id, tokens) __asm__ volatile("// LLVM-MCA-" what " k%c0t%c1" ::"i"(id), "i"(tokens))
#else
// The id is still named, so that a kernel's region constant counts as used (clang warns otherwise).
#define KESTREL_MCA_MARK(what, id, tokens) static_cast<void>(id)
#endif
