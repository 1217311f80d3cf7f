// Implementation of the LoopTable, included once per instruction set by loops_<isa>.cc inside
// namespace GRADGATE_ISA_NS. Plain loops are left to the compiler's vectoriser (which then targets
// the file's -m flags); the loops it cannot vectorise well (branch-free compaction of selected
// elements, fp16 conversion) have hand-written AVX2 versions under `#if defined(__AVX2__)`.
// The loops live in loops_dense_impl.h, loops_select_impl.h and loops_quantize_impl.h, compiled
// here with the including file's flags. Only to be included by loops_*.cc.

#include "loops.h"
#include "loops_dense_impl.h"
#include "loops_quantize_impl.h"
#include "loops_select_impl.h"

namespace gradgate::kernels::cpu::GRADGATE_ISA_NS {

extern const LoopTable kLoops;
const LoopTable kLoops = {
    .isa = GRADGATE_ISA_NAME,
    .copy_checked = copy_checked,
    .count_nonfinite = count_nonfinite,
    .add = add,
    .sum_checked = sum_checked,
    .encode_fp16 = encode_fp16,
    .encode_bf16 = encode_bf16,
    .count_nonfinite_fp16 = count_nonfinite_fp16,
    .count_nonfinite_bf16 = count_nonfinite_bf16,
    .add_fp16 = add_fp16,
    .add_bf16 = add_bf16,
    .sum_fp16 = sum_fp16,
    .sum_bf16 = sum_bf16,
    .abs_stats = abs_stats,
    .accumulate = accumulate,
    .accumulate_select = accumulate_select,
    .scan_select = scan_select,
    .quantize_i8 = quantize_i8,
    .quantize_i16 = quantize_i16,
    .quantize_i32 = quantize_i32,
    .dequantize_add_i8 = dequantize_add<int8_t>,
    .dequantize_add_i16 = dequantize_add<int16_t>,
    .dequantize_add_i32 = dequantize_add<int32_t>,
    .max_abs_i8 = max_abs<int8_t>,
    .max_abs_i16 = max_abs<int16_t>,
    .max_abs_i32 = max_abs<int32_t>,
    .sum_i8 = sum_ints<int8_t>,
    .sum_i16 = sum_ints<int16_t>,
    .sum_i32 = sum_ints<int32_t>,
    .encode_sign = encode_sign,
    .add_sign = add_sign,
};

}  // namespace gradgate::kernels::cpu::GRADGATE_ISA_NS
