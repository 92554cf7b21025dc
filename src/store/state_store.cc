#include "store/state_store.h"

#include <string>

namespace gpufleet::store {

Status CheckSubmissions(const std::vector<Submission>& submissions) {
  for (size_t i = 0; i < submissions.size(); ++i) {
    if (submissions[i].request_id.empty()) {
      return Status::InvalidArgument("submission " + std::to_string(i) + ": empty request id");
    }
    if (submissions[i].jobs.empty()) {
      return Status::InvalidArgument("submission " + std::to_string(i) + " (request " + submissions[i].request_id +
                                     "): no jobs");
    }
  }
  return Status::Ok();
}

}  // namespace gpufleet::store
