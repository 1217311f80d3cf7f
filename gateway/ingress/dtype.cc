#include "gateway/ingress/ingress.h"

namespace gradgate::gateway {

size_t dtype_bytes(Dtype dtype) { return dtype == Dtype::kFp32 ? 4 : 2; }

}  // namespace gradgate::gateway
