// JSON codec for the model value types and the controller's records: the one mapping between
// these C++ values and JSON. The store keeps records in JSON columns with it and the HTTP API
// builds its bodies and responses with it, so a record reads the same everywhere.
//
// The encoding is lossless: XFromJson(ToJson(x)) gives back x. Field names are snake_case; times
// and durations are integer milliseconds in fields ending in `_ms` (`submit_ms`,
// `duration_estimate_ms`); enums are written by name ("running", "on-demand"); ids are integers;
// an empty std::optional is null.
//
// Decoding is strict about what ToJson writes: each of those fields must be present with its
// type (an optional one may also be null or absent); integers must be integers that fit. Unknown
// fields are ignored, so a reader tolerates fields added later. A failure is InvalidArgument
// naming the field path: "request.spec.gpus_per_node: expected an integer, got string \"eight\"".
// Nothing here throws.
//
// Thread-safety: free functions on values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job_request.h"
#include "api/records.h"
#include "common/status.h"
#include "model/types.h"

namespace gpufleet::api {

nlohmann::json ToJson(const model::JobSpec& spec);
nlohmann::json ToJson(const model::NodeSpec& spec);
nlohmann::json ToJson(const model::NodeAssignment& part);
nlohmann::json ToJson(const model::Placement& placement);
nlohmann::json ToJson(const CheckpointPolicy& policy);
nlohmann::json ToJson(const RestartPolicy& policy);
nlohmann::json ToJson(const JobRequest& request);
nlohmann::json ToJson(const JobRecord& job);
nlohmann::json ToJson(const Transition& transition);
nlohmann::json ToJson(const GpuInfo& gpu);
nlohmann::json ToJson(const NodeRecord& node);
nlohmann::json ToJson(const TokenRecord& token);

Result<model::JobSpec> JobSpecFromJson(const nlohmann::json& j);
Result<model::NodeSpec> NodeSpecFromJson(const nlohmann::json& j);
Result<model::NodeAssignment> NodeAssignmentFromJson(const nlohmann::json& j);
Result<model::Placement> PlacementFromJson(const nlohmann::json& j);
Result<CheckpointPolicy> CheckpointPolicyFromJson(const nlohmann::json& j);
Result<RestartPolicy> RestartPolicyFromJson(const nlohmann::json& j);
Result<JobRequest> JobRequestFromJson(const nlohmann::json& j);
Result<JobRecord> JobRecordFromJson(const nlohmann::json& j);
Result<Transition> TransitionFromJson(const nlohmann::json& j);
Result<GpuInfo> GpuInfoFromJson(const nlohmann::json& j);
Result<NodeRecord> NodeRecordFromJson(const nlohmann::json& j);
Result<TokenRecord> TokenRecordFromJson(const nlohmann::json& j);
nlohmann::json ToJson(const AuditRecord& a);
Result<AuditRecord> AuditRecordFromJson(const nlohmann::json& j);

// Parses JSON text; a syntax error is InvalidArgument with the byte offset, and text nested
// deeper than kMaxNestingDepth (common/nesting.h) is InvalidArgument before it is parsed.
Result<nlohmann::json> ParseJson(std::string_view text);
// ParseJson for a request's body: a key given twice in one object (nlohmann would keep the last)
// and, with `refuse_nul`, a string or key holding a NUL byte ("\u0000") anywhere are
// InvalidArgument naming where ("job.name", "states[0]"). No text field of gpufleet holds a NUL,
// and PostgreSQL cannot store one; refused at the door, it never reaches a store's batch.
Result<nlohmann::json> ParseRequestJson(std::string_view text, bool refuse_nul = true);
// JSON text (as DumpJson writes it) with each "\u0000" escape written "\ufffd": the text
// PostgreSQL stores in place of a NUL byte, which neither its text nor its jsonb can hold. Other
// escapes, and a backslash written as "\\" before "u0000", are kept.
std::string WithoutNulEscapes(std::string text);
// U+FFFD in place of each NUL byte in the strings and keys under `j` (for the agent listener: an
// agent's heartbeat refused for one would be sent again for ever, and its node lost).
void ReplaceNulBytes(nlohmann::json& j);
// U+FFFD in place of each NUL byte of `s`.
void ReplaceNul(std::string& s);
// Compact JSON text. Never throws: bytes that are not valid UTF-8 (from a process's output, say)
// become U+FFFD, which is the only case where a string does not come back byte for byte.
std::string DumpJson(const nlohmann::json& j);
// DumpJson(ToJson(job)), byte for byte, written straight into the text without building a json
// tree: a bulk submission stores 100,000 records in one transaction. Keep it in step with
// ToJson(const JobRecord&); codec_test compares the two on records that set every field.
std::string DumpJobRecord(const JobRecord& job);
// The ArrayTaskFields of each job, a JSON array with one object per job in order (ids are not
// written: a task's id is its array's first id plus its place). ApplyArrayTask sets a job's
// fields from one element; a malformed element is InvalidArgument naming `path`.
std::string DumpArrayTasks(const std::vector<JobRecord>& jobs, size_t begin, size_t end);
Status ApplyArrayTask(const nlohmann::json& element, const std::string& path, JobRecord& job);
// Appends `s` as a JSON string, as DumpJson writes it (escapes, and U+FFFD for bytes that are not
// UTF-8), for answers written without a json tree.
void AppendJsonString(std::string& out, std::string_view s);

}  // namespace gpufleet::api
