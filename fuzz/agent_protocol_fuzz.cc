// Fuzzes the agent protocol decoders (api/agent_protocol.h): what the controller reads from an
// agent (register, heartbeat) and what an agent reads from the controller (replies, commands).
// Both sides are untrusted to each other. See round_trip.h for what is checked.
#include <cstddef>
#include <cstdint>

#include "api/agent_protocol.h"
#include "fuzz/round_trip.h"

namespace gpufleet::fuzz {
namespace {

void DecodeAll(const nlohmann::json& j) {
  CheckRoundTrip<api::PartKey>("PartKey", &api::PartKeyFromJson, j);
  CheckRoundTrip<api::RegisterRequest>("RegisterRequest", &api::RegisterRequestFromJson, j);
  CheckRoundTrip<api::RegisterReply>("RegisterReply", &api::RegisterReplyFromJson, j);
  CheckRoundTrip<api::PartEvent>("PartEvent", &api::PartEventFromJson, j);
  CheckRoundTrip<api::SpotNotice>("SpotNotice", &api::SpotNoticeFromJson, j);
  CheckRoundTrip<api::Heartbeat>("Heartbeat", &api::HeartbeatFromJson, j);
  CheckRoundTrip<api::HeartbeatReply>("HeartbeatReply", &api::HeartbeatReplyFromJson, j);
  CheckRoundTrip<api::Command>("Command", &api::CommandFromJson, j);
  CheckRoundTrip<api::CommandBatch>("CommandBatch", &api::CommandBatchFromJson, j);
}

}  // namespace
}  // namespace gpufleet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpufleet::fuzz::ForEachDocument(data, size, gpufleet::fuzz::DecodeAll);
  return 0;
}
