// The test fixture (a *_test.h, so it may use testing/) the controller's engine-level tests share (engine_test.cc, monitor_test.cc):
// an Engine on a fake clock and an in-memory store, and helpers that act as the API and the
// agents do — submit a job file, register a node, send a heartbeat — each followed by one
// engine step. Test-only: include it from *_test.cc files.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/job_yaml.h"
#include "controller/engine.h"
#include "testing/fakes.h"
#include "testing/memory_store.h"

namespace gpufleet::controller {

class EngineFixture : public ::testing::Test {
 protected:
  EngineFixture() { clock_.Set(Time::FromSeconds(1'000'000)); }

  std::unique_ptr<Engine> MakeEngine(const std::string& policy = "fifo", Duration lost_after = Duration::Seconds(30)) {
    EngineOptions o;
    o.policy = policy;
    o.lost_after = lost_after;
    o.checkpoint_root = "/ckpt";
    o.epoch = "e1";
    auto e = std::make_unique<Engine>(clock_, store_, o);
    EXPECT_TRUE(e->Recover().ok());
    return e;
  }

  api::JobRequest Job(const std::string& yaml) {
    auto r = api::ParseJobs(yaml);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return (*r)[0];
  }

  JobId Submit(Engine& e, const std::string& yaml, const std::string& rid = "") {
    auto f = e.Submit(rid.empty() ? "r" + std::to_string(++rid_) : rid, {Job(yaml)});
    e.Step();
    auto r = f.get();
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r->ids[0] : JobId();
  }

  // Registers an H100 node; its GPUs are named "GPU-<name>-<i>" (NVIDIA H100 80GB HBM3).
  NodeId Register(Engine& e, const std::string& name, int gpus, std::vector<api::PartKey> running = {},
                  int64_t cpu_milli = 0, int64_t mem_mib = 0, int64_t price_micros_per_hour = 0) {
    api::RegisterRequest req;
    req.name = name;
    req.address = "10.0.0." + std::to_string(name.back() - 'a' + 1);
    req.spec.gpu_model = "H100";
    req.spec.gpus = gpus;
    req.spec.cpu_milli = cpu_milli;
    req.spec.mem_mib = mem_mib;
    req.spec.price_micros_per_hour = price_micros_per_hour;
    for (int g = 0; g < gpus; ++g) {
      req.gpus.push_back({g, "GPU-" + name + "-" + std::to_string(g), "NVIDIA H100 80GB HBM3", 81559});
    }
    req.running = std::move(running);
    auto f = e.Register(req, "hash-" + name);
    e.Step();
    auto r = f.get();
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r->node : NodeId();
  }

  // Team `team`'s hard budget of `hard_micros`, counting from now.
  void SetHardBudget(Engine& e, const std::string& team, int64_t hard_micros) {
    sched::TeamBudget b;
    b.since = clock_.Now();
    b.hard_micros = hard_micros;
    auto f = e.SetBudget(team, b);
    e.Step();
    EXPECT_TRUE(f.get().ok());
  }
  // What team `team` has spent as TeamCosts says; -1 when it is not listed.
  static int64_t SpentOf(Engine& e, const std::string& team) {
    for (const auto& c : e.TeamCosts()) {
      if (c.team == team) return c.spend.spent_micros;
    }
    return -1;
  }

  // A heartbeat as an agent sends it: its events numbered and stamped now (unless a test gave
  // one its own time: an event from before the beat).
  api::HeartbeatReply BeatWith(Engine& e, NodeId node, api::Heartbeat hb) {
    for (auto& ev : hb.events) {
      ev.seq = ++seq_;
      if (ev.at == Time()) ev.at = clock_.Now();
    }
    auto f = e.Heartbeat(node, hb);
    e.Step();
    auto r = f.get();
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : api::HeartbeatReply{};
  }
  api::HeartbeatReply Beat(Engine& e, NodeId node, std::vector<api::PartEvent> events = {},
                           std::vector<api::PartKey> running = {}) {
    api::Heartbeat hb;
    hb.events = std::move(events);
    hb.running = std::move(running);
    return BeatWith(e, node, std::move(hb));
  }

  static api::PartEvent Started(JobId j, int attempt, int part) {
    api::PartEvent e;
    e.key = {j, attempt, part};
    e.kind = api::PartEventKind::kStarted;
    return e;
  }
  static api::PartEvent Exited(JobId j, int attempt, int part, int code, bool stopped = false) {
    api::PartEvent e;
    e.key = {j, attempt, part};
    e.kind = api::PartEventKind::kExited;
    e.exit_code = code;
    e.stopped = stopped;
    return e;
  }

  // A part its node could not start because the node cannot keep its files (a full disk).
  static api::PartEvent NodeFaultExit(JobId j, int attempt, int part, const std::string& fault) {
    api::PartEvent e = Exited(j, attempt, part, 127);
    e.node_fault = true;
    e.message = fault;
    return e;
  }
  static constexpr const char* kFullDisk =
      "the node's data directory /d cannot be written (write): No space left on device";

  std::vector<api::Command> Commands(Engine& e, NodeId node) {
    auto batch = e.PollCommands(node, acked_[node.value()], Duration::Zero());
    if (!batch.commands.empty()) acked_[node.value()] = batch.commands.back().seq;
    return batch.commands;
  }

  api::JobState StateOf(JobId id) {
    auto r = store_.GetJob(id);
    EXPECT_TRUE(r.ok() && *r);
    return (r.ok() && *r) ? (*r)->state : api::JobState::kPending;
  }

  std::vector<api::JobState> StatesOf(JobId id) {
    std::vector<api::JobState> out;
    auto h = store_.History(id);
    EXPECT_TRUE(h.ok());
    for (const auto& t : *h) out.push_back(t.to);
    return out;
  }

  testing::FakeClock clock_;
  testing::MemoryStore store_;
  int rid_ = 0;
  int64_t seq_ = 0;
  std::map<int64_t, int64_t> acked_;
};

}  // namespace gpufleet::controller
