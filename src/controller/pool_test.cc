#include "controller/pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "api/job_yaml.h"
#include "controller/rbac.h"
#include "testing/fake_provider.h"
#include "testing/fakes.h"
#include "testing/memory_store.h"

namespace gpufleet::controller {
namespace {

const char* kPoolYaml = R"(provider: {kind: static}
offers:
  - {name: h100, gpu: H100, gpus: 8, price_per_hour: 30, boot_estimate: 2m, zone: a}
idle_duration: 10m
reconcile_interval: 1h
)";

// An engine running on its own thread (the pool waits on its answers), a fake provider and a
// pool over them. Time is a fake clock the test moves.
class PoolTest : public ::testing::Test {
 protected:
  PoolTest() {
    EngineOptions o;
    o.policy = "fifo";
    o.lost_after = Duration::Hours(100);  // the test's jumps in time must not lose nodes
    o.epoch = "e1";
    engine_ = std::make_unique<Engine>(clock_, store_, o);
    EXPECT_TRUE(engine_->Recover().ok());
    runner_ = std::thread([this] { engine_->Run(); });
  }
  ~PoolTest() override {
    pool_.reset();
    engine_->Stop();
    runner_.join();
  }

  Pool& MakePool(const char* yaml = kPoolYaml) {
    auto config = ParsePoolConfig(yaml, "pool.yaml", model::GpuCatalog::BuiltIn());
    EXPECT_TRUE(config.ok()) << config.status().message();
    auto owned = std::make_unique<testing::FakeProvider>();
    provider_ = owned.get();
    pool_.reset();
    pool_ = std::make_unique<Pool>(*config, std::move(owned), *engine_, store_, clock_);
    return *pool_;
  }

  JobId Submit(const std::string& yaml) {
    auto jobs = api::ParseJobs(yaml);
    EXPECT_TRUE(jobs.ok()) << jobs.status().message();
    auto r = engine_->Submit("r" + std::to_string(++rid_), *jobs).get();
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r->ids[0] : JobId();
  }

  // Registers an 8 x H100 node as its agent would; the reply (its id, a burn-in request).
  api::RegisterReply RegisterNode(const std::string& name) {
    api::RegisterRequest req;
    req.name = name;
    req.address = "127.0.0.1";
    req.spec.gpu_model = "H100";
    req.spec.gpus = 8;
    auto r = engine_->Register(req, "hash-" + name).get();
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : api::RegisterReply{};
  }

  // Rents a node for an 8-GPU job (of `team`, when given) that is cancelled before the node
  // comes up, so the node registers idle; returns its name ("" if no node was rented).
  std::string RentForACancelledJob(Pool& pool, const std::string& team = "") {
    Submit("name: train\n" + (team.empty() ? std::string() : "team: " + team + "\n") +
           "run: sleep 100\nresources: {gpus: 8}\n");
    pool.Tick();
    if (provider_->created.size() != 1) {
      ADD_FAILURE() << "rented " << provider_->created.size() << " nodes, not one";
      return "";
    }
    auto queue = engine_->Queue();
    EXPECT_EQ(queue.size(), 1u);
    if (!queue.empty()) {
      EXPECT_TRUE(engine_->Cancel(queue[0].job.id, "test").get().ok());
    }
    const std::string name = provider_->created[0];
    RegisterNode(name);
    return name;
  }

  std::optional<api::NodeState> NodeStateOf(const std::string& name) {
    for (const NodeStatus& n : engine_->Nodes()) {
      if (n.record.name == name) return n.record.state;
    }
    return std::nullopt;
  }

