#include "gradgate/base/codec_table.h"

namespace gradgate {

Result<CodecId> codec_from_name(std::string_view name) {
  for (const CodecTraits& codec : kCodecs) {
    if (codec.name == name) return codec.id;
  }
  return Status(ErrorCode::kInvalidArgument, "unknown codec '" + std::string(name) +
                                                 "' (expected one of " + codec_names_list() + ")");
}

std::string codec_names_list() {
  std::string names;
  for (const CodecTraits& codec : kCodecs) {
    if (!names.empty()) names += ", ";
    names += codec.name;
  }
  return names;
}

}  // namespace gradgate
