// Fuzzes the job file validator (api/job_yaml.h), which reads `gpufleet submit` files and the
// body of POST /v1/jobs: YAML or JSON from any user. It may refuse any input with
// InvalidArgument, never crash or throw; and a job it accepts must come back from its own file
// form (job_yaml.h: ParseJobs(ToJobJson(r).dump()) gives r back), since that form is what the
// CLI sends.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/codec.h"
#include "api/job_yaml.h"
#include "common/check.h"

namespace gpufleet::fuzz {
namespace {

// An array may expand to kMaxArrayJobs jobs; checking a few keeps an execution short.
constexpr size_t kRoundTripsPerInput = 8;

void CheckOneInput(std::string_view text) {
  Result<std::vector<api::JobRequest>> jobs = api::ParseJobs(text);
  if (!jobs.ok()) {
    CHECK(jobs.status().code() == StatusCode::kInvalidArgument && !jobs.status().message().empty())
        << jobs.status().ToString();
    return;
  }
  CHECK(!jobs->empty()) << "ParseJobs accepted a file without jobs";
  CHECK(jobs->size() <= static_cast<size_t>(api::kMaxArrayJobs)) << jobs->size() << " jobs";
  for (size_t i = 0; i < jobs->size() && i < kRoundTripsPerInput; ++i) {
    const nlohmann::json file = api::ToJobJson((*jobs)[i]);
    std::string text_again;
    try {
      text_again = file.dump();
    } catch (const nlohmann::json::exception&) {
      continue;  // not valid UTF-8: the API would send U+FFFD (api::DumpJson), a different value
    }
    Result<std::vector<api::JobRequest>> again = api::ParseJobs(text_again);
    CHECK(again.ok()) << "a job's own file form is refused: " << again.status().ToString()
                      << "\n  file form: " << text_again;
    CHECK(again->size() == 1) << again->size() << " jobs from " << text_again;
    const nlohmann::json file_again = api::ToJobJson(again->front());
    CHECK(file_again == file) << "the file form changed\n  first:  " << text_again
                              << "\n  second: " << api::DumpJson(file_again);
  }
}

}  // namespace
}  // namespace gpufleet::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpufleet::fuzz::CheckOneInput(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