  testing::FakeClock clock_;
  testing::MemoryStore store_;
  std::unique_ptr<Engine> engine_;
  std::thread runner_;
  std::unique_ptr<Pool> pool_;
  testing::FakeProvider* provider_ = nullptr;
  int rid_ = 0;
};

TEST_F(PoolTest, RentsForThePendingJobOnceAndReleasesTheNodeWhenIdle) {
  // Given an empty cluster and a pending 8-GPU job, the pool rents one H100 node for it (and not
  // again on the next tick); when the node registers the job runs; once cancelled, the node is
  // idle and is released after idle_duration: out of the engine, and its instance deleted.
  Pool& pool = MakePool();
  ASSERT_TRUE(pool.Start().ok());
  JobId job = Submit("name: train\nrun: sleep 100\nresources: {gpus: 8}\n");
  pool.Tick();
  ASSERT_EQ(provider_->created.size(), 1u);
  const std::string name = provider_->created[0];
  EXPECT_EQ(name, "gf-h100-0");
  pool.Tick();
  EXPECT_EQ(provider_->created.size(), 1u);  // covered by the booting node
  ASSERT_EQ(pool.Instances().size(), 1u);
  EXPECT_EQ(pool.Instances()[0].state, "booting");
  EXPECT_EQ(pool.Instances()[0].for_jobs, std::vector<JobId>{job});

  RegisterNode(name);
  EXPECT_EQ(pool.Instances()[0].state, "up");  // at once, not at the next tick
  pool.Tick();
  EXPECT_EQ(pool.Instances()[0].state, "up");
  ASSERT_TRUE(engine_->Cancel(job, "test").get().ok());
  pool.Tick();  // idle from now
  clock_.Advance(Duration::Minutes(9));
  pool.Tick();
  EXPECT_TRUE(provider_->deleted.empty());
  clock_.Advance(Duration::Minutes(1));
  // The cancel has to be confirmed by the node before it is idle: without an agent, the job
  // stays `stopping` on it, and the pool must keep the node.
  pool.Tick();
  EXPECT_TRUE(provider_->deleted.empty()) << "released a node that still holds a stopping job";
}

TEST_F(PoolTest, ARentedNodeIsBilledWholeToItsTeamAndItsHardBudgetEndsTheBill) {
  // Given team a with a $10 hard budget and a pending 1-GPU job, the pool rents an 8-GPU $30/h
  // node for it, billed whole to team a from the rent: after 10 minutes of boot a has spent $5,
  // all of it rented-idle. The budget is reached at 20 minutes; the release lead (30 s, the
  // engine's default) makes the team stop at 1170 s, when the booting node is released at once:
  // the bill ends at $9.75, within the budget, and nothing more is rented for the held job.
  // (The node never registers; a boot timeout of an hour keeps it booting meanwhile.)
  Pool& pool = MakePool(R"(provider: {kind: static}
offers:
  - {name: h100, gpu: H100, gpus: 8, price_per_hour: 30, boot_estimate: 2m, zone: a}
idle_duration: 10m
boot_timeout: 1h
reconcile_interval: 1h
)");
  ASSERT_TRUE(pool.Start().ok());
  sched::TeamBudget b;
  b.since = clock_.Now();
  b.hard_micros = 10'000'000;
  ASSERT_TRUE(engine_->SetBudget("a", b).get().ok());
  const Time t0 = clock_.Now();
  Submit("name: train\nteam: a\nrun: sleep 100\nresources: {gpus: 1}\n");
  pool.Tick();
  ASSERT_EQ(provider_->created.size(), 1u);
  ASSERT_EQ(pool.Instances().size(), 1u);
  EXPECT_EQ(pool.Instances()[0].team, "a");
  auto spend = [&] {
    (void)engine_->Cancel(JobId(999'999), "sync").get();  // the engine has applied the pool's requests
    for (const auto& c : engine_->TeamCosts()) {
      if (c.team == "a") return c.spend;
    }
    return sched::TeamSpend{};
  };
  clock_.Set(t0 + Duration::Minutes(10));
  pool.Tick();
  EXPECT_EQ(spend().spent_micros, 5'000'000);
  EXPECT_EQ(spend().rented_idle_micros, 5'000'000);
  EXPECT_EQ(spend().rate_micros, 30'000'000);
  clock_.Set(t0 + Duration::Seconds(1169));
  pool.Tick();
  EXPECT_TRUE(provider_->deleted.empty());
  EXPECT_FALSE(spend().hard_stop);
  clock_.Set(t0 + Duration::Seconds(1170));
  pool.Tick();
  EXPECT_EQ(provider_->deleted.size(), 1u);
  EXPECT_TRUE(pool.Instances().empty());
  sched::TeamSpend s = spend();
  EXPECT_TRUE(s.hard_stop);
  EXPECT_EQ(s.spent_micros, 9'750'000);
  EXPECT_EQ(s.rate_micros, 0);
  clock_.Set(t0 + Duration::Hours(1));
  pool.Tick();
  EXPECT_EQ(provider_->created.size(), 1u);  // the held job rents nothing
  EXPECT_EQ(spend().spent_micros, 9'750'000);
}

TEST_F(PoolTest, ReleasesAnIdleNodeAndDeletesItsInstance) {
  Pool& pool = MakePool();
  ASSERT_TRUE(pool.Start().ok());
  // The job is cancelled before the node shows up: the node registers idle.
  const std::string name = RentForACancelledJob(pool);
  ASSERT_FALSE(name.empty());
  const std::string id = provider_->instances.begin()->first;
  pool.Tick();
  clock_.Advance(Duration::Minutes(10));
  pool.Tick();
  EXPECT_EQ(provider_->deleted, std::vector<std::string>{id});
  EXPECT_TRUE(pool.Instances().empty());
  // Both decisions are in the audit log, as the autoscaler's.
  auto log = store_.ListAudit({});
  ASSERT_TRUE(log.ok());
  std::vector<std::string> verbs;
  for (const auto& a : *log) {
    if (a.subject == "autoscaler" && a.object.find(name) != std::string::npos) verbs.push_back(a.verb);
  }
  EXPECT_EQ(verbs, (std::vector<std::string>{"pool.rent", "pool.release"}));
  // ... verbs GET /v1/audit?verb= accepts.
  for (const std::string& v : verbs) {
    EXPECT_TRUE(std::count(AuditVerbNames().begin(), AuditVerbNames().end(), v)) << v;
  }
  EXPECT_EQ(NodeStateOf(name), api::NodeState::kGone);
}

TEST_F(PoolTest, ADrainedRentedNodeWithoutJobsIsReleasedAfterIdleDuration) {
  // Given a rented node that registered idle and that an admin drained, expect it kept for
  // idle_duration (it bills, but may get its work back) and then released and deleted, as an
  // idle up node is: a drained node is never idle capacity, so nothing else would give it back.
  Pool& pool = MakePool();
  ASSERT_TRUE(pool.Start().ok());
  const std::string name = RentForACancelledJob(pool);
  ASSERT_FALSE(name.empty());
  ASSERT_TRUE(engine_->Drain(name, true).get().ok());
  pool.Tick();
  clock_.Advance(Duration::Minutes(9));
  pool.Tick();
  EXPECT_TRUE(provider_->deleted.empty());
  EXPECT_EQ(NodeStateOf(name), api::NodeState::kDraining);
  clock_.Advance(Duration::Minutes(1));
  pool.Tick();  // taken out of the engine
  pool.Tick();  // and its instance deleted
  EXPECT_EQ(NodeStateOf(name), api::NodeState::kGone);
  EXPECT_EQ(provider_->deleted.size(), 1u);
  EXPECT_TRUE(pool.Instances().empty());
}

TEST_F(PoolTest, ARentedNodeWithoutRoomOnItsDiskIsNotCapacityAndIsReleasedOnceIdle) {
  // Given a rented node whose agent reports a full disk, expect the pool to rent another node for
  // a job that waits (the full one takes no work: it is not capacity), to show the full one as
  // no-room, and to give it back once it has been idle for idle_duration.
  Pool& pool = MakePool();
  ASSERT_TRUE(pool.Start().ok());
  const std::string name = RentForACancelledJob(pool);
  ASSERT_FALSE(name.empty());
  NodeId id;
  for (const NodeStatus& n : engine_->Nodes()) {
    if (n.record.name == name) id = n.record.id;
  }
  api::Heartbeat hb;
  hb.storage_fault = "the node's data directory /d cannot be written (write): No space left on device";
  ASSERT_TRUE(engine_->Heartbeat(id, hb).get().ok());
  Submit("name: next\nrun: sleep 100\nresources: {gpus: 8}\n");
  pool.Tick();
  EXPECT_EQ(provider_->created.size(), 2u) << "the node without room was counted as capacity";
  bool shown = false;
  for (const auto& i : pool.Instances()) shown = shown || (i.name == name && i.state == "no-room");
  EXPECT_TRUE(shown) << "the pool does not show the node as no-room";
  clock_.Advance(Duration::Minutes(9));
  ASSERT_TRUE(engine_->Heartbeat(id, hb).get().ok());
  pool.Tick();
  EXPECT_TRUE(provider_->deleted.empty());
  clock_.Advance(Duration::Minutes(1));
  ASSERT_TRUE(engine_->Heartbeat(id, hb).get().ok());
  pool.Tick();  // taken out of the engine
  pool.Tick();  // and its instance deleted
  EXPECT_EQ(NodeStateOf(name), api::NodeState::kGone);
  EXPECT_EQ(provider_->deleted.size(), 1u);
}

TEST_F(PoolTest, ANodeKeptForMinNodesIsBilledToNoTeamOnceIdlePastIdleDuration) {
  // Given min_nodes 1 and a node rented for team lam's job, then idle: for idle_duration lam pays
  // for it (it may get work again); after that the pool keeps it for its floor, and lam stops
  // paying (the instance is billed to no team).
  Pool& pool = MakePool(R"(provider: {kind: static}
offers:
  - {name: h100, gpu: H100, gpus: 8, price_per_hour: 30, boot_estimate: 2m, zone: a}
min_nodes: 1
idle_duration: 10m
reconcile_interval: 1h
)");
  ASSERT_TRUE(pool.Start().ok());
  const std::string name = RentForACancelledJob(pool, "lam");
  ASSERT_FALSE(name.empty());
  auto billed = [&] {
    (void)engine_->Cancel(JobId(999'999), "sync").get();  // the engine has applied the pool's requests
    auto charged = engine_->ScalingSnapshot().charged_to;
    return charged.count(name) ? charged[name] : std::string("nobody");
  };
  pool.Tick();
  ASSERT_EQ(pool.Instances().size(), 1u);
  EXPECT_EQ(pool.Instances()[0].team, "lam");
  EXPECT_EQ(billed(), "lam");
  clock_.Advance(Duration::Minutes(10));
  pool.Tick();
  EXPECT_TRUE(provider_->deleted.empty()) << "min_nodes keeps it";
  ASSERT_EQ(pool.Instances().size(), 1u);
  EXPECT_EQ(pool.Instances()[0].team, "");
  EXPECT_EQ(billed(), "nobody");
}

TEST_F(PoolTest, StartDeletesLeakedInstancesAndForgetsVanishedOnes) {
  // The record says gf-h100-3 exists; the provider has gf-h100-7 (ours by its prefix, not on
  // record: a create whose answer was lost) and other-1 (not ours). Start deletes the leak,
  // drops the vanished record and leaves other-1 alone.
  ASSERT_TRUE(store_
                  .SetMeta("pool.instances",
                           R"({"next_serial": 8, "instances": [{"name": "gf-h100-3", "provider_id": "f-99",
                               "offer": "h100", "state": "booting", "created_ms": 0, "for_jobs": []}]})")
                  .ok());
  Pool& pool = MakePool();
  provider_->AddForeign("f-7", "gf-h100-7");
  provider_->AddForeign("o-1", "other-1");
  ASSERT_TRUE(pool.Start().ok());
  EXPECT_EQ(provider_->deleted, std::vector<std::string>{"f-7"});
  EXPECT_TRUE(pool.Instances().empty());
  EXPECT_EQ(provider_->instances.count("o-1"), 1u);
  // Names are not reused after a restart.
  Submit("name: a\nrun: sleep 1\nresources: {gpus: 8}\n");
  pool.Tick();
  ASSERT_EQ(provider_->created.size(), 1u);
  EXPECT_EQ(provider_->created[0], "gf-h100-8");
}

TEST_F(PoolTest, ARestartedPoolAdoptsWhatItRented) {
  {
    Pool& pool = MakePool();
    ASSERT_TRUE(pool.Start().ok());
    Submit("name: a\nrun: sleep 1\nresources: {gpus: 8}\n");
    pool.Tick();
    ASSERT_EQ(pool.Instances().size(), 1u);
  }
  // A new pool on the same store and the same cloud: the instance is adopted, not deleted, and
  // the job it was rented for is still covered (no second rent).
  auto kept = provider_->instances;
  Pool& again = MakePool();
  provider_->instances = kept;
  ASSERT_TRUE(again.Start().ok());
  EXPECT_TRUE(provider_->deleted.empty());
  ASSERT_EQ(again.Instances().size(), 1u);
  again.Tick();
  EXPECT_TRUE(provider_->created.empty());
}

TEST_F(PoolTest, AnInstanceOfAnOfferRemovedFromThePoolFileStillBillsItsTeam) {
  // Given a node rented for team t from offer h100, then the pool started again with a file
  // where that offer is renamed, expect the instance adopted and still billed to t at the price
  // it was rented at (it was left unbilled while it ran).
  {
    Pool& pool = MakePool();
    ASSERT_TRUE(pool.Start().ok());
    Submit("name: a\nteam: t\nrun: sleep 1\nresources: {gpus: 8}\n");
    pool.Tick();
    ASSERT_EQ(pool.Instances().size(), 1u);
  }
  const std::string name = provider_->created[0];
  engine_->EndNodeCharge(name);  // as a restarted controller starts: nothing charged
  auto kept = provider_->instances;
  Pool& again = MakePool(R"(provider: {kind: static}
offers:
  - {name: h100x, gpu: H100, gpus: 8, price_per_hour: 30, boot_estimate: 2m, zone: a}
idle_duration: 10m
reconcile_interval: 1h
)");
  provider_->instances = kept;
  ASSERT_TRUE(again.Start().ok());
  ASSERT_EQ(again.Instances().size(), 1u);
  (void)engine_->Cancel(JobId(999'999), "sync").get();  // the engine has applied the pool's requests
  auto charged = engine_->ScalingSnapshot().charged_to;
  ASSERT_TRUE(charged.count(name));
  EXPECT_EQ(charged[name], "t");
}

TEST_F(PoolTest, AnInterruptedInstanceTakesItsNodeOutAtOnce) {
  Pool& pool = MakePool();
  ASSERT_TRUE(pool.Start().ok());
  Submit("name: a\nrun: sleep 1\nresources: {gpus: 8}\n");
  pool.Tick();
  const std::string name = provider_->created.at(0);
  const std::string id = provider_->instances.begin()->first;
  RegisterNode(name);
  auto running = engine_->Queue();
  ASSERT_EQ(running.size(), 1u);
  ASSERT_EQ(running[0].job.state, api::JobState::kStarting);  // placed on the rented node
  provider_->pending_events.push_back({provider::ProviderEventKind::kInterrupted, id, name, clock_.Now(), {}, ""});
  pool.Tick();
  EXPECT_EQ(NodeStateOf(name), api::NodeState::kGone);
  // The job that ran there is requeued (not left stopping on a dead node), and the pool rents
  // a new node for it.
  auto queue = engine_->Queue();
  ASSERT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue[0].job.state, api::JobState::kPending);
  pool.Tick();
  ASSERT_EQ(provider_->created.size(), 2u);
  EXPECT_NE(provider_->created[1], name);
}

TEST_F(PoolTest, AnInstanceThatDiesBeforeItsNodeComesUpIsAFailedRentAndItsOfferIsAvoided) {
  // Given two offers and a job, expect the cheap offer rented; when its instance dies before its
  // node registers (an agent that cannot start), expect the dear offer rented next, not the cheap
  // one again (it would die again, billed each time), and the cheap one tried again only after
  // failed_offer_backoff.
  Pool& pool = MakePool(R"(provider: {kind: static}
offers:
  - {name: cheap, gpu: H100, gpus: 8, price_per_hour: 20, boot_estimate: 2m}
  - {name: dear, gpu: H100, gpus: 8, price_per_hour: 30, boot_estimate: 2m}
idle_duration: 10m
reconcile_interval: 1h
failed_offer_backoff: 10m
)");
  ASSERT_TRUE(pool.Start().ok());
  Submit("name: a\nrun: sleep 1\nresources: {gpus: 8}\n");
  pool.Tick();
  ASSERT_EQ(provider_->created.size(), 1u);
  EXPECT_EQ(provider_->created[0].rfind("gf-cheap-", 0), 0u) << provider_->created[0];
  const std::string id = provider_->instances.begin()->first;
  provider_->pending_events.push_back(
      {provider::ProviderEventKind::kDied, id, provider_->created[0], clock_.Now(), {}, "agent exited 2"});
  pool.Tick();
  ASSERT_EQ(provider_->created.size(), 2u);
  EXPECT_EQ(provider_->created[1].rfind("gf-dear-", 0), 0u) << provider_->created[1];
  const std::string dear_id = [&] {
    for (const auto& [iid, inst] : provider_->instances) {
      if (iid != id) return iid;
    }
    return std::string();
  }();
  provider_->pending_events.push_back(
      {provider::ProviderEventKind::kDied, dear_id, provider_->created[1], clock_.Now(), {}, "agent exited 2"});
  pool.Tick();
  EXPECT_EQ(provider_->created.size(), 2u) << "both offers failed just now: nothing is rented";
  clock_.Advance(Duration::Minutes(11));
  pool.Tick();
  ASSERT_EQ(provider_->created.size(), 3u);
  EXPECT_EQ(provider_->created[2].rfind("gf-cheap-", 0), 0u) << provider_->created[2];
}

TEST_F(PoolTest, ExplainSaysAJobNoNodeFitsWaitsForThePoolNotThatItCanNeverRun) {
  // Given a pool and a job no node of the (empty) cluster fits, expect explain to say it can
  // run, waiting for the node the pool rents for it, not "can ever run: no ... no GPU nodes".
  Pool& pool = MakePool();
  engine_->SetNodeSizeHints({{"H100", 8}});  // as gpufleet server does from the pool's offers
  ASSERT_TRUE(pool.Start().ok());
  JobId j = Submit("name: a\nrun: sleep 1\nresources: {gpus: 8}\n");
  pool.Tick();
  auto e = engine_->Explain(j);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_TRUE(e->ever);
  EXPECT_NE(e->placement, sched::PlaceResult::Kind::kInfeasible);
  std::string all;
  for (const auto& r : e->reasons) all += r + "\n";
  EXPECT_NE(all.find("the pool rents one for it"), std::string::npos) << all;
  EXPECT_EQ(all.find("infeasible"), std::string::npos) << all;
}

TEST_F(PoolTest, AJobLargerThanANodeRentsItsWholeGangOnAnEmptyPool) {
  // With no node yet, a 16-GPU job is split to fit the pool's 8-GPU offer (2 x 8): the pool
  // rents both nodes at once and the gang starts when they register.
  engine_->SetNodeSizeHints({{"H100", 8}});
  Pool& pool = MakePool();
  ASSERT_TRUE(pool.Start().ok());
  JobId job = Submit("name: big\nrun: sleep 100\nresources: {gpus: 16}\n");
  pool.Tick();
  ASSERT_EQ(provider_->created.size(), 2u);
  for (const std::string& name : provider_->created) RegisterNode(name);
  auto queue = engine_->Queue();
  ASSERT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue[0].job.id, job);
  EXPECT_EQ(queue[0].job.state, api::JobState::kStarting);
  ASSERT_TRUE(queue[0].job.placement.has_value());
  EXPECT_EQ(queue[0].job.placement->parts.size(), 2u);
}

TEST_F(PoolTest, ANodeThatWasUpAndIsGoneHasItsInstanceDeletedAndTheJobRentsAgain) {
  // A rented node that registered, ran the job and then left the cluster (lost, or taken out)
  // is not "booting": its instance is deleted at once, its offer is not blamed, and the
  // requeued job gets a new node from the same offer.
  Pool& pool = MakePool();
  ASSERT_TRUE(pool.Start().ok());
  Submit("name: a\nrun: sleep 1\nresources: {gpus: 8}\n");
  pool.Tick();
  const std::string name = provider_->created.at(0);
  const std::string id = provider_->instances.begin()->first;
  RegisterNode(name);
  pool.Tick();
  ASSERT_TRUE(engine_->Release(name, /*only_if_idle=*/false, "test: the machine vanished").get().ok());
  pool.Tick();
  EXPECT_EQ(provider_->deleted, std::vector<std::string>{id});
  ASSERT_EQ(provider_->created.size(), 2u);  // the same offer, not avoided
  EXPECT_EQ(provider_->created[1], "gf-h100-1");
}

TEST_F(PoolTest, ARentedNodeThatFailsItsBurnInIsReleasedAndItsOfferAvoided) {
  // Given a pool with burn_in: true and two offers, a job rents the cheaper one; its node
  // registers and is asked to run the burn-in (it takes no work meanwhile: the pool counts it as
  // booting and rents nothing more); its report shows ECC errors, so the node is quarantined, the
  // pool releases it and deletes its instance, and rents the other offer for the job.
  Pool& pool = MakePool(R"(provider: {kind: static}
offers:
  - {name: cheap, gpu: H100, gpus: 8, price_per_hour: 20, boot_estimate: 2m, zone: a}
  - {name: dear, gpu: H100, gpus: 8, price_per_hour: 30, boot_estimate: 2m, zone: b}
idle_duration: 10m
reconcile_interval: 1h
burn_in: true
)");
  ASSERT_TRUE(pool.Start().ok());
  JobId job = Submit("name: train\nrun: sleep 100\nresources: {gpus: 8}\n");
  pool.Tick();
  ASSERT_EQ(provider_->created.size(), 1u);
  const std::string name = provider_->created[0];
  EXPECT_EQ(name, "gf-cheap-0");
  const api::RegisterReply reg = RegisterNode(name);
  EXPECT_TRUE(reg.run_burn_in) << "the pool asked for a burn-in of what it rents";
  pool.Tick();
  EXPECT_EQ(provider_->created.size(), 1u) << "a node being checked is capacity on its way";
  ASSERT_EQ(pool.Instances().size(), 1u);
  EXPECT_EQ(pool.Instances()[0].state, "checking");
  EXPECT_EQ(engine_->Queue().front().job.state, api::JobState::kPending) << "no work before the verdict";

  api::Heartbeat hb;
  model::BurnInReport report;
  report.path = "cuda";
  report.request = reg.burn_in_request;
  model::BurnInMeasurement m;
  m.name = "matmul_bf16";
  m.gpu = 0;
  m.value = 700;
  m.unit = "TFLOPS";
  report.tests = {m};
  model::GpuHealth h;
  h.index = 0;
  h.ecc_uncorrected = 4;
  report.health = {h};
  hb.burn_in = report;
  auto beat = engine_->Heartbeat(reg.node, hb).get();
  ASSERT_TRUE(beat.ok());
  EXPECT_TRUE(beat->burn_in_acked);
  bool quarantined = false;
  for (const NodeStatus& n : engine_->Nodes()) {
    if (n.record.name == name) {
      quarantined = n.record.acceptance == "quarantined";
      EXPECT_NE(n.record.acceptance_reason.find("GPU 0: 4 uncorrected ECC errors"), std::string::npos)
          << n.record.acceptance_reason;
    }
  }
  EXPECT_TRUE(quarantined);
  pool.Tick();
  EXPECT_EQ(NodeStateOf(name), api::NodeState::kGone) << "out of the cluster at once";
  pool.Tick();
  EXPECT_EQ(provider_->deleted.size(), 1u) << "the quarantined node's instance is given back";
  ASSERT_EQ(provider_->created.size(), 2u) << "the job rents again";
  EXPECT_EQ(provider_->created[1].rfind("gf-dear-", 0), 0u) << "not the offer that handed out a bad node: "
                                                            << provider_->created[1];
  (void)job;
}

TEST_F(PoolTest, BurnInSpeedOfRentedNodesScalesTheirOffers) {
  // Given an A100 offer at $10/h and an H100 one at $18/h (1.9x an A100 by the speed table: the
  // H100 finishes the work for less), and an H100 node already in the cluster (busy) whose
  // burn-in passed at 0.90x its datasheet matmul reference: the H100 is then worth 1.71 A100s,
  // $18/1.71 > $10, so the pool rents the A100 for a new 8-GPU job.
  EngineOptions o;
  o.policy = "fifo";
  o.lost_after = Duration::Hours(100);
  o.epoch = "e2";
  o.burn_in_required = true;
  pool_.reset();
  engine_->Stop();
  runner_.join();
  engine_ = std::make_unique<Engine>(clock_, store_, o);
  ASSERT_TRUE(engine_->Recover().ok());
  runner_ = std::thread([this] { engine_->Run(); });
  Pool& pool = MakePool(R"(provider: {kind: static}
offers:
  - {name: a100, gpu: A100, gpus: 8, price_per_hour: 10, boot_estimate: 2m, zone: a}
  - {name: h100, gpu: H100, gpus: 8, price_per_hour: 18, boot_estimate: 2m, zone: a}
idle_duration: 10m
reconcile_interval: 1h
)");
  ASSERT_TRUE(pool.Start().ok());
  const api::RegisterReply reg = RegisterNode("h100-owned");
  ASSERT_TRUE(reg.run_burn_in);
  api::Heartbeat hb;
  model::BurnInReport report;
  report.path = "cuda";
  report.request = reg.burn_in_request;
  for (int g = 0; g < 8; ++g) {
    model::BurnInMeasurement m;
    m.name = "matmul_bf16";
    m.gpu = g;
    m.unit = "TFLOPS";
    m.value = model::GpuCatalog::BuiltIn().Find("H100")->bf16_tflops * 0.60 * 0.90;
    report.tests.push_back(m);
  }
  hb.burn_in = report;
  ASSERT_TRUE(engine_->Heartbeat(reg.node, hb).get().ok());
  Submit("name: busy\nrun: sleep 100\nresources: {gpus: 8}\n");  // takes the owned H100
  pool.Tick();
  EXPECT_TRUE(provider_->created.empty()) << "the first job fits the owned node";
  Submit("name: next\nrun: sleep 100\nresources: {gpus: 8}\n");
  pool.Tick();
  ASSERT_EQ(provider_->created.size(), 1u);
  EXPECT_EQ(provider_->created[0].rfind("gf-a100-", 0), 0u) << provider_->created[0];
}

TEST_F(PoolTest, ABurnInRequestIsRepeatedUntilItsOwnReportArrives) {
  // Given a node checked again by an operator: every heartbeat reply asks for the burn-in (a lost
  // reply cannot leave the node checking for ever); a report that answers another request (an
  // old one, a check by hand) is acknowledged and dropped; the one that answers it decides.
  const NodeId id = RegisterNode("n1").node;
  ASSERT_TRUE(engine_->CheckNode("n1").get().ok());
  auto first = engine_->Heartbeat(id, api::Heartbeat{}).get();
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->run_burn_in);
  const int64_t request = first->burn_in_request;
  EXPECT_GT(request, 0);
  auto again = engine_->Heartbeat(id, api::Heartbeat{}).get();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->run_burn_in) << "asked again: the first reply may have been lost";
  EXPECT_EQ(again->burn_in_request, request);

