// Tests of the codec table (gradgate/base/codec_table.h) against the codecs it describes: every
// row makes a CPU codec of its id whose summable() is the row's, names are unique, and the
// messages that list the codecs list every row.
#include "gradgate/base/codec_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "gradgate/kernels/codec.h"
#include "gradgate/kernels/codec_spec.h"

namespace gradgate::kernels {
namespace {

TEST(CodecTable, EveryRowMakesACpuCodecWithTheRowsTraits) {
  for (const CodecTraits& row : kCodecs) {
    auto codec = make_cpu_codec(CodecParams{.id = row.id});
    ASSERT_TRUE(codec.ok()) << row.name << ": " << codec.status().to_string();
    EXPECT_EQ((*codec)->id(), row.id);
    EXPECT_EQ((*codec)->summable(), row.summable) << row.name;
    EXPECT_TRUE((*codec)->spec().starts_with(row.name)) << (*codec)->spec();
  }
}

TEST(CodecTable, NamesAreUniqueAndListedInMessages) {
  std::set<std::string_view> names;
  for (const CodecTraits& row : kCodecs) {
    EXPECT_TRUE(names.insert(row.name).second) << row.name << " appears twice";
  }
  const Status unknown = codec_from_name("zstd").status();
  EXPECT_EQ(unknown.code(), ErrorCode::kInvalidArgument);
  for (const CodecTraits& row : kCodecs) {
    EXPECT_NE(unknown.message().find(std::string(row.name)), std::string::npos)
        << unknown.message();
  }
}

TEST(CodecTable, OnlyLossyCodecsTakeErrorFeedback) {
  for (const CodecTraits& row : kCodecs) {
    const auto spec = parse_codec_spec(std::string(row.name) + ":ef=0");
    EXPECT_EQ(spec.ok(), row.lossy) << row.name;
  }
}

}  // namespace
}  // namespace gradgate::kernels
