#include <yaml-cpp/yaml.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "provider/provider.h"

namespace gpufleet::provider {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Result<ProviderConfig> Parse(const std::string& yaml, const std::string& prefix = "") {
  return ParseProviderConfig(YAML::Load(yaml), "cluster.yaml", prefix);
}

std::string ErrorOf(const std::string& yaml, const std::string& prefix = "") {
  auto c = Parse(yaml, prefix);
  EXPECT_FALSE(c.ok()) << yaml;
  return c.ok() ? "" : c.status().message();
}

TEST(ProviderConfigTest, LocalReadsEveryField) {
  auto c = Parse(R"(
kind: local
state_dir: /tmp/fleet
agent_command: [gpufleet, agent, --name, "{name}", --fake-gpus, "{gpus}x{gpu_model}"]
boot_delay: 20s
stop_grace: 5s
notice_port: 8471
notice_lead: 2m
interruptions:
  per_hour: 0.5
  seed: 42
  schedule:
    - {after: 30s, instance: node-1}
    - {after: 1m, instance: 0}
spot_capacity: {available: 104m, outage: 74m}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->kind, "local");
  EXPECT_EQ(c->local.state_dir, "/tmp/fleet");
  EXPECT_THAT(c->local.agent_command, ElementsAre("gpufleet", "agent", "--name", "{name}", "--fake-gpus",
                                                  "{gpus}x{gpu_model}"));
  EXPECT_EQ(c->local.boot_delay, Duration::Seconds(20));
  EXPECT_EQ(c->local.stop_grace, Duration::Seconds(5));
  EXPECT_EQ(c->local.notice_port, 8471);
  EXPECT_EQ(c->local.notice_lead, Duration::Minutes(2));
  EXPECT_EQ(c->local.interruptions_per_hour, 0.5);
  EXPECT_EQ(c->local.seed, 42u);
  ASSERT_EQ(c->local.schedule.size(), 2u);
  EXPECT_EQ(c->local.schedule[0].after, Duration::Seconds(30));
  EXPECT_EQ(c->local.schedule[0].instance, "node-1");
  EXPECT_EQ(c->local.schedule[1].instance, "0");
  EXPECT_EQ(c->local.capacity_available, Duration::Minutes(104));
  EXPECT_EQ(c->local.capacity_outage, Duration::Minutes(74));
}

TEST(ProviderConfigTest, LocalDefaults) {
  auto c = Parse("{kind: local, state_dir: /tmp/x, agent_command: [sleep, '1000']}");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->local.notice_lead, Duration::Seconds(120));
  EXPECT_EQ(c->local.notice_port, 0);
  EXPECT_EQ(c->local.interruptions_per_hour, 0);
  EXPECT_THAT(c->local.schedule, IsEmpty());
}