  model::BurnInReport stale;
  stale.path = "cuda";
  stale.request = request - 1;
  model::BurnInMeasurement m;
  m.name = "matmul_bf16";
  m.gpu = 0;
  m.value = 700;
  m.unit = "TFLOPS";
  stale.tests = {m};
  api::Heartbeat hb;
  hb.burn_in = stale;
  auto dropped = engine_->Heartbeat(id, hb).get();
  ASSERT_TRUE(dropped.ok());
  EXPECT_TRUE(dropped->burn_in_acked);
  EXPECT_TRUE(dropped->run_burn_in) << "an old report does not answer the request";
  auto acceptance = [&] {
    for (const NodeStatus& n : engine_->Nodes()) return n.record.acceptance;
    return std::string();
  };
  EXPECT_EQ(acceptance(), "checking");

  hb.burn_in->request = request;
  auto answered = engine_->Heartbeat(id, hb).get();
  ASSERT_TRUE(answered.ok());
  EXPECT_FALSE(answered->run_burn_in);
  EXPECT_EQ(acceptance(), "passed");
}

TEST_F(PoolTest, AFailedCreateLeavesNothingBehind) {
  Pool& pool = MakePool();
  ASSERT_TRUE(pool.Start().ok());
  provider_->fail_creates = true;
  Submit("name: a\nrun: sleep 1\nresources: {gpus: 8}\n");
  pool.Tick();
  EXPECT_TRUE(pool.Instances().empty());
  auto saved = store_.GetMeta("pool.instances");
  ASSERT_TRUE(saved.ok() && saved->has_value());
  EXPECT_EQ(saved->value().find("gf-h100"), std::string::npos) << saved->value();
}

