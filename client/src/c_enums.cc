// gg_codec and gg_dtype: the C API's copies of the codec table and the dtype of the base layer,
// checked against them here at compile time; and gg_codec_name, the table's names.
#include <string_view>

#include "c_enum.h"
#include "exported_api.h"
#include "gradgate/base/codec_table.h"
#include "gradgate/base/dtype.h"

namespace {

#define GRADGATE_CHECK_C_CODEC(enumerator, id, name, c_suffix, ...) \
  static_assert(GG_CODEC_##c_suffix == id, "gg_codec numbers codec " name " as the table does");
GRADGATE_CODEC_TABLE(GRADGATE_CHECK_C_CODEC)
#undef GRADGATE_CHECK_C_CODEC

static_assert(GG_FP32 == static_cast<int>(gradgate::Dtype::kFp32) &&
              GG_FP16 == static_cast<int>(gradgate::Dtype::kFp16) &&
              GG_BF16 == static_cast<int>(gradgate::Dtype::kBf16));

}  // namespace

extern "C" const char* gg_codec_name(gg_codec codec) {
  const int value = gradgate::client_impl::c_enum_value(codec);
  if (!gradgate::is_codec_id(static_cast<unsigned>(value))) return "unknown";  // < 0 wraps
  // The table's names are string literals: each view ends in a NUL.
  return gradgate::codec_name(static_cast<gradgate::CodecId>(value)).data();
}
