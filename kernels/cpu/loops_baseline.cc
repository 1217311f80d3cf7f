#define GRADGATE_ISA_NS baseline
#define GRADGATE_ISA_NAME "baseline"
#include "loops_impl.h"