TEST(ProviderConfigTest, ExecReadsScriptsTimeoutAndEnv) {
  auto c = Parse(R"(
kind: exec
create: [./create.sh, --region, us-east-1]
delete: [./delete.sh]
list: [./list.sh]
timeout: 3m
env: {AWS_PROFILE: fleet}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_THAT(c->exec.create, ElementsAre("./create.sh", "--region", "us-east-1"));
  EXPECT_THAT(c->exec.del, ElementsAre("./delete.sh"));
  EXPECT_EQ(c->exec.timeout, Duration::Minutes(3));
  EXPECT_EQ(c->exec.env.at("AWS_PROFILE"), "fleet");
}

TEST(ProviderConfigTest, ErrorsNameTheFileLineAndField) {
  EXPECT_THAT(ErrorOf("state_dir: /x"), HasSubstr("cluster.yaml:1:1: kind: is required"));
  EXPECT_THAT(ErrorOf("kind: aws"), HasSubstr("kind: must be one of static, local, exec, got 'aws'"));
  EXPECT_THAT(ErrorOf("kind: local\nagent_command: [a]"), HasSubstr("state_dir: is required"));
  EXPECT_THAT(ErrorOf("kind: local\nstate_dir: /x"), HasSubstr("agent_command: is required"));
  EXPECT_THAT(ErrorOf("kind: local\nstate_dir: /x\nagent_command: a"), HasSubstr("agent_command: must be a non-empty list"));
  EXPECT_THAT(ErrorOf("kind: local\nstate_dir: /x\nagent_command: [a]\nboot_delay: soon"),
              HasSubstr("cluster.yaml:4:13: boot_delay: must be a duration such as 500ms, 30s or 2m, got 'soon'"));
  EXPECT_THAT(ErrorOf("kind: local\nstate_dir: /x\nagent_command: [a, '{nmae}']"),
              HasSubstr("agent_command: unknown placeholder {nmae}"));
  EXPECT_THAT(ErrorOf("kind: local\nstate_dir: /x\nagent_command: [a]\nnotice_port: 70000"),
              HasSubstr("notice_port: must be a port number"));
  EXPECT_THAT(ErrorOf("kind: local\nstate_dir: /x\nagent_command: [a]\nnotice_leed: 5s"),
              HasSubstr("notice_leed: unknown field (did you mean 'notice_lead'?)"));
  EXPECT_THAT(ErrorOf("kind: local\nstate_dir: /x\nagent_command: [a]\ninterruptions: {per_hour: -1}"),
              HasSubstr("interruptions.per_hour: must be a rate"));
  EXPECT_THAT(ErrorOf("kind: local\nstate_dir: /x\nagent_command: [a]\ninterruptions:\n  schedule:\n"
                      "    - {instance: a}\n"),
              HasSubstr("cluster.yaml:6:7: interruptions.schedule[0].after: is required"));
  EXPECT_THAT(ErrorOf("kind: exec\ncreate: [a]\nlist: [c]"), HasSubstr("delete: is required"));
  EXPECT_THAT(ErrorOf("kind: exec\ncreate: [a]\ndelete: [b]\nlist: [c]\ntimeout: 0s"),
              HasSubstr("timeout: must be positive"));
  EXPECT_THAT(ErrorOf("kind: static\nstate_dir: /x"), HasSubstr("state_dir: unknown field"));
  EXPECT_THAT(ErrorOf("[a, b]"), HasSubstr("must be a mapping"));
}

TEST(ProviderConfigTest, ErrorsPointAtTheBadValueOrTheUnknownKey) {
  // Given a bad value inside a flow mapping, expect the line and column of the value itself;
  // given an unknown field, the position of its key; given a bad list entry, that entry's.
  const std::string local = "kind: local\nstate_dir: /x\nagent_command: [a]\n";
  EXPECT_EQ(ErrorOf(local + "interruptions: {per_hour: -1}"),
            "cluster.yaml:4:27: interruptions.per_hour: must be a rate per hour of each spot instance (0.5, 0 for "
            "none), got '-1'");
  EXPECT_THAT(ErrorOf(local + "interruptions: {per_hour: 1, sed: 4}"),
              HasSubstr("cluster.yaml:4:30: interruptions.sed: unknown field (did you mean 'seed'?)"));
  EXPECT_THAT(ErrorOf("kind: exec\ncreate: [a, [b]]\ndelete: [b]\nlist: [c]"),
              HasSubstr("cluster.yaml:2:13: create[1]: must be a single value, got a list"));
}

TEST(ProviderConfigTest, FieldPrefixLeadsEveryPath) {
  EXPECT_THAT(ErrorOf("kind: local\nstate_dir: /x\nagent_command: [a]\nboot_delay: x", "provider."),
              HasSubstr("cluster.yaml:4:13: provider.boot_delay: must be a duration"));
}

TEST(ProviderTest, StaticPoolsCannotRentAndListNothing) {
  ProviderConfig c;
  c.kind = "static";
  auto p = MakeProvider(c);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Kind(), "static");
  auto in = (*p)->Create(InstanceRequest{"n1", "o", "H100", 8, "on-demand", 0, "", {}}, Time::Epoch());
  ASSERT_FALSE(in.ok());
  EXPECT_THAT(in.status().message(), HasSubstr("static pools are hand-registered"));
  EXPECT_THAT(*(*p)->List(), IsEmpty());
  EXPECT_TRUE((*p)->Delete("anything", Time::Epoch()).ok());
  EXPECT_THAT((*p)->Poll(Time::Epoch()), IsEmpty());
}

TEST(ProviderTest, UnknownKindListsTheKnownOnes) {
  ProviderConfig c;
  c.kind = "gcp";
  auto p = MakeProvider(c);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("known: static, local, exec"));
  EXPECT_THAT(ProviderKinds(), ElementsAre("static", "local", "exec"));
}

}  // namespace
}  // namespace gpufleet::provider