TEST(PoolConfigTest, ErrorsNameTheLineAndField) {
  const auto& catalog = model::GpuCatalog::BuiltIn();
  auto bad = [&](const std::string& yaml) {
    auto r = ParsePoolConfig(yaml, "pool.yaml", catalog);
    EXPECT_FALSE(r.ok()) << yaml;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(bad("provider: {kind: static}\nofers: []\n").find("pool.yaml:2:1: ofers: unknown key; did you mean 'offers'?"),
            std::string::npos);
  EXPECT_NE(bad("provider: {kind: local, state_dir: /tmp/x, agent_command: [a]}\n").find("offers: must be a non-empty list"),
            std::string::npos);
  EXPECT_NE(bad("provider: {kind: static}\noffers:\n  - {name: a, gpu: H999, gpus: 8, price_per_hour: 1}\n")
                .find("pool.yaml:3:20: offers[0].gpu: unknown GPU model 'H999'"),
            std::string::npos);
  EXPECT_NE(bad("provider: {kind: static}\nidle_duration: soon\n").find("idle_duration: must be a duration"),
            std::string::npos);
  EXPECT_NE(bad("offers: []\n").find("provider: is required"), std::string::npos);
  auto ok = ParsePoolConfig(
      "provider: {kind: static}\noffers:\n  - {name: s, gpu: A100, gpus: 8, market: spot, price_per_hour: 12.5, zone: b}\n"
      "max_nodes: 4\nidle_gpu_util_below: 10\n",
      "pool.yaml", catalog);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->offers[0].market, model::Market::kSpot);
  EXPECT_EQ(ok->offers[0].price_micros_per_hour, 12'500'000);
  EXPECT_EQ(ok->offer_labels[0].at("zone"), "b");
  EXPECT_EQ(ok->limits.max_nodes, 4);
  EXPECT_EQ(ok->idle_gpu_util_below, 10);
}

