#include "store/state_store.h"

#include <string>

namespace gpufleet::store {

Result<std::vector<JobBrief>> StateStore::GetJobBriefs(const std::vector<JobId>& ids) {
  std::vector<JobBrief> out;
  for (JobId id : ids) {
    GF_ASSIGN_OR_RETURN(std::optional<api::JobRecord> rec, GetJob(id));
    if (rec) out.push_back({id, rec->request.spec.team, rec->state});
  }
  return out;
}

Status CheckSubmissions(const std::vector<Submission>& submissions) {
  for (size_t i = 0; i < submissions.size(); ++i) {
    if (submissions[i].request_id.empty()) {
      return Status::InvalidArgument("submission " + std::to_string(i) + ": empty request id");
    }
    if (submissions[i].jobs.empty() && !submissions[i].only_if_seen) {
      return Status::InvalidArgument("submission " + std::to_string(i) + " (request " + submissions[i].request_id +
                                     "): no jobs");
    }
  }
  return Status::Ok();
}

std::optional<int64_t> SinceMillis(const JobFilter& filter) {
  return filter.since ? std::optional<int64_t>(filter.since->millis()) : std::nullopt;
}

std::optional<int64_t> BeforeId(const JobFilter& filter) {
  return filter.before ? std::optional<int64_t>(filter.before->value()) : std::nullopt;
}

}  // namespace gpufleet::store
