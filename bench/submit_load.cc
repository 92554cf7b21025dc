// gpufleet-submit-load: durable submit throughput and latency of a running controller.
//
// N client threads, each with its own keep-alive connection, POST /v1/jobs as fast as the
// server answers (closed loop: one request in flight per client). Every submit carries a
// unique request id; a 2xx answer means the job is committed to the store. Prints submits/s
// and the latency distribution of the answered submits; --out writes one line per request
// (request id, send and answer time in ns since the epoch, HTTP status, job id) for
// submit -> started analysis (scripts/bench_submit.sh).
//
// --wait-stamp DIR: after each answered submit, wait until the file DIR/<request id> exists
// (the job writes it when it starts) before the next submit: unloaded submit -> started latency.
//
// Examples:
//   gpufleet-submit-load --server http://127.0.0.1:8470 --token-file DATA/admin.token --clients 8 --requests 4000
//   gpufleet-submit-load ... --job '{"name":"t","resources":{"gpus":1},"run":"date +%s%N > /tmp/s/{rid}"}'
#include <httplib.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using nlohmann::json;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ReplaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

struct Sample {
  std::string rid;
  int64_t sent_ns = 0;
  int64_t answered_ns = 0;
  int status = 0;  // HTTP status; 0: no answer (connection error)
  int64_t job = -1;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::max(0.0, std::ceil(q / 100.0 * static_cast<double>(v.size())) - 1));
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Durable submit throughput and latency against a running gpufleet controller"};
  std::string server = "http://127.0.0.1:8470";
  std::string token, token_file, job_template, prefix, out_path, wait_stamp, format = "text";
  int clients = 1;
  int64_t requests = 1000;
  double wait_timeout_s = 30;
  job_template = R"({"name":"load","resources":{"gpus":1,"gpu_type":["H100"]},"run":"true"})";
  prefix = "load-" + std::to_string(NowNs());
  app.add_option("--server", server, "Controller URL")->capture_default_str();
  app.add_option("--token", token, "Bearer token (a user token)");
  app.add_option("--token-file", token_file, "File holding the token (the server's admin.token)");
  app.add_option("--clients", clients, "Concurrent clients, one thread and connection each")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--requests", requests, "Submits in all, split evenly over the clients")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  app.add_option("--job", job_template,
                 "The job as JSON; {rid} is replaced by the request id, {i} by the request's number")
      ->capture_default_str();
  app.add_option("--prefix", prefix, "Request ids are PREFIX-<client>-<n>; default unique per run");
  app.add_option("--out", out_path, "Write one line per submit: rid sent_ns answered_ns status job_id");
  app.add_option("--wait-stamp", wait_stamp,
                 "After each submit wait until DIR/<rid> exists (the job writes it when it starts)");
  app.add_option("--wait-timeout", wait_timeout_s, "Seconds to wait for each stamp")->capture_default_str();
  app.add_option("-o,--output", format, "text or json")->check(CLI::IsMember({"text", "json"}));
  CLI11_PARSE(app, argc, argv);

  if (token.empty() && !token_file.empty()) {
    std::ifstream f(token_file);
    std::getline(f, token);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  }
  if (token.empty()) {
    std::fprintf(stderr, "gpufleet-submit-load: no token: pass --token or --token-file\n");
    return 2;
  }
  try {
    if (!json::parse(ReplaceAll(ReplaceAll(job_template, "{rid}", "x"), "{i}", "0")).is_object()) {
      std::fprintf(stderr, "gpufleet-submit-load: --job must be a JSON object\n");
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpufleet-submit-load: --job is not JSON: %s\n", e.what());
    return 2;
  }

  std::vector<std::vector<Sample>> per_client(clients);
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed_wait{false};
  httplib::Headers headers = {{"Authorization", "Bearer " + token}};
  int64_t t0 = NowNs();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client cli(server);
      cli.set_keep_alive(true);
      // Headers and body go out in separate writes; without this, Nagle's algorithm holds the
      // body until the server's delayed ACK (about 40 ms) on every request.
      cli.set_tcp_nodelay(true);
      cli.set_connection_timeout(10, 0);
      cli.set_read_timeout(60, 0);
      auto& samples = per_client[c];
      for (int64_t n = 0;; ++n) {
        int64_t i = next.fetch_add(1);
        if (i >= requests || failed_wait) break;
        Sample s;
        s.rid = prefix + "-" + std::to_string(c) + "-" + std::to_string(n);
        json body = {{"request_id", s.rid},
                     {"job", json::parse(ReplaceAll(ReplaceAll(job_template, "{rid}", s.rid), "{i}",
                                                    std::to_string(i)))}};
        std::string text = body.dump();
        s.sent_ns = NowNs();
        auto res = cli.Post("/v1/jobs", headers, text, "application/json");
        s.answered_ns = NowNs();
        if (!res) {
          std::fprintf(stderr, "gpufleet-submit-load: %s: no answer: %s\n", s.rid.c_str(),
                       httplib::to_string(res.error()).c_str());
        } else {
          s.status = res->status;
          try {
            auto j = json::parse(res->body);
            if (j.contains("jobs") && !j["jobs"].empty()) s.job = j["jobs"][0].value("id", int64_t{-1});
          } catch (...) {
          }
        }
        samples.push_back(s);
        if (!wait_stamp.empty() && s.status / 100 == 2) {
          std::string path = wait_stamp + "/" + s.rid;
          struct stat sb;
          int64_t deadline = NowNs() + static_cast<int64_t>(wait_timeout_s * 1e9);
          while (::stat(path.c_str(), &sb) != 0) {
            if (NowNs() > deadline) {
              std::fprintf(stderr, "gpufleet-submit-load: %s did not appear in %.0f s\n", path.c_str(),
                           wait_timeout_s);
              failed_wait = true;
              break;
            }
            std::this_thread::sleep_for(std::chrono::microseconds(500));
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  int64_t t1 = NowNs();

  std::vector<double> lat_ms;
  int64_t ok = 0, errors = 0, no_answer = 0;
  std::FILE* out = out_path.empty() ? nullptr : std::fopen(out_path.c_str(), "w");
  if (!out_path.empty() && !out) {
    std::fprintf(stderr, "gpufleet-submit-load: cannot write %s\n", out_path.c_str());
    return 1;
  }
  for (const auto& samples : per_client) {
    for (const auto& s : samples) {
      if (s.status / 100 == 2) {
        ++ok;
        lat_ms.push_back(static_cast<double>(s.answered_ns - s.sent_ns) / 1e6);
      } else if (s.status == 0) {
        ++no_answer;
      } else {
        ++errors;
      }
      if (out) {
        std::fprintf(out, "%s %lld %lld %d %lld\n", s.rid.c_str(), static_cast<long long>(s.sent_ns),
                     static_cast<long long>(s.answered_ns), s.status, static_cast<long long>(s.job));
      }
    }
  }
  if (out) std::fclose(out);
  double wall_s = static_cast<double>(t1 - t0) / 1e9;
  json summary = {{"clients", clients},
                  {"submits", ok},
                  {"errors", errors},
                  {"no_answer", no_answer},
                  {"wall_s", wall_s},
                  {"submits_per_s", wall_s > 0 ? static_cast<double>(ok) / wall_s : 0.0},
                  {"latency_ms",
                   {{"p50", Percentile(lat_ms, 50)},
                    {"p90", Percentile(lat_ms, 90)},
                    {"p99", Percentile(lat_ms, 99)},
                    {"max", Percentile(lat_ms, 100)}}}};
  if (format == "json") {
    std::printf("%s\n", summary.dump().c_str());
  } else {
    std::printf("clients %d: %lld submits in %.2f s = %.0f submits/s; latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, "
                "max %.2f ms; %lld errors, %lld unanswered\n",
                clients, static_cast<long long>(ok), wall_s, summary["submits_per_s"].get<double>(),
                Percentile(lat_ms, 50), Percentile(lat_ms, 90), Percentile(lat_ms, 99), Percentile(lat_ms, 100),
                static_cast<long long>(errors), static_cast<long long>(no_answer));
  }
  if (failed_wait) return 1;
  return errors || no_answer ? 1 : 0;
}
