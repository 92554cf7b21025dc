#include "provider/instance_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpufleet::provider {
namespace {

using ::testing::HasSubstr;

TEST(InstanceJsonTest, PricesAreExactDollars) {
  EXPECT_EQ(FormatPricePerHour(2'100'000), "2.1");
  EXPECT_EQ(FormatPricePerHour(3'000'000), "3");
  EXPECT_EQ(FormatPricePerHour(12'345), "0.012345");
  EXPECT_EQ(FormatPricePerHour(0), "0");
}

TEST(InstanceJsonTest, TimesReadWithZoneOrOffset) {
  // A script's times (AWS's LaunchTime and the like) go through common/iso_time.h with a zone
  // required: the same instant however it is written; a time without a zone names its field.
  auto created = [](const std::string& value) {
    return InstanceFromJson(R"({"id": "i", "created": )" + value + "}", nullptr);
  };
  EXPECT_EQ(created(R"("2026-01-01T00:00:00Z")")->created.seconds(), 1'767'225'600);
  EXPECT_EQ(created(R"("2026-01-01T01:00:00+01:00")")->created.seconds(), 1'767'225'600);
  EXPECT_EQ(created(R"("2026-01-01T00:00:00.250Z")")->created.millis(), 1'767'225'600'250);
  EXPECT_EQ(created("1767225600")->created.seconds(), 1'767'225'600);
  EXPECT_EQ(created(R"(")" + FormatIso8601(Time::FromMillis(1'767'225'600'007)) + R"(")")->created,
            Time::FromMillis(1'767'225'600'007));
  EXPECT_EQ(created(R"("2026-01-01T00:00:00")").status().message(),
            "\"created\": '2026-01-01T00:00:00' has no time zone (end it with Z or +00:00)");
  EXPECT_THAT(created(R"("yesterday")").status().message(), HasSubstr("'yesterday' is not a time"));
}

TEST(InstanceJsonTest, RequestCarriesEveryField) {
  InstanceRequest r{"n1", "aws p5 spot", "H100", 8, "spot", 2'100'000, "us-east-1a", {{"team", "a"}}};
  auto j = nlohmann::json::parse(RequestToJson(r));
  EXPECT_EQ(j["name"], "n1");
  EXPECT_EQ(j["gpus"], 8);
  EXPECT_EQ(j["price_per_hour"], "2.1");
  EXPECT_EQ(j["price_micros_per_hour"], 2'100'000);
  EXPECT_EQ(j["labels"]["team"], "a");
}

TEST(InstanceJsonTest, ScriptOutputNeedsOnlyAnIdAndTakesTheRestFromTheRequest) {
  InstanceRequest r{"n1", "offer", "H100", 8, "spot", 1, "z", {}};
  auto in = InstanceFromJson(R"({"id": "i-1"})", &r);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->id, "i-1");
  EXPECT_EQ(in->name, "n1");
  EXPECT_EQ(in->state, kBooting);
  EXPECT_EQ(in->gpus, 8);
}

TEST(InstanceJsonTest, BadInstancesSayWhatIsWrong) {
  EXPECT_THAT(InstanceFromJson(R"({"name": "x"})", nullptr).status().message(), HasSubstr("no \"id\""));
  EXPECT_THAT(InstanceFromJson(R"({"id": "i", "state": "pending"})", nullptr).status().message(),
              HasSubstr("'pending'"));
  EXPECT_THAT(InstanceFromJson("[]", nullptr).status().message(), HasSubstr("expected a JSON object"));
  EXPECT_THAT(InstancesFromJson("{}").status().message(), HasSubstr("expected a JSON array"));
  EXPECT_THAT(InstancesFromJson(R"([{"id": "a"}, {"id": 3}])").status().message(), HasSubstr("element 1"));
  EXPECT_THAT(InstancesFromJson("oops").status().message(), HasSubstr("not JSON"));
}

TEST(InstanceJsonTest, DeeplyNestedScriptOutputIsRefusedBeforeParsing) {
  // Given a provider script that prints 100,000 nested arrays, expect an error naming the depth
  // rather than a stack overflow in the JSON parser.
  EXPECT_EQ(InstancesFromJson(std::string(100'000, '[')).status().message(),
            "not JSON: nesting deeper than 64 levels at line 1, column 65");
  EXPECT_THAT(InstanceFromJson(R"({"id": "i", "labels": )" + std::string(100'000, '{'), nullptr).status().message(),
              HasSubstr("nesting deeper than 64 levels"));
}

TEST(InstanceJsonTest, InstanceRoundTrips) {
  Instance in;
  in.id = "i-9";
  in.name = "n";
  in.state = kTerminated;
  in.created = Time::FromSeconds(1'767'225'600);
  in.ended = Time::FromSeconds(1'767'225'700);
  in.end_reason = "spot interruption";
  in.labels["zone"] = "a";
  auto back = InstanceFromJson(InstanceToJson(in), nullptr);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->state, kTerminated);
  EXPECT_EQ(back->created, in.created);
  EXPECT_EQ(back->ended, in.ended);
  EXPECT_EQ(back->end_reason, in.end_reason);
  EXPECT_EQ(back->labels, in.labels);
}

}  // namespace
}  // namespace gpufleet::provider
