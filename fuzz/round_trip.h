// Shared checks for the fuzz targets of JSON decoders (api/codec.h, api/agent_protocol.h).
//
// A decoder may refuse any input, but only with InvalidArgument and a message (the codec's
// contract), and never by throwing: an exception escaping a decoder ends the fuzz run as a crash.
// What it accepts must survive the promised round trip: decoding ToJson(x) gives a value that
// encodes to the same JSON, so the store and the API read back what they wrote.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "api/agent_protocol.h"
#include "api/codec.h"
#include "common/check.h"
#include "common/status.h"

namespace gpufleet::fuzz {

template <typename T>
using Decoder = Result<T> (*)(const nlohmann::json&);

template <typename T>
void CheckRoundTrip(const char* type, Decoder<T> decode, const nlohmann::json& j) {
  Result<T> first = decode(j);
  if (!first.ok()) {
    CHECK(first.status().code() == StatusCode::kInvalidArgument && !first.status().message().empty())
        << type << ": a refusal must be InvalidArgument with a message, got " << first.status().ToString();
    return;
  }
  const nlohmann::json encoded = api::ToJson(first.value());
  Result<T> second = decode(encoded);
  CHECK(second.ok()) << type << ": its own encoding does not decode: " << second.status().ToString()
                     << "\n  encoding: " << api::DumpJson(encoded) << "\n  input: " << api::DumpJson(j);
  const nlohmann::json again = api::ToJson(second.value());
  CHECK(again == encoded) << type << ": the round trip changed the value\n  first:  " << api::DumpJson(encoded)
                          << "\n  second: " << api::DumpJson(again);
}

// Parses `text` as JSON, dumps it (which must not throw), and hands the document and the values
// of its first members to `visit`, so that a decoder of a nested type (a heartbeat's events, a
// job's placement) is reached without the fuzzer first building its parent.
template <typename Visit>
void ForEachDocument(const uint8_t* data, size_t size, Visit visit) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<nlohmann::json> parsed = api::ParseJson(text);
  if (!parsed.ok()) {
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument) << parsed.status().ToString();
    return;
  }
  const nlohmann::json& j = parsed.value();
  (void)api::DumpJson(j);
  visit(j);
  if (j.is_object() || j.is_array()) {
    int members = 0;
    for (const nlohmann::json& member : j) {
      if (++members > 8) break;
      visit(member);
    }
  }
}

}  // namespace gpufleet::fuzz
