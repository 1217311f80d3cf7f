#include "loops.h"

#include <atomic>

#include "gradgate/kernels/element_rules.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace gradgate::kernels::cpu {
namespace baseline {
extern const LoopTable kLoops;
}
#if defined(__x86_64__)
namespace avx2 {
extern const LoopTable kLoops;
}
#endif

namespace {

std::atomic<Isa>& active() {
  static std::atomic<Isa> isa{best_isa()};
  return isa;
}

}  // namespace

void restore_residual(std::span<const float> g, std::span<const float> decoded,
                      std::span<float> e) {
  for (size_t i = 0; i < e.size(); ++i) {
    e[i] = rules::restored_residual(g[i], decoded.empty() ? 0.0f : decoded[i], e[i]);
  }
}

Isa best_isa() {
#if defined(__x86_64__)
  // F16C through cpuid (leaf 1, ECX bit 29): not every compiler's __builtin_cpu_supports knows it.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
  if (f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
#endif
  return Isa::kBaseline;
}

void force_isa(Isa isa) {
  if (isa == Isa::kAvx2 && best_isa() != Isa::kAvx2) return;
  active().store(isa, std::memory_order_relaxed);
}

const LoopTable& loops() {
#if defined(__x86_64__)
  if (active().load(std::memory_order_relaxed) == Isa::kAvx2) return avx2::kLoops;
#endif
  return baseline::kLoops;
}

}  // namespace gradgate::kernels::cpu
