// Text forms of values: what each parser accepts and how it explains a refusal.
#include "gateway/config/config_text.h"
#include "common/config/value_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gradgate::gateway {
namespace {

using ::testing::HasSubstr;

TEST(ParseUnsigned, ReadsDecimalIntegersUpToTheBound) {
  EXPECT_EQ(*config::parse_unsigned("0", 10), 0u);
  EXPECT_EQ(*config::parse_unsigned("10", 10), 10u);
  EXPECT_EQ(*config::parse_unsigned("18446744073709551615", UINT64_MAX), UINT64_MAX);
}

TEST(ParseUnsigned, RefusesNegativeSignedAndNonNumericText) {
  for (const char* text : {"-1", "+1", " 1", "1 ", "", "1.5", "0x10", "ten"}) {
    const auto value = config::parse_unsigned(text, 100);
    ASSERT_FALSE(value.ok()) << text;
    EXPECT_EQ(value.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(value.status().message(), HasSubstr("must be a non-negative integer")) << text;
  }
}

TEST(ParseUnsigned, RefusesValuesAboveTheBound) {
  EXPECT_THAT(config::parse_unsigned("11", 10).status().message(),
              HasSubstr("\"11\" is out of range 0..10"));
  EXPECT_THAT(config::parse_unsigned("99999999999999999999", UINT64_MAX).status().message(),
              HasSubstr("out of range"));
}

TEST(ParseBool, ReadsTrueFalseOneZero) {
  EXPECT_TRUE(*config::parse_bool("true"));
  EXPECT_TRUE(*config::parse_bool("1"));
  EXPECT_FALSE(*config::parse_bool("false"));
  EXPECT_FALSE(*config::parse_bool("0"));
  EXPECT_THAT(config::parse_bool("maybe").status().message(), HasSubstr("must be true or false"));
}

TEST(ParseEndpoint, ReadsHostAndPort) {
  EXPECT_EQ(*config::parse_endpoint("127.0.0.1:29500"), (net::Endpoint{"127.0.0.1", 29500}));
  EXPECT_EQ(*config::parse_endpoint("gateway-1.local:0"), (net::Endpoint{"gateway-1.local", 0}));
  EXPECT_EQ(*config::parse_endpoint("0.0.0.0:65535"), (net::Endpoint{"0.0.0.0", 65535}));
}

TEST(ParseEndpoint, HostNamesFollowTheirRules) {
  for (const char* good : {"localhost:1", "node_1.cluster-a.local:1", "a-b:1", "10.0.0.1.nip.io:1",
                           "my-svc.my-ns.svc.cluster.local:1", "CONTROLLER:1"}) {
    EXPECT_TRUE(config::parse_endpoint(good).ok())
        << good << ": " << config::parse_endpoint(good).status().message();
  }
  for (const char* bad :
       {"-a:1", "a-:1", "a..b:1", ".a:1", "a.-b:1", "1.2.3.4.5:1", "localhost.:1"}) {
    EXPECT_THAT(config::parse_endpoint(bad).status().message(),
                HasSubstr("is not an IPv4 address or host name"))
        << bad;
  }
  EXPECT_FALSE(config::parse_endpoint(std::string(64, 'a') + ":1").ok())
      << "a label of 64 characters";
  std::string long_name = std::string(60, 'a');
  for (int label = 0; label < 4; ++label) long_name += "." + std::string(60, 'b');
  EXPECT_FALSE(config::parse_endpoint(long_name + ":1").ok()) << "304 characters, each label valid";
  EXPECT_TRUE(config::parse_endpoint(long_name.substr(0, 243) + ":1").ok())
      << "4 labels, 243 characters";
  const std::string with_nul("127.0.0.1\0junk:1", 16);
  EXPECT_FALSE(config::parse_endpoint(with_nul).ok()) << "C functions would read 127.0.0.1";
}

TEST(ParseEndpoint, ExplainsWhatIsWrong) {
  EXPECT_THAT(config::parse_endpoint("abc").status().message(),
              HasSubstr("\"abc\" is not host:port"));
  EXPECT_THAT(config::parse_endpoint(":80").status().message(), HasSubstr("the host is empty"));
  EXPECT_THAT(config::parse_endpoint("a b:80").status().message(),
              HasSubstr("is not an IPv4 address or host name"));
  EXPECT_THAT(config::parse_endpoint("::1:80").status().message(),
              HasSubstr("is not an IPv4 address or host name"));
  // Digits and dots alone must be a dotted quad: a resolver would read "0" as 0.0.0.0.
  for (const char* shorthand :
       {"0:80", "127.1:80", "127.0.0.256:80", "0x0:80", "0x7f.1:80", "0x7f000001:80"}) {
    EXPECT_THAT(config::parse_endpoint(shorthand).status().message(),
                HasSubstr("is not an IPv4 address or host name"))
        << shorthand;
  }
  EXPECT_THAT(config::parse_endpoint("host:http").status().message(), HasSubstr("is not a number"));
  EXPECT_THAT(config::parse_endpoint("host:").status().message(), HasSubstr("is not a number"));
  EXPECT_THAT(config::parse_endpoint("host:-1").status().message(), HasSubstr("is not a number"));
  EXPECT_THAT(config::parse_endpoint("127.0.0.1:70000").status().message(),
              HasSubstr("port 70000 in \"127.0.0.1:70000\" is out of range 0..65535"));
}

TEST(CollectiveModeText, RoundTripsEveryMode) {
  for (const auto mode : {CollectiveMode::kAuto, CollectiveMode::kRing, CollectiveMode::kAllGather,
                          CollectiveMode::kAggregator}) {
    EXPECT_EQ(*parse_collective_mode(collective_mode_name(mode)), mode);
  }
  EXPECT_EQ(collective_mode_name(CollectiveMode::kAllGather), "allgather");
  EXPECT_THAT(parse_collective_mode("Ring").status().message(),
              HasSubstr("\"Ring\" is not one of auto, ring, allgather, aggregator"));
}

TEST(PlacementModeText, ParsesEveryModeAndNamesTheChoices) {
  EXPECT_EQ(*parse_placement_mode("auto"), PlacementMode::kAuto);
  EXPECT_EQ(*parse_placement_mode("gpu"), PlacementMode::kGpu);
  EXPECT_EQ(*parse_placement_mode("cpu"), PlacementMode::kCpu);
  EXPECT_THAT(parse_placement_mode("GPU").status().message(),
              HasSubstr("\"GPU\" is not one of auto, gpu, cpu"));
}

}  // namespace
}  // namespace gradgate::gateway
