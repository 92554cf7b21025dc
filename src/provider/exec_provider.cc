#include "provider/exec_provider.h"

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "provider/instance_json.h"
#include "common/process.h"

namespace gpufleet::provider {
namespace {

constexpr int kStderrLines = 5;

std::string LastLines(const std::string& text, int n) {
  std::vector<std::string> lines = Split(std::string(Trim(text)), '\n');
  if (lines.size() > static_cast<size_t>(n)) lines.erase(lines.begin(), lines.end() - n);
  return Join(lines, "\n");
}

std::string Quote(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return "'" + s + "'";
}

std::string TimeoutText(Duration d) {
  return d < Duration::Seconds(1) ? std::to_string(d.millis()) + "ms" : FormatDuration(d);
}

class ExecProvider : public Provider {
 public:
  explicit ExecProvider(ExecConfig config) : config_(std::move(config)) {}

  std::string Kind() const override { return "exec"; }

  Result<Instance> Create(const InstanceRequest& request, Time now) override {
    if (request.name.empty()) return Status::InvalidArgument("create: the instance name must not be empty");
    GF_ASSIGN_OR_RETURN(CommandResult out, Run("create", config_.create, RequestToJson(request)));
    auto in = InstanceFromJson(out.stdout_text, &request);
    if (!in.ok()) return BadOutput("create", config_.create, out, in.status());
    if (in->created == Time::Epoch()) in->created = now;
    return in;
  }

  Status Delete(const std::string& id, Time now) override {
    nlohmann::json j = {{"id", id}};
    auto out = Run("delete", config_.del, j.dump());
    return out.ok() ? Status::Ok() : out.status();
  }

  Result<std::vector<Instance>> List() override {
    GF_ASSIGN_OR_RETURN(CommandResult out, Run("list", config_.list, ""));
    auto list = InstancesFromJson(out.stdout_text);
    if (!list.ok()) return BadOutput("list", config_.list, out, list.status());
    return list;
  }

 private:
  static std::string Context(const std::string& call, const std::vector<std::string>& argv) {
    return "exec provider: " + call + " script " + Quote(argv);
  }

  static std::string StderrTail(const CommandResult& r) {
    std::string err = LastLines(r.stderr_text, kStderrLines);
    return err.empty() ? " (no stderr)" : "; stderr:\n" + err;
  }

  static Status BadOutput(const std::string& call, const std::vector<std::string>& argv, const CommandResult& r,
                          const Status& why) {
    return Status::Unavailable(Context(call, argv) + " exited with code 0 but its output is wrong: " + why.message() +
                               StderrTail(r));
  }

  Result<CommandResult> Run(const std::string& call, const std::vector<std::string>& argv, const std::string& input) {
    CommandOptions options;
    options.stdin_text = input;
    options.timeout = config_.timeout;
    options.env = config_.env;
    auto result = RunCommand(argv, options);
    if (!result.ok()) return Status::Unavailable(Context(call, argv) + ": " + result.status().message());
    if (!result->ok()) {
      std::string what = result->timed_out ? "timed out after " + TimeoutText(config_.timeout) + " and was killed"
                                           : result->Describe(config_.timeout);
      return Status::Unavailable(Context(call, argv) + " " + what + StderrTail(*result));
    }
    return std::move(result).value();
  }

  const ExecConfig config_;
};

}  // namespace

Result<std::unique_ptr<Provider>> MakeExecProvider(const ExecConfig& config) {
  if (config.create.empty() || config.del.empty() || config.list.empty()) {
    return Status::InvalidArgument("exec provider: create, delete and list scripts are all required");
  }
  if (config.timeout <= Duration::Zero()) return Status::InvalidArgument("exec provider: timeout must be positive");
  return std::unique_ptr<Provider>(new ExecProvider(config));
}

}  // namespace gpufleet::provider
