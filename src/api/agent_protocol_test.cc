#include "api/agent_protocol.h"

#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace gpufleet::api {
namespace {

using json = nlohmann::json;

PartEvent SampleEvent() {
  PartEvent e;
  e.seq = 5;
  e.key = PartKey{JobId(42), 2, 1};
  e.kind = PartEventKind::kExited;
  e.at = Time::FromMillis(1'700'000'000'123);
  e.exit_code = 143;
  e.signal = 15;
  e.stopped = true;
  e.message = "stopped";
  return e;
}

json SampleStart() {
  return json{{"seq", 7},       {"type", "start"}, {"key", ToJson(PartKey{JobId(42), 2, 1})},
              {"argv", {"sh"}}, {"env", json::object()}, {"gpus", {0, 1}}, {"processes", 2}};
}

template <typename R>
void ExpectError(const R& r, const std::string& part) {
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << part;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message() << "\n  lacks: " << part;
}

TEST(AgentProtocolTest, EventsAndCommandsRoundTrip) {
  const json event = ToJson(SampleEvent());
  Result<PartEvent> e = PartEventFromJson(event);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(ToJson(*e), event);
  Result<Command> c = CommandFromJson(SampleStart());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->start.has_value());
  EXPECT_EQ(c->start->gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(c->start->processes, 2);
}

TEST(AgentProtocolTest, HeartbeatActivityRoundTripsAndIsOptional) {
  Heartbeat hb;
  PartActivity a;
  a.key = PartKey{JobId(42), 2, 1};
  a.output_age = Duration::Seconds(90);
  a.progress_age = Duration::Millis(1500);
  a.step = 1200;
  a.loss = 0.4312;
  hb.activity = {a, PartActivity{PartKey{JobId(43), 1, 0}, Duration::Millis(5), std::nullopt, std::nullopt, std::nullopt}};
  // Through text, as it travels (a parsed non-negative number is nlohmann's unsigned kind).
  auto back = HeartbeatFromJson(json::parse(ToJson(hb).dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->activity.size(), 2u);
  EXPECT_EQ(back->activity[0].key, a.key);
  EXPECT_EQ(back->activity[0].output_age, a.output_age);
  EXPECT_EQ(back->activity[0].progress_age, a.progress_age);
  EXPECT_EQ(back->activity[0].step, 1200);
  EXPECT_DOUBLE_EQ(*back->activity[0].loss, 0.4312);
  EXPECT_FALSE(back->activity[1].progress_age);
  // A negative or absurd age is ignored, not trusted.
  auto odd = HeartbeatFromJson(json{{"activity", {{{"key", ToJson(a.key)}, {"output_age_ms", -5}, {"progress_age_ms", 1e300}}}}});
  ASSERT_TRUE(odd.ok()) << odd.status().ToString();
  EXPECT_FALSE(odd->activity[0].output_age);
  EXPECT_FALSE(odd->activity[0].progress_age);
  EXPECT_FALSE(back->activity[1].step);
  // Older agents send none.
  auto none = HeartbeatFromJson(json{{"gpus", json::array()}, {"events", json::array()}, {"running", json::array()}});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->activity.empty());
  ExpectError(HeartbeatFromJson(json{{"activity", 3}}), "heartbeat.activity: expected an array");
  ExpectError(HeartbeatFromJson(json{{"activity", {json::object()}}}), "each entry needs a key");
}

TEST(AgentProtocolTest, ANodeFaultAndItsReasonTravelAndAreAbsentWhenThereIsNone) {
  PartEvent e = SampleEvent();
  e.node_fault = true;
  Heartbeat hb;
  hb.events = {e};
  hb.storage_fault = "the node's data directory /d cannot be written: No space left on device";
  auto back = HeartbeatFromJson(json::parse(ToJson(hb).dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->events.size(), 1u);
  EXPECT_TRUE(back->events[0].node_fault);
  EXPECT_EQ(back->storage_fault, hb.storage_fault);
  RegisterRequest r;
  r.name = "n1";
  r.storage_fault = hb.storage_fault;
  auto reg = RegisterRequestFromJson(json::parse(ToJson(r).dump()));
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_EQ(reg->storage_fault, r.storage_fault);
  EXPECT_FALSE(reg->limits.has_value());  // not said: unknown
  r.containment = "cgroup v2 at /x: parts are contained; memory limits not enforced: ...; cpu limits enforced";
  r.limits = EnforcedLimits{false, true};
  reg = RegisterRequestFromJson(json::parse(ToJson(r).dump()));
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  EXPECT_EQ(reg->containment, r.containment);
  EXPECT_EQ(reg->limits, (std::optional<EnforcedLimits>(EnforcedLimits{false, true})));
  json bad = ToJson(r);
  bad["limits"] = "no";
  ExpectError(RegisterRequestFromJson(bad), "register");
  // Neither is sent when there is none, and older agents send neither.
  EXPECT_FALSE(ToJson(SampleEvent()).contains("node_fault"));
  EXPECT_FALSE(ToJson(Heartbeat{}).contains("storage_fault"));
  auto old = HeartbeatFromJson(json{{"events", {ToJson(SampleEvent())}}});
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->events[0].node_fault);
  EXPECT_TRUE(old->storage_fault.empty());
  ExpectError(HeartbeatFromJson(json{{"storage_fault", 3}}), "heartbeat.storage_fault");
}

TEST(AgentProtocolTest, TheRoomOnTheAgentsDisksTravelsAndAnEntryItCannotUseIsLeftOut) {
  Heartbeat hb;
  hb.disks = {{"data", "/var/lib/gpufleet", 4'096, 1 << 20}, {"environments", "/envs", 0, 1 << 20}};
  auto back = HeartbeatFromJson(json::parse(ToJson(hb).dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->disks, hb.disks);
  // Not sent when there is none; an older agent's heartbeat has none.
  EXPECT_FALSE(ToJson(Heartbeat{}).contains("disks"));
  auto old = HeartbeatFromJson(json::object());
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(old->disks.empty());
  // An entry it cannot use (from a newer agent, or numbers that do not add up) is left out, and
  // the rest of the heartbeat is taken: the node must not go lost over it.
  auto kept = [](json j) {
    auto r = HeartbeatFromJson(j);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->disks : std::vector<DiskReport>{};
  };
  json bad = ToJson(hb);
  bad["disks"][0]["free_bytes"] = 2 << 20;  // more free than the disk holds
  EXPECT_EQ(kept(bad), std::vector<DiskReport>{hb.disks[1]});
  bad = ToJson(hb);
  bad["disks"][1]["dir"] = "scratch";
  EXPECT_EQ(kept(bad), std::vector<DiskReport>{hb.disks[0]});
  bad = ToJson(hb);
  bad["disks"][0].erase("size_bytes");
  bad["disks"][1]["free_bytes"] = "lots";
  EXPECT_TRUE(kept(bad).empty());
  EXPECT_TRUE(kept(json{{"disks", "full"}}).empty());
}

// Found by fuzz/agent_protocol_fuzz: a float too large for the integer field ("at_ms": 4e70)
// reached nlohmann's float-to-integer cast, which is undefined behaviour (UBSan:
// float-cast-overflow), and a large integer in an int field wrapped. Given either, in any
// integer field, expect InvalidArgument instead.
TEST(AgentProtocolTest, IntegerFieldsRefuseFloatsAndIntegersThatDoNotFit) {
  json event = ToJson(SampleEvent());
  event["at_ms"] = 4.3e70;
  ExpectError(PartEventFromJson(event), "type must be an integer, but is number");
  event = ToJson(SampleEvent());
  event["seq"] = 1.5;
  ExpectError(PartEventFromJson(event), "type must be an integer");
  event = ToJson(SampleEvent());
  event["exit_code"] = int64_t{1} << 40;
  ExpectError(PartEventFromJson(event), "integer 1099511627776 is out of range");
  event = ToJson(SampleEvent());
  event["key"]["part"] = std::numeric_limits<uint64_t>::max();
  ExpectError(PartEventFromJson(event), "is out of range");

  json heartbeat = {{"events", {ToJson(SampleEvent())}}, {"gpus", {{{"util_pct", 1e300}}}}};
  ExpectError(HeartbeatFromJson(heartbeat), "type must be an integer");

  json start = SampleStart();
  start["gpus"] = {0, 1e20};
  ExpectError(CommandFromJson(start), "type must be an integer");
  start = SampleStart();
  start["gpus"] = {{"0", 1}};
  ExpectError(CommandFromJson(start), "type must be array");
  start = SampleStart();
  start["grace_ms"] = -1e19;
  ExpectError(CommandFromJson(start), "type must be an integer");
  start = SampleStart();
  start["processes"] = int64_t{3'000'000'000};
  ExpectError(CommandFromJson(start), "is out of range");

  json reply = {{"node_id", 3}, {"token", "t"}, {"epoch", "e"}, {"heartbeat_interval_ms", 9.9e99},
                {"lost_after_ms", 1000}};
  ExpectError(RegisterReplyFromJson(reply), "type must be an integer");
}

TEST(AgentProtocolTest, RegisterReplyCarriesTheCheckpointRootAndOlderRepliesLackIt) {
  RegisterReply r;
  r.node = NodeId(3);
  r.token = "t";
  r.epoch = "e";
  r.checkpoint_root = "/srv/ckpt";
  auto back = RegisterReplyFromJson(ToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->checkpoint_root, "/srv/ckpt");
  json older = {{"node_id", 3}, {"token", "t"}, {"epoch", "e"}, {"heartbeat_interval_ms", 5000}, {"lost_after_ms", 1000}};
  auto old_reply = RegisterReplyFromJson(older);
  ASSERT_TRUE(old_reply.ok()) << old_reply.status().message();
  EXPECT_EQ(old_reply->checkpoint_root, "");
}

TEST(AgentProtocolTest, IntegersAtTheEdgesOfTheirFieldsAreKept) {
  json event = ToJson(SampleEvent());
  event["seq"] = std::numeric_limits<int64_t>::max();
  event["exit_code"] = std::numeric_limits<int>::min();
  Result<PartEvent> e = PartEventFromJson(event);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->seq, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(e->exit_code, std::numeric_limits<int>::min());
}

}  // namespace
}  // namespace gpufleet::api
