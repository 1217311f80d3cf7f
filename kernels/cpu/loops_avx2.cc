// Compiled with -mavx2 -mfma -mf16c; used only when the CPU reports AVX2, FMA and F16C.
#define GRADGATE_ISA_NS avx2
#define GRADGATE_ISA_NAME "avx2"
#include "loops_impl.h"