TEST(PoolConfigTest, ErrorsPointAtTheBadValueEvenInTheProviderSection) {
  // Given a bad value at the top level and one in the provider section (whose server placeholders
  // are filled in first), expect each error at its value's line and column.
  EXPECT_EQ(ParsePoolConfig("provider: {kind: static}\nmax_nodes: lots\n", "pool.yaml", model::GpuCatalog::BuiltIn())
                .status()
                .message(),
            "pool.yaml:2:12: max_nodes: must be an integer from 0 to 100000, got 'lots'");
  auto r = ParsePoolConfig(
      "provider:\n  kind: local\n  state_dir: '{data_dir}/pool'\n  agent_command: [a]\n  boot_delay: soon\n"
      "offers:\n  - {name: a, gpu: H100, gpus: 8, price_per_hour: 1}\n",
      "pool.yaml", model::GpuCatalog::BuiltIn(), {{"data_dir", "/var/lib/gpufleet"}});
  EXPECT_EQ(r.status().message(),
            "pool.yaml:5:15: provider.boot_delay: must be a duration such as 500ms, 30s or 2m, got 'soon'");
  r = ParsePoolConfig("provider:\n  kind: local\n  state_dir: /x\n  agent_command: [a]\n  notice_leed: 5s\n",
                      "pool.yaml", model::GpuCatalog::BuiltIn());
  EXPECT_EQ(r.status().message().rfind("pool.yaml:5:3: provider.notice_leed: unknown field", 0), 0u)
      << r.status().message();
}

