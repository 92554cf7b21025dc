// Fuzzes the API codec (api/codec.h): JSON text from a request body or a store column, parsed by
// ParseJson and handed to every record decoder. See round_trip.h for what is checked.
#include <cstddef>
#include <cstdint>

#include "api/codec.h"
#include "fuzz/round_trip.h"

namespace gpufleet::fuzz {
namespace {

void DecodeAll(const nlohmann::json& j) {
  CheckRoundTrip<model::JobSpec>("JobSpec", &api::JobSpecFromJson, j);
  CheckRoundTrip<model::NodeSpec>("NodeSpec", &api::NodeSpecFromJson, j);
  CheckRoundTrip<model::NodeAssignment>("NodeAssignment", &api::NodeAssignmentFromJson, j);
  CheckRoundTrip<model::Placement>("Placement", &api::PlacementFromJson, j);
  CheckRoundTrip<api::CheckpointPolicy>("CheckpointPolicy", &api::CheckpointPolicyFromJson, j);
  CheckRoundTrip<api::RestartPolicy>("RestartPolicy", &api::RestartPolicyFromJson, j);
  CheckRoundTrip<api::JobRequest>("JobRequest", &api::JobRequestFromJson, j);
  CheckRoundTrip<api::JobRecord>("JobRecord", &api::JobRecordFromJson, j);
  CheckRoundTrip<api::Transition>("Transition", &api::TransitionFromJson, j);
  CheckRoundTrip<api::GpuInfo>("GpuInfo", &api::GpuInfoFromJson, j);
  CheckRoundTrip<api::NodeRecord>("NodeRecord", &api::NodeRecordFromJson, j);
  CheckRoundTrip<api::TokenRecord>("TokenRecord", &api::TokenRecordFromJson, j);
  CheckRoundTrip<api::AuditRecord>("AuditRecord", &api::AuditRecordFromJson, j);
}

}  // namespace
}  // namespace gpufleet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpufleet::fuzz::ForEachDocument(data, size, gpufleet::fuzz::DecodeAll);
  return 0;
}
