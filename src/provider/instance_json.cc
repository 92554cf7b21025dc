#include "provider/instance_json.h"

#include <cctype>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "common/iso_time.h"
#include "common/nesting.h"

namespace gpufleet::provider {
namespace {

using nlohmann::json;

bool ValidState(const std::string& s) {
  return s == kBooting || s == kRunning || s == kTerminating || s == kTerminated;
}

// Reads an optional string field; a field of another type is an error.
Status ReadString(const json& j, const char* key, std::string& into) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return Status::InvalidArgument(std::string("\"") + key + "\" must be a string");
  into = it->get<std::string>();
  return Status::Ok();
}

Status ReadTime(const json& j, const char* key, std::optional<Time>& into) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (it->is_number_integer()) {  // Unix seconds
    into = Time::FromSeconds(it->get<int64_t>());
    return Status::Ok();
  }
  if (!it->is_string()) return Status::InvalidArgument(std::string("\"") + key + "\" must be an ISO-8601 time");
  // AWS's LaunchTime and the like: a time with its zone ("2026-12-02T15:04:05.250Z", "+01:00").
  auto t = ReadIsoTime(it->get<std::string>(), {.require_time = true, .require_zone = true});
  if (!t.ok()) return t.status().WithContext(std::string("\"") + key + "\"");
  into = *t;
  return Status::Ok();
}

Result<Instance> FromObject(const json& j, const InstanceRequest* request) {
  if (!j.is_object()) return Status::InvalidArgument("expected a JSON object for an instance, got " +
                                                     std::string(j.type_name()));
  Instance in;
  if (request != nullptr) {
    in.name = request->name;
    in.offer = request->offer;
    in.gpu_model = request->gpu_model;
    in.gpus = request->gpus;
    in.market = request->market;
    in.price_micros_per_hour = request->price_micros_per_hour;
    in.zone = request->zone;
    in.labels = request->labels;
  }
  in.state = kBooting;
  GF_RETURN_IF_ERROR(ReadString(j, "id", in.id));
  if (in.id.empty()) return Status::InvalidArgument("the instance has no \"id\"");
  GF_RETURN_IF_ERROR(ReadString(j, "name", in.name));
  GF_RETURN_IF_ERROR(ReadString(j, "offer", in.offer));
  GF_RETURN_IF_ERROR(ReadString(j, "gpu_model", in.gpu_model));
  GF_RETURN_IF_ERROR(ReadString(j, "market", in.market));
  GF_RETURN_IF_ERROR(ReadString(j, "zone", in.zone));
  GF_RETURN_IF_ERROR(ReadString(j, "state", in.state));
  GF_RETURN_IF_ERROR(ReadString(j, "end_reason", in.end_reason));
  GF_RETURN_IF_ERROR(ReadString(j, "notice_url", in.notice_url));
  if (!ValidState(in.state)) {
    return Status::InvalidArgument("instance " + in.id + ": \"state\" must be booting, running, terminating or "
                                   "terminated, got '" + in.state + "'");
  }
  if (auto it = j.find("gpus"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) return Status::InvalidArgument("\"gpus\" must be an integer");
    in.gpus = it->get<int>();
  }
  if (auto it = j.find("price_micros_per_hour"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) return Status::InvalidArgument("\"price_micros_per_hour\" must be an integer");
    in.price_micros_per_hour = it->get<int64_t>();
  }
  if (auto it = j.find("labels"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return Status::InvalidArgument("\"labels\" must be an object of strings");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) return Status::InvalidArgument("label \"" + k + "\" must be a string");
      in.labels[k] = v.get<std::string>();
    }
  }
  std::optional<Time> created;
  GF_RETURN_IF_ERROR(ReadTime(j, "created", created));
  if (created) in.created = *created;
  GF_RETURN_IF_ERROR(ReadTime(j, "started", in.started));
  GF_RETURN_IF_ERROR(ReadTime(j, "ended", in.ended));
  return in;
}

Result<json> Parse(const std::string& text) {
  // What a provider script prints: bound its depth before nlohmann's recursive tree sees it.
  Status depth = CheckNestingDepth(text, NestingSyntax::kJson);
  if (!depth.ok()) return Status::InvalidArgument("not JSON: " + depth.message());
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    std::string shown = text.size() > 200 ? text.substr(0, 200) + "..." : text;
    return Status::InvalidArgument(std::string("not JSON (") + e.what() + "): '" + shown + "'");
  }
}

}  // namespace

std::string FormatPricePerHour(int64_t micros) {
  std::string sign = micros < 0 ? "-" : "";
  uint64_t m = micros < 0 ? -static_cast<uint64_t>(micros) : static_cast<uint64_t>(micros);
  std::string s = sign + std::to_string(m / 1'000'000);
  uint64_t frac = m % 1'000'000;
  if (frac != 0) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%06llu", static_cast<unsigned long long>(frac));
    std::string f = buf;
    while (f.back() == '0') f.pop_back();
    s += "." + f;
  }
  return s;
}

std::string RequestToJson(const InstanceRequest& r) {
  json j = {{"name", r.name},
            {"offer", r.offer},
            {"gpu_model", r.gpu_model},
            {"gpus", r.gpus},
            {"market", r.market},
            {"price_per_hour", FormatPricePerHour(r.price_micros_per_hour)},
            {"price_micros_per_hour", r.price_micros_per_hour},
            {"zone", r.zone},
            {"labels", r.labels}};
  return j.dump();
}

std::string InstanceToJson(const Instance& in) {
  json j = {{"id", in.id},
            {"name", in.name},
            {"offer", in.offer},
            {"gpu_model", in.gpu_model},
            {"gpus", in.gpus},
            {"market", in.market},
            {"price_micros_per_hour", in.price_micros_per_hour},
            {"zone", in.zone},
            {"labels", in.labels},
            {"state", in.state},
            {"created", FormatIso8601(in.created)}};
  if (in.started) j["started"] = FormatIso8601(*in.started);
  if (in.ended) j["ended"] = FormatIso8601(*in.ended);
  if (!in.end_reason.empty()) j["end_reason"] = in.end_reason;
  if (!in.notice_url.empty()) j["notice_url"] = in.notice_url;
  return j.dump();
}

Result<Instance> InstanceFromJson(const std::string& text, const InstanceRequest* request) {
  GF_ASSIGN_OR_RETURN(json j, Parse(text));
  return FromObject(j, request);
}

Result<std::vector<Instance>> InstancesFromJson(const std::string& text) {
  GF_ASSIGN_OR_RETURN(json j, Parse(text));
  if (!j.is_array()) return Status::InvalidArgument("expected a JSON array of instances, got " +
                                                    std::string(j.type_name()));
  std::vector<Instance> out;
  for (size_t i = 0; i < j.size(); ++i) {
    auto in = FromObject(j[i], nullptr);
    if (!in.ok()) return in.status().WithContext("element " + std::to_string(i));
    out.push_back(std::move(in).value());
  }
  return out;
}

}  // namespace gpufleet::provider