TEST(PoolConfigTest, DeeplyNestedFileIsRefusedBeforeParsing) {
  // Given a pool file nesting 100,000 flow mappings, expect InvalidArgument naming the depth, not
  // a crash in the recursive YAML parser.
  auto r = ParsePoolConfig("provider: {kind: static}\noffers: " + std::string(100'000, '{') + "\n", "pool.yaml",
                           model::GpuCatalog::BuiltIn());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "pool.yaml:2:72: nesting deeper than 64 levels");
}

TEST(PoolConfigTest, AgentCommandPlaceholdersOfTheServerAreFilledIn) {
  auto r = ParsePoolConfig(
      "provider:\n  kind: local\n  state_dir: /tmp/gf-pool-test\n  agent_command: ['{gpufleet}', agent, --server, '{server}',"
      " --join-token-file, '{join_token_file}', --name, '{name}']\n"
      "offers:\n  - {name: a, gpu: H100, gpus: 8, price_per_hour: 1}\n",
      "pool.yaml", model::GpuCatalog::BuiltIn(),
      {{"gpufleet", "/usr/bin/gpufleet"}, {"server", "http://127.0.0.1:9"}, {"join_token_file", "/d/join.token"}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& argv = r->provider.local.agent_command;
  ASSERT_EQ(argv.size(), 8u);
  EXPECT_EQ(argv[0], "/usr/bin/gpufleet");
  EXPECT_EQ(argv[3], "http://127.0.0.1:9");
  EXPECT_EQ(argv[5], "/d/join.token");
  EXPECT_EQ(argv[7], "{name}");  // the provider's own placeholder, filled per instance
}

}  // namespace
}  // namespace gpufleet::controller

namespace gpufleet::controller {
namespace {

TEST(PoolConfigTest, ACatalogSpotOfferSkipsOutlierPricesWhenAnotherRowMatches) {
  // Given two 8 x H100 spot rows in one region, the cheaper one 90 % off on-demand (an outlier in
  // the catalog's rule), expect the pool to take the other: an outlier price often has no
  // capacity behind it. Alone, the outlier is still taken (with a warning in the log).
  const auto& gpus = model::GpuCatalog::BuiltIn();
  const std::string header =
      "cloud,region,zone,instance_type,accelerator,gpu_count,gpu_mem_mib,vcpus,ram_gib,ondemand_usd_h,host_usd_h,"
      "spot_usd_h,spot_kind,aws_interruption_bucket\n";
  auto table = cost::ParseOffersCsv(header +
                                        "gcp,r1,r1-a,odd-8g,H100,8,,208,1872,100,,10,quoted,\n"
                                        "gcp,r1,r1-b,usual-8g,H100,8,,208,1872,100,,40,quoted,\n",
                                    "t.csv", gpus);
  ASSERT_TRUE(table.ok()) << table.status().message();
  ASSERT_TRUE(table->offers[0].has(cost::kSpotOutlier));
  const std::string yaml =
      "provider: {kind: static}\n"
      "offers:\n"
      "  - catalog: {cloud: gcp, region: r1, gpu: H100, gpus: 8, market: spot}\n";
  auto r = ParsePoolConfig(yaml, "pool.yaml", gpus, {}, &*table);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->offers[0].price_micros_per_hour, 40'000'000);
  EXPECT_EQ(r->offer_labels[0].at("instance_type"), "usual-8g");
  table->offers.erase(table->offers.begin() + 1);
  auto alone = ParsePoolConfig(yaml, "pool.yaml", gpus, {}, &*table);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_EQ(alone->offers[0].price_micros_per_hour, 10'000'000);
}

TEST(PoolConfigTest, OffersFromTheShippedCatalog) {
  // The cheapest matching row of the shipped catalog gives GPU, count, CPUs, memory, price and,
  // for spot, the interruption rate; an offer that matches nothing says how to list what exists.
  const auto& gpus = model::GpuCatalog::BuiltIn();
  auto table = cost::LoadOffersCsv(std::string(GPUFLEET_SOURCE_DIR) + "/data/catalog/offers.csv", gpus);
  ASSERT_TRUE(table.ok()) << table.status().message();
  auto r = ParsePoolConfig(
      "provider: {kind: static}\n"
      "offers:\n"
      "  - catalog: {cloud: aws, region: us-east-1, instance_type: p4d.24xlarge, market: spot}\n"
      "    boot_estimate: 5m\n"
      "  - catalog: {cloud: aws, region: us-east-1, gpu: V100, gpus: 8}\n"
      "    name: v100-od\n",
      "pool.yaml", gpus, {}, &*table);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->offers.size(), 2u);
  const sched::RentableOffer& a = r->offers[0];
  EXPECT_EQ(a.name, "aws-p4d-24xlarge-spot");
  EXPECT_EQ(a.gpu_model, "A100");
  EXPECT_EQ(a.gpus_per_node, 8);
  EXPECT_EQ(a.market, model::Market::kSpot);
  EXPECT_EQ(a.price_micros_per_hour, 7'246'022);  // the catalog's us-east-1 spot estimate
  EXPECT_GT(a.interruptions_per_hour, 0);
  EXPECT_EQ(a.boot_estimate, Duration::Minutes(5));
  EXPECT_EQ(a.cpu_milli, 96'000);          // p4d.24xlarge: 96 vCPUs, 1,152 GiB, so the autoscaler
  EXPECT_EQ(a.mem_mib, 1152 * 1024);       // never rents it for a job asking more
  EXPECT_EQ(r->offer_labels[0].at("instance_type"), "p4d.24xlarge");
  const sched::RentableOffer& b = r->offers[1];
  EXPECT_EQ(b.name, "v100-od");
  EXPECT_EQ(b.market, model::Market::kOnDemand);
  EXPECT_EQ(b.price_micros_per_hour, 24'480'000);  // p3.16xlarge, the cheapest 8 x V100 there
  EXPECT_EQ(b.interruptions_per_hour, 0);

  auto none = ParsePoolConfig(
      "provider: {kind: static}\noffers:\n  - catalog: {cloud: aws, region: mars-1, instance_type: p4d.24xlarge}\n",
      "pool.yaml", gpus, {}, &*table);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("pool.yaml:3:14: offers[0].catalog: no catalog offer matches aws mars-1 "
                                         "p4d.24xlarge; list them with: gpufleet offers --cloud aws"),
            std::string::npos)
      << none.status().message();
  auto both = ParsePoolConfig(
      "provider: {kind: static}\noffers:\n  - catalog: {cloud: aws, region: us-east-1, instance_type: p4d.24xlarge}\n"
      "    price_per_hour: 3\n",
      "pool.yaml", gpus, {}, &*table);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("offers[0].price_per_hour: comes from the catalog"), std::string::npos);
  auto no_table = ParsePoolConfig(
      "provider: {kind: static}\noffers:\n  - catalog: {cloud: aws, region: us-east-1, instance_type: p4d.24xlarge}\n",
      "pool.yaml", gpus);
  EXPECT_FALSE(no_table.ok());
}

TEST(PoolConfigTest, OfferSpeedsComeFromTheMeasuredTableElseTheDatasheet) {
  // Given offers on A100, H100 and T4, expect speeds relative to the first offer's A100: the
  // H100's measured MLPerf default ratio 1.899 (data/gpu_speeds.csv), not the datasheet's; the
  // T4, which the table lacks, the datasheet's balanced ratio.
  const auto& gpus = model::GpuCatalog::BuiltIn();
  auto r = ParsePoolConfig(
      "provider: {kind: static}\noffers:\n"
      "  - {name: a, gpu: A100, gpus: 8, price_per_hour: 16}\n"
      "  - {name: h, gpu: H100, gpus: 8, price_per_hour: 24}\n"
      "  - {name: t, gpu: T4, gpus: 4, price_per_hour: 2}\n",
      "pool.yaml", gpus);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->offers.size(), 3u);
  EXPECT_DOUBLE_EQ(r->offers[0].speed, 1.0);
  EXPECT_NEAR(r->offers[1].speed, 1.899, 1e-9);
  EXPECT_DOUBLE_EQ(r->offers[2].speed, gpus.RelativeSpeed("A100", "T4", model::Boundness::kBalanced));
}

}  // namespace
}  // namespace gpufleet::controller
