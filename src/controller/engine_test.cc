#include "controller/engine.h"
#include "controller/engine_fixture_test.h"

#include <gtest/gtest.h>

#include "api/job_yaml.h"
#include "testing/fakes.h"
#include "testing/memory_store.h"

namespace gpufleet::controller {
namespace {

using api::JobState;

using EngineTest = EngineFixture;

TEST_F(EngineTest, AControllerThatStalledDoesNotTakeItsNodesForLost) {
  // Given a node running a job and a controller that did not run for 5 minutes (Run measures it
  // and credits the stall) while the job exited with 0, expect the node kept up and the job
  // running after the stall, and the exit reported then to end it (no rerun). A node heard
  // during the stall keeps that instant (the credit never moves a heartbeat back), and a node
  // silent for lost_after while the controller runs is still lost.
  auto e = MakeEngine();
  const NodeId holder = Register(*e, "node-a", 1);
  const NodeId other = Register(*e, "node-b", 0);  // (no GPU: the job runs on node-a)
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: sleep 3\n");
  Commands(*e, holder);
  Beat(*e, holder, {Started(j, 1, 0)});
  ASSERT_EQ(StateOf(j), JobState::kRunning);
  clock_.Advance(Duration::Minutes(5));
  e->CreditStall(Duration::Minutes(5));  // as Run does when it wakes
  Beat(*e, other);                       // heard in the first step after the stall
  const Time heard = clock_.Now();
  e->Step();
  EXPECT_EQ(StateOf(j), JobState::kRunning) << "the node was taken for lost for the controller's own stall";
  for (const NodeStatus& n : e->Nodes()) {
    if (n.record.id == other) {
      EXPECT_EQ(n.last_seen, heard) << "a heartbeat moved by the credit";
    }
  }
  Beat(*e, holder, {Exited(j, 1, 0, 0)});
  EXPECT_EQ(StateOf(j), JobState::kSucceeded);
  // Silence while the controller runs: lost after lost_after, as before.
  clock_.Advance(Duration::Seconds(31));
  e->Step();
  int lost = 0;
  for (const NodeStatus& n : e->Nodes()) lost += n.record.state == api::NodeState::kLost ? 1 : 0;
  EXPECT_EQ(lost, 2);
}

TEST_F(EngineTest, JobRunsThroughItsLifecycle) {
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 8);
  JobId j = Submit(*e, "name: train\nresources: {gpus: 4}\nrun: python3 train.py\nenv: {LR: '0.1'}\n");
  EXPECT_EQ(StateOf(j), JobState::kStarting);
  auto cmds = Commands(*e, a);
  ASSERT_EQ(cmds.size(), 1u);
  ASSERT_TRUE(cmds[0].start);
  const auto& s = *cmds[0].start;
  EXPECT_EQ(s.key.attempt, 1);
  EXPECT_EQ(s.gpus.size(), 4u);
  EXPECT_EQ(s.argv, (std::vector<std::string>{"/bin/sh", "-c", "python3 train.py"}));
  EXPECT_EQ(s.env.at("LR"), "0.1");
  EXPECT_EQ(s.env.at("GPUFLEET_JOB_ID"), std::to_string(j.value()));
  EXPECT_EQ(s.env.at("GPUFLEET_CHECKPOINT_DIR"), "/ckpt/job-" + std::to_string(j.value()));
  EXPECT_EQ(s.env.at("GPUFLEET_RESTART_COUNT"), "0");
  EXPECT_EQ(s.env.at("CUDA_VISIBLE_DEVICES"), "0,1,2,3");
  EXPECT_EQ(s.env.at("WORLD_SIZE"), "1");
  EXPECT_EQ(s.env.at("NNODES"), "1");
  EXPECT_EQ(s.env.at("NPROC_PER_NODE"), "4");
  EXPECT_EQ(s.env.at("MASTER_ADDR"), "10.0.0.1");

  Beat(*e, a, {Started(j, 1, 0)}, {{j, 1, 0}});
  EXPECT_EQ(StateOf(j), JobState::kRunning);
  Beat(*e, a, {Exited(j, 1, 0, 0)});
  EXPECT_EQ(StateOf(j), JobState::kSucceeded);
  EXPECT_EQ(StatesOf(j), (std::vector<JobState>{JobState::kPending, JobState::kStarting, JobState::kRunning,
                                                JobState::kSucceeded}));
  // Its exit code is recorded with it, as a failed job's is.
  auto rec = store_.GetJob(j);
  ASSERT_TRUE(rec.ok() && *rec);
  EXPECT_EQ((*rec)->exit_code, std::optional<int>(0));
  // The GPUs are free again: a new 8-GPU job starts.
  JobId k = Submit(*e, "resources: {gpus: 8}\nrun: x\n");
  EXPECT_EQ(StateOf(k), JobState::kStarting);
}

TEST_F(EngineTest, RegistrationNamesTheCheckpointRoot) {
  // Expect the controller's checkpoint root in the registration reply: agents make jobs'
  // checkpoint folders there for the jobs' users (docs/api.md, POST /v1/agents/register).
  auto e = MakeEngine();
  api::RegisterRequest req;
  req.name = "node-a";
  req.address = "10.0.0.1";
  req.spec.gpu_model = "H100";
  req.spec.gpus = 1;
  req.gpus.push_back({0, "GPU-node-a-0", "NVIDIA H100 80GB HBM3", 81559});
  auto f = e->Register(req, "hash-node-a");
  e->Step();
  auto r = f.get();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->checkpoint_root, "/ckpt");
}

TEST_F(EngineTest, ANodeNameTheNodeRoutesCannotCarryIsRefusedAtRegistration) {
  // Given names with a '/', a '?' or a space (which /v1/nodes/NAME/drain could never name),
  // expect each registration refused with the characters allowed, and no node made; a host
  // name with dots, digits, '-' and '_' registers.
  auto e = MakeEngine();
  for (const std::string& name : std::vector<std::string>{"dev-2/undrain", "gpu?x", "gpu node", std::string(254, 'a')}) {
    api::RegisterRequest req;
    req.name = name;
    req.address = "10.0.0.1";
    auto f = e->Register(req, "hash-" + name);
    e->Step();
    auto r = f.get();
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_NE(r.status().message().find("letters, digits, '.', '_' or '-'"), std::string::npos) << r.status().message();
  }
  EXPECT_TRUE(e->Nodes().empty());
  Register(*e, "gpu-07.rack_3.example.com", 1);
  ASSERT_EQ(e->Nodes().size(), 1u);
  EXPECT_EQ(e->Nodes()[0].record.name, "gpu-07.rack_3.example.com");
}

TEST_F(EngineTest, AFailedCommitHoldsTheStepsCommandsUntilTheStoreTakesIt) {
  // Given a running job, a waiting one, and a store that fails every write of the next step,
  // expect a cancel of the running job to be answered 503, no stop command to reach the agent and
  // the disk to still say running; at the next step the held transition commits and only then
  // does the stop command go out.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 8);
  JobId running = Submit(*e, "resources: {gpus: 8}\nrun: x\n");
  ASSERT_EQ(Commands(*e, a).size(), 1u);
  Beat(*e, a, {Started(running, 1, 0)}, {{running, 1, 0}});
  ASSERT_EQ(StateOf(running), JobState::kRunning);
  store_.FailNextWrites(4, Status::Unavailable("disk full"));
  auto cancel = e->Cancel(running, "test");
  e->Step();
  Status st = cancel.get();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_TRUE(Commands(*e, a).empty()) << "a stop went out that the disk does not record";
  EXPECT_EQ(StateOf(running), JobState::kRunning);
  e->Step();
  EXPECT_EQ(StateOf(running), JobState::kStopping);
  auto cmds = Commands(*e, a);
  ASSERT_EQ(cmds.size(), 1u);
  EXPECT_TRUE(cmds[0].stop.has_value());
}

TEST_F(EngineTest, ACancelADamagedStoreRefusesIsNotToldToRetry) {
  // Given a running job and a store whose writes fail as a damaged file does (Internal), expect a
  // cancel answered Internal without "retry"; an unreachable store (Unavailable) says retry.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 2);
  JobId one = Submit(*e, "resources: {gpus: 1}\nrun: x\n");
  JobId two = Submit(*e, "resources: {gpus: 1}\nrun: x\n");
  Beat(*e, a, {Started(one, 1, 0), Started(two, 1, 0)}, {{one, 1, 0}, {two, 1, 0}});
  store_.FailNextWrites(4, Status::Internal("database disk image is malformed"));
  auto c1 = e->Cancel(one, "test");
  e->Step();
  Status st = c1.get();
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st.ToString();
  EXPECT_EQ(st.message().find("retry"), std::string::npos) << st.message();
  e->Step();  // the held transition goes in
  store_.FailNextWrites(4, Status::Unavailable("connection refused"));
  auto c2 = e->Cancel(two, "test");
  e->Step();
  st = c2.get();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("retry"), std::string::npos) << st.message();
}

TEST_F(EngineTest, AnExitWhoseCommitFailedIsNotAcknowledgedAndANewControllerRecordsItOnce) {
  // Given a running job whose exit (code 0) arrives while the store fails every write, expect the
  // heartbeat not to acknowledge it; a second controller on the same store (a standby taking over
  // from one that stopped without storing it) hears the part named at registration and the exit
  // again: the job succeeds once, not lost and requeued.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: x\n");
  ASSERT_EQ(Commands(*e, a).size(), 1u);
  Beat(*e, a, {Started(j, 1, 0)}, {{j, 1, 0}});
  ASSERT_EQ(StateOf(j), JobState::kRunning);
  store_.FailNextWrites(4, Status::Unavailable("connection refused"));
  api::HeartbeatReply reply = Beat(*e, a, {Exited(j, 1, 0, 0)});
  EXPECT_EQ(reply.acked, 0) << "an exit the store did not take was acknowledged";
  EXPECT_EQ(StateOf(j), JobState::kRunning) << "the disk says running";
  e.reset();  // the controller stops with the transition held
  auto next = MakeEngine();
  api::RegisterRequest req;
  req.name = "node-a";
  req.address = "10.0.0.1";
  req.spec.gpu_model = "H100";
  req.spec.gpus = 1;
  req.gpus.push_back({0, "GPU-node-a-0", "NVIDIA H100 80GB HBM3", 81559});
  req.running = {{j, 1, 0}};  // what an agent names: the part whose exit was not acknowledged
  auto rf = next->Register(req, "hash-node-a");
  next->Step();
  ASSERT_TRUE(rf.get().ok());
  api::HeartbeatReply again = Beat(*next, a, {Exited(j, 1, 0, 0)});
  EXPECT_GT(again.acked, 0);
  EXPECT_EQ(StateOf(j), JobState::kSucceeded);
  auto rec = store_.GetJob(j);
  ASSERT_TRUE(rec.ok() && *rec);
  EXPECT_EQ((*rec)->attempt, 1) << "the job ran again";
}

TEST_F(EngineTest, ACheckpointReportSentAgainIsAppliedOnce) {
  // Given a running job's checkpoint report (agent sequence 7) at 100 s, sent again at 700 s (the
  // agent resends what a reply left unacknowledged), expect the job's checkpoint kept at 100 s.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: x\n");
  Beat(*e, a, {Started(j, 1, 0)}, {{j, 1, 0}});
  const Time t0 = clock_.Now();
  clock_.Advance(Duration::Seconds(100));
  api::Heartbeat hb;
  api::PartEvent ck;
  ck.key = {j, 1, 0};
  ck.kind = api::PartEventKind::kCheckpointed;
  ck.seq = 7;
  ck.at = clock_.Now();
  hb.events = {ck};
  hb.running = {{j, 1, 0}};
  auto f = e->Heartbeat(a, hb);
  e->Step();
  ASSERT_TRUE(f.get().ok());
  auto checkpoint = [&]() -> std::optional<Time> {
    auto m = store_.ListJobMemory();
    EXPECT_TRUE(m.ok());
    for (const auto& r : *m) {
      if (r.job == j) return r.memory.last_checkpoint;
    }
    return std::nullopt;
  };
  ASSERT_EQ(checkpoint(), t0 + Duration::Seconds(100));
  clock_.Advance(Duration::Seconds(600));
  auto again = e->Heartbeat(a, hb);
  e->Step();
  ASSERT_TRUE(again.get().ok());
  EXPECT_EQ(checkpoint(), t0 + Duration::Seconds(100));
}

TEST_F(EngineTest, SubmitIsIdempotentPerRequestId) {
  auto e = MakeEngine();
  JobId j1 = Submit(*e, "run: x\n", "req-1");
  auto f = e->Submit("req-1", {Job("run: x\n")});
  e->Step();
  auto again = f.get();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->ids[0], j1);
  auto all = store_.ListJobs({});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1u);
}

TEST_F(EngineTest, ARetryOfATakenSubmitGetsItsJobsWhenTheTeamIsAtItsPendingLimit) {
  // Given a team at its pending-job limit of 1 (its job taken as req-1), expect a retry of req-1
  // answered with that job (created false), a new request refused (ResourceExhausted), and no
  // job added.
  auto e = MakeEngine();
  sched::TeamQuota limit;
  limit.max_pending_jobs = 1;
  auto q = e->SetQuota("default", limit);
  e->Step();
  ASSERT_TRUE(q.get().ok());
  JobId first = Submit(*e, "run: x\n", "req-1");
  auto retry = e->Submit("req-1", {Job("run: x\n")});
  auto fresh = e->Submit("req-2", {Job("run: x\n")});
  e->Step();
  auto r = retry.get();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->created);
  ASSERT_EQ(r->ids.size(), 1u);
  EXPECT_EQ(r->ids[0], first);
  auto f = fresh.get();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kResourceExhausted) << f.status().message();
  auto all = store_.ListJobs({});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1u);
}

TEST_F(EngineTest, ARetryOfATakenSubmitGetsItsJobsWhenNoNodeCouldRunItNow) {
  // Given an A100 job taken before any node joined (a cluster without nodes takes any job), and
  // then an H100 node as the only one, expect a retry of its request answered with the job,
  // and the same job under a new request id refused as one that can never run.
  auto e = MakeEngine();
  JobId big = Submit(*e, "resources: {gpus: 1, gpu_type: A100}\nrun: x\n", "big-1");
  Register(*e, "node-a", 8);
  auto again = e->Submit("big-1", {Job("resources: {gpus: 1, gpu_type: A100}\nrun: x\n")});
  auto other = e->Submit("big-2", {Job("resources: {gpus: 1, gpu_type: A100}\nrun: x\n")});
  e->Step();
  auto a = again.get();
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_FALSE(a->created);
  EXPECT_EQ(a->ids.at(0), big);
  auto o = other.get();
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << o.status().message();
}

TEST_F(EngineTest, ACommandPollFromAnotherEpochAcknowledgesNothing) {
  // Given a start command (seq 1) for a node, expect a poll whose `after` counts in another
  // controller's epoch (sent before this controller restarted) to get it, however large that
  // `after`, and the command to stay until a poll of this epoch acknowledges it.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  Submit(*e, "resources: {gpus: 1}\nrun: x\n");
  auto stale = e->PollCommands(a, 57, Duration::Zero(), "an-older-epoch");
  EXPECT_EQ(stale.epoch, e->epoch());
  ASSERT_EQ(stale.commands.size(), 1u);
  const int64_t seq = stale.commands[0].seq;
  EXPECT_LE(seq, 57);
  EXPECT_EQ(e->PollCommands(a, 0, Duration::Zero(), e->epoch()).commands.size(), 1u) << "still there";
  EXPECT_TRUE(e->PollCommands(a, seq, Duration::Zero(), e->epoch()).commands.empty()) << "acknowledged in this epoch";
}

TEST_F(EngineTest, AJobCancelledJustBeforeARestartEndsAndFreesItsGpus) {
  // Given a 2-GPU job cancelled while running (stopping: its grace) when the controller
  // restarts, expect it to end cancelled when its part exits, the core not to requeue and
  // start it again (it held the GPUs of a finished job: "scheduler started unknown job"), and
  // the next job to get the GPUs.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 2);
  JobId j = Submit(*e, "resources: {gpus: 2}\nrun: x\ncheckpoint: {grace: 20s}\n");
  Commands(*e, a);
  Beat(*e, a, {Started(j, 1, 0)});
  ASSERT_EQ(StateOf(j), JobState::kRunning);
  auto cf = e->Cancel(j, "test");
  e->Step();
  ASSERT_TRUE(cf.get().ok());
  ASSERT_EQ(StateOf(j), JobState::kStopping);
  e.reset();
  auto again = MakeEngine();
  NodeId back = Register(*again, "node-a", 2, {{j, 1, 0}});
  Commands(*again, back);
  Beat(*again, back, {Exited(j, 1, 0, 143, true)});
  EXPECT_EQ(StateOf(j), JobState::kCancelled);
  JobId next = Submit(*again, "resources: {gpus: 2}\nrun: y\n");
  again->Step();
  EXPECT_EQ(StateOf(next), JobState::kStarting) << "the cancelled job's GPUs are free";
  for (const auto& q : again->Queue()) EXPECT_NE(q.job.id, j) << "the cancelled job is back in the queue";
}

TEST_F(EngineTest, APartOfARequeuedJobThatItsAgentStillReportsIsKilledAcrossARestart) {
  // Given a job requeued because its node was lost (the agent was only paused), expect the agent
  // that comes back reporting the old part to be told to kill it, the job to stay pending, and
  // the same after a controller restart (the recovered pending job has no parts: the report
  // crashed the controller at every start).
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: sleep 600\n");
  Commands(*e, a);
  Beat(*e, a, {Started(j, 1, 0)});
  ASSERT_EQ(StateOf(j), JobState::kRunning);
  clock_.Advance(Duration::Minutes(10));  // past lost_after without heartbeats
  e->Step();
  ASSERT_EQ(StateOf(j), JobState::kPending);
  auto d = e->Drain("node-a", true);  // so that the job is not placed there again when it is back
  e->Step();
  ASSERT_TRUE(d.get().ok());
  auto killed = [&](Engine& eng, NodeId node) {
    for (const api::Command& c : Commands(eng, node)) {
      if (c.stop && c.stop->key == api::PartKey{j, 1, 0}) return true;
    }
    return false;
  };
  NodeId back = Register(*e, "node-a", 1, {{j, 1, 0}});
  EXPECT_TRUE(killed(*e, back)) << "the requeued job's old part was left running";
  e.reset();
  auto again = MakeEngine();
  acked_.clear();  // a new controller numbers its commands afresh
  ASSERT_EQ(StateOf(j), JobState::kPending);
  NodeId after = Register(*again, "node-a", 1, {{j, 1, 0}});
  EXPECT_TRUE(killed(*again, after)) << "after a restart, the old part was left running";
  Beat(*again, after, {}, {{j, 1, 0}});  // still reported by heartbeats: a stray, killed again
  EXPECT_TRUE(killed(*again, after));
  EXPECT_EQ(StateOf(j), JobState::kPending);
}

TEST_F(EngineTest, AStartTheNodeHadRunBeforeIsRequeuedAsANewAttemptNotLeftStarting) {
  // Given a controller whose state is older than its node's (restored from a backup taken before
  // the job ran), expect the node's answer that it ran this part before to requeue the job (not to
  // fail it, and not to leave it starting for ever), and the job's next attempt to start there.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  // (restart.on_preemption false: nothing was preempted, so it is requeued all the same.)
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: x\nrestart: {on_preemption: false}\n");
  auto first = Commands(*e, a);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(first[0].start);
  EXPECT_EQ(first[0].start->key.attempt, 1);
  api::PartEvent ran = Exited(j, 1, 0, -1);
  ran.already_ran = true;
  ran.message = "node node-a ran part job-1.a1.p0 before and does not start it again";
  Beat(*e, a, {ran});
  e->Step();
  EXPECT_EQ(StateOf(j), JobState::kStarting);
  auto again = Commands(*e, a);
  bool restarted = false;
  for (const api::Command& c : again) restarted = restarted || (c.start && c.start->key.attempt == 2);
  EXPECT_TRUE(restarted) << "the job was not started again as attempt 2";
  auto history = store_.History(j);
  ASSERT_TRUE(history.ok());
  bool said = false;
  for (const auto& t : *history) said = said || t.reason.find("does not start it again") != std::string::npos;
  EXPECT_TRUE(said) << "the history does not say why the job was requeued";
}

TEST_F(EngineTest, APartANodeCouldNotStartForLackOfRoomRequeuesItsJobAndHoldsTheNodeUntilItHasRoom) {
  // Given node-a whose agent could not start a part because its data directory is full, expect
  // the job requeued (not failed: restart.on_failure is 0) and started on node-b, node-a listed
  // with the reason and given no work (explain names it) until its heartbeats say it can write
  // again; then it takes work again by itself. A controller that restarts learns the fault from
  // the agent's registration.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: x\n");
  ASSERT_EQ(Commands(*e, a).size(), 1u) << "the job was not sent to node-a";
  const std::string fault = kFullDisk;
  api::PartEvent full = NodeFaultExit(j, 1, 0, fault);
  api::Heartbeat hb;
  hb.events = {full};
  hb.storage_fault = fault;
  BeatWith(*e, a, hb);
  e->Step();
  EXPECT_EQ(StateOf(j), JobState::kPending);
  auto history = store_.History(j);
  ASSERT_TRUE(history.ok());
  bool said = false;
  for (const auto& t : *history) said = said || t.reason == "node node-a could not start it: " + fault;
  EXPECT_TRUE(said) << "the history does not say why the job was requeued";
  auto nodes = e->Nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].storage_fault, fault);
  auto ex = e->Explain(j);
  ASSERT_TRUE(ex.ok());
  bool named = false;
  for (const auto& r : ex->reasons) named = named || r.find("node node-a takes no new work: " + fault) != std::string::npos;
  EXPECT_TRUE(named) << "explain does not say why node-a takes no work";
  // Another node takes it meanwhile; node-a gets nothing while its agent says it is full.
  JobId k = Submit(*e, "resources: {gpus: 1}\nrun: y\n");
  BeatWith(*e, a, hb);
  e->Step();
  EXPECT_TRUE(Commands(*e, a).empty()) << "a node without room was given work";
  NodeId b = Register(*e, "node-b", 1);
  e->Step();
  auto on_b = Commands(*e, b);
  ASSERT_EQ(on_b.size(), 1u);
  ASSERT_TRUE(on_b[0].start);
  EXPECT_EQ(on_b[0].start->key, (api::PartKey{j, 2, 0})) << "the requeued job is its second attempt, first in line";
  // A restarted controller holds node-a from its registration.
  e.reset();
  auto again = MakeEngine();
  acked_.clear();
  api::RegisterRequest req;
  req.name = "node-a";
  req.spec.gpu_model = "H100";
  req.spec.gpus = 1;
  req.gpus.push_back({0, "GPU-node-a-0", "NVIDIA H100 80GB HBM3", 81559});
  req.storage_fault = fault;
  auto f = again->Register(req, "hash-node-a");
  again->Step();
  ASSERT_TRUE(f.get().ok());
  again->Step();
  EXPECT_TRUE(Commands(*again, a).empty()) << "after a restart, a node without room was given work";
  // Room again: the next heartbeat says so, and node-a takes the waiting job.
  Beat(*again, a);
  again->Step();
  auto now = Commands(*again, a);
  ASSERT_EQ(now.size(), 1u);
  ASSERT_TRUE(now[0].start);
  EXPECT_EQ(now[0].start->key.job, k);
  EXPECT_TRUE(again->Nodes()[0].storage_fault.empty());
}

TEST_F(EngineTest, ANodeWhoseAgentRegistersAgainWithoutItsStorageFaultTakesWorkAgain) {
  // Given node-a held for a full disk (a part it could not start) on a live controller, and its
  // agent restarted once room was made (its registration carries no fault), expect node-a to
  // take the waiting job; the try counted against none of the job's restarts.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: x\nrestart: {max_restarts_on_errors: 0}\n");
  ASSERT_EQ(Commands(*e, a).size(), 1u);
  api::PartEvent full = NodeFaultExit(j, 1, 0, kFullDisk);
  api::Heartbeat hb;
  hb.events = {full};
  hb.storage_fault = full.message;
  BeatWith(*e, a, hb);
  e->Step();
  ASSERT_EQ(StateOf(j), JobState::kPending);
  EXPECT_TRUE(Commands(*e, a).empty());
  NodeId back = Register(*e, "node-a", 1);
  e->Step();
  auto now = Commands(*e, back);
  ASSERT_EQ(now.size(), 1u) << "the node registered again with room but got no work";
  ASSERT_TRUE(now[0].start);
  EXPECT_EQ(now[0].start->key, (api::PartKey{j, 2, 0}));
  auto rec = store_.GetJob(j);
  ASSERT_TRUE(rec.ok() && *rec);
  EXPECT_EQ((*rec)->error_restarts, 0);
}

TEST_F(EngineTest, ExplainOfANodeBothDrainedAndWithoutRoomDoesNotPromiseAnUndrainPutsItBack) {
  // Given node-a drained and reporting a full disk, expect explain to say an undrain puts it back
  // only once its disk has room again (an undrain alone gives it no work).
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  auto d = e->Drain("node-a", true);
  e->Step();
  ASSERT_TRUE(d.get().ok());
  api::Heartbeat hb;
  hb.storage_fault = kFullDisk;
  BeatWith(*e, a, hb);
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: x\n");
  auto ex = e->Explain(j);
  ASSERT_TRUE(ex.ok());
  bool said = false;
  for (const auto& r : ex->reasons) said = said || r.find("'gpufleet undrain node-a' puts it back once its disk has room again") != std::string::npos;
  EXPECT_TRUE(said) << ::testing::PrintToString(ex->reasons);
}

TEST_F(EngineTest, AGangPartItsNodeCouldNotStartIsNotTheFailureOfAPartThatFailedFirst) {
  // Given a 2-node gang whose part 1 fails with a recoverable code while part 0 comes back as one
  // its node could not start (full disk), expect the job requeued by the recoverable code (not
  // failed with 127 by the node's fault), and no restart counted.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  NodeId b = Register(*e, "node-b", 1);
  JobId j = Submit(*e, "resources: {gpus: 1, nodes: 2}\nrun: x\n"
                       "restart: {max_restarts_on_errors: 0, recover_on_exit_codes: [3]}\n");
  Commands(*e, a);
  Commands(*e, b);
  auto rec = store_.GetJob(j);
  ASSERT_TRUE(rec.ok() && *rec && (*rec)->placement);
  // Part 0 (the first a failure is looked for in) is the one its node could not start; part 1
  // fails first with the recoverable code.
  const NodeId node_of_0 = (*rec)->placement->parts[0].node;
  const NodeId node_of_1 = (*rec)->placement->parts[1].node;
  Beat(*e, node_of_1, {Started(j, 1, 1), Exited(j, 1, 1, 3)});
  Beat(*e, node_of_0, {NodeFaultExit(j, 1, 0, kFullDisk)});
  e->Step();
  rec = store_.GetJob(j);
  ASSERT_TRUE(rec.ok() && *rec);
  EXPECT_NE((*rec)->state, JobState::kFailed) << (*rec)->reason;
  EXPECT_EQ((*rec)->error_restarts, 0);
  auto history = store_.History(j);
  ASSERT_TRUE(history.ok());
  bool by_code = false;
  for (const auto& t : *history) by_code = by_code || t.reason.find("exited with code 3") != std::string::npos;
  EXPECT_TRUE(by_code) << "the requeue does not name the part that failed";
  for (const auto& t : *history) EXPECT_EQ(t.reason.find("code 127"), std::string::npos) << t.reason;
}

TEST_F(EngineTest, ASucceededJobKeepsWhatItsAgentSaidAboutItsLogInItsReason) {
  // Given a job whose part exits 0 with the agent's note that its log could not all be uploaded,
  // expect it succeeded with the note in its reason (the output lost is not silent).
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: x\n");
  Beat(*e, a, {Started(j, 1, 0)});
  api::PartEvent done = Exited(j, 1, 0, 0);
  done.message = "its log is incomplete: the last 4096 bytes could not be uploaded";
  Beat(*e, a, {done});
  e->Step();
  EXPECT_EQ(StateOf(j), JobState::kSucceeded);
  auto history = store_.History(j);
  ASSERT_TRUE(history.ok());
  ASSERT_FALSE(history->empty());
  EXPECT_EQ(history->back().reason, "exited with code 0 (its log is incomplete: the last 4096 bytes could not be uploaded)");
}

TEST_F(EngineTest, ADrainOutlivesANodeLossAndALostNodeCanBeDrainedOrUndrained) {
  // Given node-a drained for maintenance and then lost (rebooted), expect it back drained when its
  // agent registers; given node-b lost and then drained, expect it back drained too; undrained
  // while lost, back up.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  NodeId b = Register(*e, "node-b", 1);
  auto d = e->Drain("node-a", true);
  e->Step();
  ASSERT_TRUE(d.get().ok());
  clock_.Advance(Duration::Minutes(10));  // past lost_after without heartbeats
  e->Step();
  auto state = [&](NodeId id) {
    for (const auto& n : e->Nodes()) {
      if (n.record.id == id) return n.record.state;
    }
    return api::NodeState::kGone;
  };
  ASSERT_EQ(state(a), api::NodeState::kLost);
  ASSERT_EQ(state(b), api::NodeState::kLost);
  auto db = e->Drain("node-b", true);
  e->Step();
  ASSERT_TRUE(db.get().ok()) << "a lost node can be drained";
  Register(*e, "node-a", 1);
  Register(*e, "node-b", 1);
  EXPECT_EQ(state(a), api::NodeState::kDraining);
  EXPECT_EQ(state(b), api::NodeState::kDraining);
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: x\n");
  EXPECT_EQ(StateOf(j), JobState::kPending) << "no work on drained nodes";
  clock_.Advance(Duration::Minutes(10));
  e->Step();
  auto ub = e->Drain("node-b", false);
  e->Step();
  ASSERT_TRUE(ub.get().ok());
  Register(*e, "node-b", 1);
  EXPECT_EQ(state(b), api::NodeState::kUp);
  e->Step();
  EXPECT_EQ(StateOf(j), JobState::kStarting);
}

TEST_F(EngineTest, ACancelOfAJobAlreadyStoppingSurvivesARestart) {
  // Given a job stopping because its spot node is being reclaimed, then cancelled by its user,
  // expect the cancel stored with it: after a controller restart its exit ends it cancelled, and
  // it is not requeued.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: x\ncheckpoint: {grace: 30s}\n");
  Commands(*e, a);
  Beat(*e, a, {Started(j, 1, 0)}, {{j, 1, 0}});
  api::Heartbeat hb;
  hb.running = {{j, 1, 0}};
  hb.notice = api::SpotNotice{"terminate", clock_.Now() + Duration::Seconds(120)};
  auto f = e->Heartbeat(a, hb);
  e->Step();
  ASSERT_TRUE(f.get().ok());
  ASSERT_EQ(StateOf(j), JobState::kStopping);
  auto cf = e->Cancel(j, "alice");
  e->Step();
  ASSERT_TRUE(cf.get().ok());
  EXPECT_EQ((*store_.GetJob(j))->stop_intent, "cancelled");
  e.reset();
  auto again = MakeEngine();
  NodeId back = Register(*again, "node-a", 1, {{j, 1, 0}});
  Commands(*again, back);
  Beat(*again, back, {Exited(j, 1, 0, 0, true)});
  EXPECT_EQ(StateOf(j), JobState::kCancelled);
  for (const auto& q : again->Queue()) EXPECT_NE(q.job.id, j) << "the cancelled job was requeued";
}

TEST_F(EngineTest, APreemptionInItsGraceIsStillStoppingAfterARestart) {
  // Given a low job preempted for an urgent one and still in its 30 s grace when the controller
  // restarts, expect the new scheduler to hold it as stopping (not running: it would be a victim
  // again, and its GPUs counted as held), and its exit to requeue it and start the urgent job.
  // Meanwhile the queue's row for the urgent job says it waits for that victim (not "submitted").
  auto e = MakeEngine("priority");
  NodeId a = Register(*e, "node-a", 1);
  JobId low = Submit(*e, "resources: {gpus: 1}\nrun: x\ncheckpoint: {grace: 30s}\n");
  Commands(*e, a);
  Beat(*e, a, {Started(low, 1, 0)}, {{low, 1, 0}});
  JobId urgent = Submit(*e, "priority: 10\nresources: {gpus: 1}\nrun: y\n");
  ASSERT_EQ(StateOf(low), JobState::kStopping);
  std::string reason;
  for (const auto& q : e->Queue()) {
    if (q.job.id == urgent) reason = q.job.reason;
  }
  EXPECT_EQ(reason, "preempting 1 job(s) to make room");
  e.reset();
  auto again = MakeEngine("priority");
  NodeId back = Register(*again, "node-a", 1, {{low, 1, 0}});
  Commands(*again, back);
  auto ex = again->Explain(low);
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ex->phase, sched::JobPhase::kStopping) << ::testing::PrintToString(ex->reasons);
  Beat(*again, back, {Exited(low, 1, 0, 0, true)});
  EXPECT_EQ(StateOf(low), JobState::kPending);
  EXPECT_EQ(StateOf(urgent), JobState::kStarting);
}

TEST_F(EngineTest, GangGetsRanksAndOneMasterAndFailsTogether) {
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 2);
  NodeId b = Register(*e, "node-b", 2);
  JobId j = Submit(*e, "resources: {gpus: 2, nodes: 2}\nrun: x\n");
  auto ca = Commands(*e, a);
  auto cb = Commands(*e, b);
  ASSERT_EQ(ca.size(), 1u);
  ASSERT_EQ(cb.size(), 1u);
  const auto& s0 = ca[0].start->key.part == 0 ? *ca[0].start : *cb[0].start;
  const auto& s1 = ca[0].start->key.part == 0 ? *cb[0].start : *ca[0].start;
  NodeId n0 = ca[0].start->key.part == 0 ? a : b;
  NodeId n1 = n0 == a ? b : a;
  EXPECT_EQ(s0.env.at("NODE_RANK"), "0");
  EXPECT_EQ(s1.env.at("NODE_RANK"), "1");
  EXPECT_EQ(s0.env.at("WORLD_SIZE"), "2");
  EXPECT_EQ(s1.env.at("RANK"), "1");
  EXPECT_EQ(s0.env.at("MASTER_PORT"), s1.env.at("MASTER_PORT"));
  int port = std::stoi(s0.env.at("MASTER_PORT"));
  EXPECT_GE(port, 29500);
  EXPECT_LT(port, 30500);
  EXPECT_EQ(s0.env.at("MASTER_ADDR"), s1.env.at("MASTER_ADDR"));
  Beat(*e, n0, {Started(j, 1, 0)});
  EXPECT_EQ(StateOf(j), JobState::kStarting);  // not every part has started
  Beat(*e, n1, {Started(j, 1, 1)});
  EXPECT_EQ(StateOf(j), JobState::kRunning);
  // Part 1 fails: part 0 is stopped, then the job fails (no restarts allowed).
  Beat(*e, n1, {Exited(j, 1, 1, 3)});
  EXPECT_EQ(StateOf(j), JobState::kStopping);
  auto stop = Commands(*e, n0);
  ASSERT_EQ(stop.size(), 1u);
  ASSERT_TRUE(stop[0].stop);
  EXPECT_EQ(stop[0].stop->key.part, 0);
  Beat(*e, n0, {Exited(j, 1, 0, 143, true)});
  auto rec = store_.GetJob(j);
  ASSERT_TRUE(rec.ok() && *rec);
  EXPECT_EQ((*rec)->state, JobState::kFailed);
  EXPECT_EQ((*rec)->exit_code, 3);
  EXPECT_NE((*rec)->reason.find("part 1 exited with code 3"), std::string::npos) << (*rec)->reason;
}

TEST_F(EngineTest, FailedJobRestartsWithinItsBudget) {
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId j = Submit(*e, "run: x\nrestart: {max_restarts_on_errors: 1, recover_on_exit_codes: [75]}\n");
  Beat(*e, a, {Started(j, 1, 0), Exited(j, 1, 0, 75)});  // recoverable: not counted
  EXPECT_EQ(StateOf(j), JobState::kStarting);
  Beat(*e, a, {Started(j, 2, 0), Exited(j, 2, 0, 1)});  // restart 1 of 1
  EXPECT_EQ(StateOf(j), JobState::kStarting);
  Beat(*e, a, {Started(j, 3, 0), Exited(j, 3, 0, 1)});  // out of restarts
  auto rec = store_.GetJob(j);
  EXPECT_EQ((*rec)->state, JobState::kFailed);
  EXPECT_EQ((*rec)->attempt, 3);
  EXPECT_EQ((*rec)->error_restarts, 1);
}

TEST_F(EngineTest, ARecoverExitCodeWithinAMinuteOfEveryStartIsACrashLoopAndCountsFromTheTenth) {
  // Given a job that exits 75 (a recover code) at once, again and again, expect nine requeues
  // in a row that are not counted, then the tenth counted against max_restarts_on_errors (1),
  // and the eleventh to fail the job saying why; an exit 75 after a minute of work breaks the row.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId j = Submit(*e, "run: x\nrestart: {max_restarts_on_errors: 1, recover_on_exit_codes: [75]}\n");
  // Five quick ones, then one after some work: the row starts again.
  int attempt = 1;
  for (; attempt <= 5; ++attempt) Beat(*e, a, {Started(j, attempt, 0), Exited(j, attempt, 0, 75)});
  Beat(*e, a, {Started(j, attempt, 0)});
  clock_.Advance(Duration::Minutes(2));
  Beat(*e, a, {Exited(j, attempt, 0, 75)});  // after some work: requeued, not counted
  ++attempt;
  for (int quick = 1; quick <= 9; ++quick, ++attempt) {
    Beat(*e, a, {Started(j, attempt, 0), Exited(j, attempt, 0, 75)});
    ASSERT_EQ(StateOf(j), JobState::kStarting) << "attempt " << attempt;
    EXPECT_EQ((*store_.GetJob(j))->error_restarts, 0) << "attempt " << attempt;
  }
  Beat(*e, a, {Started(j, attempt, 0), Exited(j, attempt, 0, 75)});  // the tenth quick one in a row
  EXPECT_EQ(StateOf(j), JobState::kStarting);
  EXPECT_EQ((*store_.GetJob(j))->error_restarts, 1);
  ++attempt;
  Beat(*e, a, {Started(j, attempt, 0), Exited(j, attempt, 0, 75)});
  auto rec = store_.GetJob(j);
  EXPECT_EQ((*rec)->state, JobState::kFailed);
  EXPECT_NE((*rec)->reason.find("exit code 75 came within a minute of its start 11 times in a row: counted as a failure"),
            std::string::npos)
      << (*rec)->reason;
}

TEST_F(EngineTest, LostNodeRequeuesTheWholeGang) {
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 2);
  NodeId b = Register(*e, "node-b", 2);
  JobId j = Submit(*e, "resources: {gpus: 2, nodes: 2}\nrun: x\n");
  Commands(*e, a);
  Commands(*e, b);
  auto rec = store_.GetJob(j);
  int part_on_a = (*rec)->placement->parts[0].node == a ? 0 : 1;
  // A start reported from the wrong node is a stray: it is not counted and gets killed.
  Beat(*e, a, {Started(j, 1, part_on_a), Started(j, 1, 1 - part_on_a)});
  auto stray = Commands(*e, a);
  ASSERT_EQ(stray.size(), 1u);
  ASSERT_TRUE(stray[0].stop);
  EXPECT_EQ(stray[0].stop->key.part, 1 - part_on_a);
  // Killed outright: a checkpoint signal would let it write into the job's checkpoint directory.
  EXPECT_EQ(stray[0].stop->signal, SIGKILL);
  EXPECT_EQ(stray[0].stop->grace, Duration::Zero());
  EXPECT_EQ(StateOf(j), JobState::kStarting);
  Beat(*e, b, {Started(j, 1, 1 - part_on_a)});
  EXPECT_EQ(StateOf(j), JobState::kRunning);
  // b goes silent; a keeps beating.
  clock_.Advance(Duration::Seconds(20));
  Beat(*e, a);
  clock_.Advance(Duration::Seconds(15));
  Beat(*e, a);
  EXPECT_EQ(StateOf(j), JobState::kStopping);
  auto stop = Commands(*e, a);
  ASSERT_EQ(stop.size(), 1u);
  ASSERT_TRUE(stop[0].stop);
  Beat(*e, a, {Exited(j, 1, part_on_a, 143, true)});
  EXPECT_EQ(StateOf(j), JobState::kPending);  // requeued; one node is not enough for the gang
  auto nodes = e->Nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1].record.state, api::NodeState::kLost);
  // b's agent comes back: a heartbeat is told to re-register; the re-registration brings it back
  // and the gang starts again as attempt 2.
  EXPECT_TRUE(Beat(*e, b).reregister);
  Register(*e, "node-b", 2);
  EXPECT_EQ(StateOf(j), JobState::kStarting);
  EXPECT_EQ((*store_.GetJob(j))->attempt, 2);
}

TEST_F(EngineTest, PartThatFailsWhenItsPeerVanishesDoesNotFailTheJob) {
  // A gang's collectives break as soon as one machine is gone: the surviving part exits with an
  // error before the lost node is noticed. The node loss decides: the job is requeued.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  NodeId b = Register(*e, "node-b", 1);
  JobId j = Submit(*e, "resources: {gpus: 1, nodes: 2}\nrun: x\n");
  auto rec = store_.GetJob(j);
  int part_on_a = (*rec)->placement->parts[0].node == a ? 0 : 1;
  Beat(*e, a, {Started(j, 1, part_on_a)});
  Beat(*e, b, {Started(j, 1, 1 - part_on_a)});
  clock_.Advance(Duration::Seconds(20));
  Beat(*e, a, {Exited(j, 1, part_on_a, 3)});  // its peer on b vanished
  EXPECT_EQ(StateOf(j), JobState::kStopping);
  clock_.Advance(Duration::Seconds(15));
  Beat(*e, a);  // b is now lost
  EXPECT_EQ(StateOf(j), JobState::kPending);
  auto last = store_.GetJob(j);
  EXPECT_NE((*last)->reason.find("requeued"), std::string::npos) << (*last)->reason;
  auto h = store_.History(j);
  bool named = false;
  for (const auto& t : *h) named = named || t.reason.find("node node-b was lost") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST_F(EngineTest, HardBudgetStopsTheTeamsJobsAndRecordsTheirCost) {
  // An 8-GPU node at $8/h; team a has $2: its 8-GPU job (stop grace 30 s, the default) is
  // stopped with its checkpoint signal at 870 s, its grace early, so that when it exits as its
  // grace runs out (900 s) the team has spent exactly $2. It waits; its record holds what it
  // cost; the budget survives a restart.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 8, {}, 0, 0, 8'000'000);
  SetHardBudget(*e, "a", 2'000'000);
  JobId j = Submit(*e, "team: a\nresources: {gpus: 8}\nrun: x\n");
  Commands(*e, a);
  Beat(*e, a, {Started(j, 1, 0)});
  // The node keeps beating; the job runs until $2 less 30 s of its cost is spent (870 s).
  for (int i = 0; i < 43; ++i) {
    clock_.Advance(Duration::Seconds(20));
    Beat(*e, a);
  }
  EXPECT_EQ(StateOf(j), JobState::kRunning);  // 860 s
  clock_.Advance(Duration::Seconds(10));      // 870 s
  Beat(*e, a);
  EXPECT_EQ(StateOf(j), JobState::kStopping);
  auto hist = store_.History(j);
  EXPECT_NE(hist->back().reason.find("hard budget"), std::string::npos) << hist->back().reason;
  auto cmds = Commands(*e, a);
  ASSERT_EQ(cmds.size(), 1u);
  ASSERT_TRUE(cmds[0].stop);
  clock_.Advance(Duration::Seconds(30));  // it uses its whole grace
  Beat(*e, a, {Exited(j, 1, 0, 0, true)});
  EXPECT_EQ(StateOf(j), JobState::kPending);
  auto rec = store_.GetJob(j);
  EXPECT_EQ((*rec)->cost_micros, 2'000'000);
  auto costs = e->TeamCosts();
  ASSERT_EQ(costs.size(), 1u);
  EXPECT_EQ(costs[0].spend.spent_micros, 2'000'000);
  EXPECT_TRUE(costs[0].spend.over_hard);
  e.reset();
  auto again = MakeEngine();
  auto after = again->TeamCosts();
  ASSERT_EQ(after.size(), 1u);
  ASSERT_TRUE(after[0].budget.has_value());
  EXPECT_EQ(after[0].budget->hard_micros, 2'000'000);
  // What was spent survives too: the team stays over its budget and the job keeps its cost.
  EXPECT_EQ(after[0].spend.spent_micros, 2'000'000);
  EXPECT_TRUE(after[0].spend.over_hard);
  EXPECT_EQ(again->LiveJobCosts().at(j.value()), 2'000'000);
}

TEST_F(EngineTest, CancelStopsWithTheCheckpointSignal) {
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId j = Submit(*e, "run: x\ncheckpoint: {signal: SIGUSR1, grace: 7s}\n");
  Commands(*e, a);
  Beat(*e, a, {Started(j, 1, 0)});
  auto f = e->Cancel(j, "alice");
  e->Step();
  ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(StateOf(j), JobState::kStopping);
  auto cmds = Commands(*e, a);
  ASSERT_EQ(cmds.size(), 1u);
  ASSERT_TRUE(cmds[0].stop);
  EXPECT_EQ(cmds[0].stop->signal, SIGUSR1);
  EXPECT_EQ(cmds[0].stop->grace, Duration::Seconds(7));
  Beat(*e, a, {Exited(j, 1, 0, 0, true)});
  EXPECT_EQ(StateOf(j), JobState::kCancelled);
  // Cancelling again: a clear error, nothing changes.
  auto g = e->Cancel(j, "alice");
  e->Step();
  Status st = g.get();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("already cancelled"), std::string::npos);
  auto h = e->Cancel(JobId(999), "");
  e->Step();
  EXPECT_EQ(h.get().code(), StatusCode::kNotFound);
}

TEST_F(EngineTest, CancelManyChecksEveryJobFirstThenCancelsThemInOneStep) {
  // Given a running job, two waiting ones, one that ended and one of team vision: expect a
  // request that names a missing job, or the vision job for a caller of team nlp, to change
  // nothing and list them; then the others cancelled together: the waiting ones at once, the
  // running one stopping, the ended one listed as it was, and one audit record naming them all.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId running = Submit(*e, "team: nlp\nrun: x\n");
  JobId waiting1 = Submit(*e, "team: nlp\nrun: x\n");
  JobId waiting2 = Submit(*e, "team: nlp\nrun: x\n");
  JobId theirs = Submit(*e, "team: vision\nrun: x\n");
  Commands(*e, a);
  Beat(*e, a, {Started(running, 1, 0)});
  ASSERT_EQ(StateOf(running), JobState::kRunning);
  ASSERT_EQ(StateOf(waiting1), JobState::kPending);
  auto c = e->Cancel(waiting2, "alice");
  e->Step();
  ASSERT_TRUE(c.get().ok());
  ASSERT_EQ(StateOf(waiting2), JobState::kCancelled);
  const auto audit_before = store_.ListAudit({});
  ASSERT_TRUE(audit_before.ok());
  auto nlp_only = [](const std::string& team) { return team == "nlp"; };

  auto missing = e->CancelMany({waiting1, JobId(999), running}, "alice", nlp_only);
  e->Step();
  auto m = missing.get();
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->missing, std::vector<JobId>{JobId(999)});
  EXPECT_TRUE(m->cancelled.empty() && m->stopping.empty() && m->ended.empty());
  auto forbidden = e->CancelMany({theirs, waiting1}, "alice", nlp_only);
  e->Step();
  auto f = forbidden.get();
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->forbidden.size(), 1u);
  EXPECT_EQ(f->forbidden[0], std::make_pair(theirs, std::string("vision")));
  EXPECT_EQ(StateOf(waiting1), JobState::kPending) << "a refused request changed a job";
  EXPECT_EQ(StateOf(running), JobState::kRunning);
  EXPECT_EQ(store_.ListAudit({})->size(), audit_before->size());

  // Named twice and out of order: each once, ascending.
  api::AuditRecord record;
  record.verb = "job.cancel";
  record.outcome = "allowed";
  auto many = e->CancelMany({waiting2, running, waiting1, running}, "alice", nlp_only, record);
  e->Step();
  auto r = many.get();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->refused());
  EXPECT_EQ(r->cancelled, std::vector<JobId>{waiting1});
  EXPECT_EQ(r->stopping, std::vector<JobId>{running});
  ASSERT_EQ(r->ended.size(), 1u);
  EXPECT_EQ(r->ended[0], std::make_pair(waiting2, JobState::kCancelled));
  EXPECT_EQ(StateOf(waiting1), JobState::kCancelled);
  EXPECT_EQ(StateOf(running), JobState::kStopping);
  EXPECT_EQ(StateOf(theirs), JobState::kPending);
  auto audit = store_.ListAudit({});
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), audit_before->size() + 1);
  std::vector<int64_t> changed{running.value(), waiting1.value()};
  std::sort(changed.begin(), changed.end());
  EXPECT_EQ(audit->back().object, api::JobsAuditObject(changed));
  // The running one ends cancelled once it has stopped.
  Beat(*e, a, {Exited(running, 1, 0, 0, true)});
  EXPECT_EQ(StateOf(running), JobState::kCancelled);
  // Without a team check (an admin), another team's job is cancelled too (it was starting on
  // the GPU the cancelled job gave back).
  ASSERT_EQ(StateOf(theirs), JobState::kStarting);
  auto admin = e->CancelMany({theirs}, "root", nullptr);
  e->Step();
  auto ad = admin.get();
  ASSERT_TRUE(ad.ok());
  EXPECT_EQ(ad->stopping, std::vector<JobId>{theirs});
  EXPECT_EQ(StateOf(theirs), JobState::kStopping);
}

TEST_F(EngineTest, SpotNoticeStopsJobsWithTheirCheckpointSignalAndRequeuesThem) {
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 4);
  JobId j = Submit(*e, "resources: {gpus: 4}\nrun: x\ncheckpoint: {signal: SIGUSR1, grace: 7s}\n");
  ASSERT_EQ(Commands(*e, a).size(), 1u);
  Beat(*e, a, {Started(j, 1, 0)}, {{j, 1, 0}});
  ASSERT_EQ(StateOf(j), JobState::kRunning);
  NodeId b = Register(*e, "node-b", 4);

  // The agent on node-a hears the provider will terminate it in two minutes.
  api::Heartbeat hb;
  hb.running = {{j, 1, 0}};
  hb.notice = api::SpotNotice{"terminate", clock_.Now() + Duration::Seconds(120)};
  auto f = e->Heartbeat(a, hb);
  e->Step();
  auto reply = f.get();
  ASSERT_TRUE(reply.ok());
  EXPECT_TRUE(reply->notice_acked);
  EXPECT_EQ(StateOf(j), JobState::kStopping);
  auto cmds = Commands(*e, a);
  ASSERT_EQ(cmds.size(), 1u);
  ASSERT_TRUE(cmds[0].stop);
  EXPECT_EQ(cmds[0].stop->key, (api::PartKey{j, 1, 0}));
  EXPECT_EQ(cmds[0].stop->signal, SIGUSR1);
  EXPECT_EQ(cmds[0].stop->grace, Duration::Seconds(7));
  for (const auto& n : e->Nodes()) {
    if (n.record.id != a) continue;
    EXPECT_EQ(n.record.state, api::NodeState::kDraining);
    ASSERT_TRUE(n.notice);
    EXPECT_EQ(n.notice->action, "terminate");
    EXPECT_EQ(n.notice->time, clock_.Now() + Duration::Seconds(120));
  }
  // The agent repeats the notice in later heartbeats: it is acted on once.
  auto g = e->Heartbeat(a, hb);
  e->Step();
  ASSERT_TRUE(g.get().ok());
  EXPECT_TRUE(Commands(*e, a).empty());

  // The job checkpoints and exits; it is requeued and starts again, on node-b.
  Beat(*e, a, {Exited(j, 1, 0, 0, true)});
  EXPECT_EQ(StatesOf(j), (std::vector<JobState>{JobState::kPending, JobState::kStarting, JobState::kRunning,
                                                JobState::kStopping, JobState::kPreempted, JobState::kPending,
                                                JobState::kStarting}));
  auto h = store_.History(j);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ((*h)[3].reason, "stopped: the provider is reclaiming the node (spot interruption notice)");
  EXPECT_EQ((*h)[4].reason, "stopped: the provider is reclaiming the node (spot interruption notice)");
  auto cb = Commands(*e, b);
  ASSERT_EQ(cb.size(), 1u);
  ASSERT_TRUE(cb[0].start);
  EXPECT_EQ(cb[0].start->key, (api::PartKey{j, 2, 0}));
  EXPECT_EQ(cb[0].start->env.at("GPUFLEET_CHECKPOINT_DIR"), "/ckpt/job-" + std::to_string(j.value()));

  // node-a takes no new work, and an undrain of it is refused, saying why.
  JobId k = Submit(*e, "resources: {gpus: 1}\nrun: y\n");
  EXPECT_EQ(StateOf(k), JobState::kPending);
  EXPECT_TRUE(Commands(*e, a).empty());
  auto undrain = e->Drain("node-a", false);
  e->Step();
  Status u = undrain.get();
  EXPECT_EQ(u.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(u.message().find("spot interruption notice"), std::string::npos) << u.message();
  EXPECT_EQ(StateOf(k), JobState::kPending);
  EXPECT_TRUE(Commands(*e, a).empty());

  // Its agent registers again before the notice's time (an agent restart): the notice stays in
  // force and node-a takes nothing.
  clock_.Advance(Duration::Seconds(10));
  ASSERT_EQ(Register(*e, "node-a", 4), a);
  for (const auto& n : e->Nodes()) {
    if (n.record.id == a) {
      EXPECT_EQ(n.record.state, api::NodeState::kDraining);
    }
  }
  EXPECT_TRUE(Commands(*e, a).empty());
  // The provider stopped the machine and started it again after the notice's time (a "stop"
  // notice): its agent registers anew. Expect the notice forgotten and node-a up again (it was
  // drained only by the notice), taking the waiting job; an agent under a new notice repeats it
  // and drains the node again.
  clock_.Advance(Duration::Seconds(120));
  ASSERT_EQ(Register(*e, "node-a", 4), a);
  for (const auto& n : e->Nodes()) {
    if (n.record.id != a) continue;
    EXPECT_EQ(n.record.state, api::NodeState::kUp);
    EXPECT_FALSE(n.notice);
  }
  auto ca = Commands(*e, a);
  ASSERT_EQ(ca.size(), 1u);
  ASSERT_TRUE(ca[0].start);
  EXPECT_EQ(ca[0].start->key.job, k);
  api::Heartbeat again;
  again.notice = api::SpotNotice{"stop", clock_.Now() + Duration::Seconds(120)};
  auto r = e->Heartbeat(a, again);
  e->Step();
  ASSERT_TRUE(r.get().ok());
  for (const auto& n : e->Nodes()) {
    if (n.record.id == a) {
      EXPECT_EQ(n.record.state, api::NodeState::kDraining);
    }
  }
}

TEST_F(EngineTest, StrayPartsAreKilled) {
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  Beat(*e, a, {}, {{JobId(77), 1, 0}});
  auto cmds = Commands(*e, a);
  ASSERT_EQ(cmds.size(), 1u);
  ASSERT_TRUE(cmds[0].stop);
  EXPECT_EQ(cmds[0].stop->key.job, JobId(77));
}

TEST_F(EngineTest, RestartRecoversQueueAndRunningJobs) {
  NodeId a;
  JobId running, pending;
  {
    auto e = MakeEngine();
    a = Register(*e, "node-a", 4);
    running = Submit(*e, "resources: {gpus: 4}\nrun: x\n");
    Beat(*e, a, {Started(running, 1, 0)});
    pending = Submit(*e, "resources: {gpus: 2}\nrun: y\n");
    EXPECT_EQ(StateOf(pending), JobState::kPending);
  }
  // A new engine on the same store: the running job keeps its GPUs, the pending one waits.
  auto e = MakeEngine();
  EXPECT_EQ(StateOf(running), JobState::kRunning);
  EXPECT_EQ(StateOf(pending), JobState::kPending);
  auto q = e->Queue();
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].job.id, running);
  EXPECT_EQ(q[1].job.id, pending);
  EXPECT_EQ(q[1].position, 1);
  // The agent re-registers still running the part; it finishes; the pending job starts.
  Register(*e, "node-a", 4, {{running, 1, 0}});
  Beat(*e, a, {Exited(running, 1, 0, 0)});
  EXPECT_EQ(StateOf(running), JobState::kSucceeded);
  EXPECT_EQ(StateOf(pending), JobState::kStarting);
}

TEST_F(EngineTest, GpusInUseCountEachSharedGpuOnce) {
  // Given two half-GPU jobs sharing one GPU and a whole-GPU job on a 4-GPU node, expect the node
  // to show 2 GPUs in use (not 3) and all three jobs on it.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 4);
  JobId h1 = Submit(*e, "resources: {gpus: 0.5}\nrun: x\n");
  JobId h2 = Submit(*e, "resources: {gpus: 0.5}\nrun: y\n");
  JobId w = Submit(*e, "resources: {gpus: 1}\nrun: z\n");
  Beat(*e, a, {Started(h1, 1, 0), Started(h2, 1, 0), Started(w, 1, 0)});
  auto nodes = e->Nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].gpus_used, 2);
  EXPECT_EQ(nodes[0].jobs.size(), 3u);
}

TEST_F(EngineTest, APartGoneWhenItsAgentRestartedIsRequeuedAsForALostNode) {
  // Given a running job whose agent registers again without it (the machine went down under it),
  // expect the job stopping, then preempted and pending again (requeued; it starts again), not
  // failed; and a job with restart.on_preemption false to fail with that reason.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 4);
  JobId job = Submit(*e, "resources: {gpus: 4}\nrun: x\n");
  Beat(*e, a, {Started(job, 1, 0)});
  ASSERT_EQ(StateOf(job), JobState::kRunning);
  Register(*e, "node-a", 4);
  std::vector<JobState> states = StatesOf(job);
  EXPECT_NE(std::find(states.begin(), states.end(), JobState::kPreempted), states.end());
  EXPECT_EQ(std::find(states.begin(), states.end(), JobState::kFailed), states.end());
  EXPECT_EQ(StateOf(job), JobState::kStarting) << "requeued, and the node has room again";

  JobId strict = Submit(*e, "resources: {gpus: 1}\nrun: y\nrestart: {on_preemption: false}\n");
  Beat(*e, a, {Started(job, 2, 0)});
  Beat(*e, a, {Exited(job, 2, 0, 0)});
  Beat(*e, a, {Started(strict, 1, 0)});
  ASSERT_EQ(StateOf(strict), JobState::kRunning);
  Register(*e, "node-a", 4);
  EXPECT_EQ(StateOf(strict), JobState::kFailed);
}

// Restart equivalence: two controllers get the same history on the same clock; one of them is
// replaced, midway, by a new controller on its store (a takeover). From then on both must rank
// the queue and decide alike.
class RestartEquivalenceTest : public EngineFixture {
 protected:
  void Start(const std::string& policy, std::map<std::string, std::string> policy_options) {
    options_.policy = policy;
    options_.policy_options = std::move(policy_options);
    options_.checkpoint_root = "/ckpt";
    options_.epoch = "e1";
    options_.lost_after = Duration::Seconds(3600);
    kept_ = std::make_unique<Engine>(clock_, kept_store_, options_);
    ASSERT_TRUE(kept_->Recover().ok());
    restarted_ = std::make_unique<Engine>(clock_, store_, options_);
    ASSERT_TRUE(restarted_->Recover().ok());
  }
  // The controller on store_ stops and a new one takes over; its agents register again with what
  // they run.
  void Restart(const std::map<std::string, std::pair<int, std::vector<api::PartKey>>>& agents) {
    restarted_.reset();
    restarted_ = std::make_unique<Engine>(clock_, store_, options_);
    ASSERT_TRUE(restarted_->Recover().ok());
    for (const auto& [name, what] : agents) Register(*restarted_, name, what.first, what.second);
  }
  // Does the same to both controllers; both must answer the same.
  template <typename F>
  auto Both(F f) {
    auto a = f(*kept_);
    auto b = f(*restarted_);
    EXPECT_EQ(a, b);
    return a;
  }
  void BothBeat(NodeId node, std::vector<api::PartEvent> events = {}) {
    Beat(*kept_, node, events);
    Beat(*restarted_, node, events);
  }
  // Running jobs, then pending ones in queue order, with their states in each store.
  std::vector<std::pair<JobId, api::JobState>> Queue(Engine& e, testing::MemoryStore& store) {
    std::vector<std::pair<JobId, api::JobState>> out;
    for (const QueueEntry& q : e.Queue()) {
      auto rec = store.GetJob(q.job.id);
      out.emplace_back(q.job.id, rec.ok() && *rec ? (*rec)->state : api::JobState::kFailed);
    }
    return out;
  }
  // Expects both controllers to hold the same queue and to explain each job alike (the words
  // include the service a job attained and its team's use).
  void ExpectSameQueue() {
    auto kept = Queue(*kept_, kept_store_);
    EXPECT_EQ(kept, Queue(*restarted_, store_));
    for (const auto& [id, state] : kept) {
      auto a = kept_->Explain(id);
      auto b = restarted_->Explain(id);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(a->reasons, b->reasons) << "job " << id.value();
    }
  }
  static api::PartEvent Checkpointed(JobId j, int attempt, int part) {
    api::PartEvent e;
    e.key = {j, attempt, part};
    e.kind = api::PartEventKind::kCheckpointed;
    return e;
  }

  EngineOptions options_;
  testing::MemoryStore kept_store_;
  std::unique_ptr<Engine> kept_;
  std::unique_ptr<Engine> restarted_;
};

TEST_F(RestartEquivalenceTest, LeastAttainedServiceSurvivesATakeover) {
  // Given `las` with one threshold at 100 GPU-seconds on a one-GPU node: job 1 runs 200 s and is
  // preempted by job 2 for its attained service; job 3 arrives while job 2 runs. Expect a
  // controller that takes over then to rank job 3 (queue 1) before job 1 (queue 2, 200 GPU-s),
  // and to demote and preempt job 2 at the same instant as the controller that kept running:
  // job 2's service counts from when it was placed, not from when its agent confirmed.
  Start("las", {{"thresholds", "100"}});
  NodeId a = Both([&](Engine& e) { return Register(e, "node-a", 1); });
  JobId first = Both([&](Engine& e) { return Submit(e, "resources: {gpus: 1}\nrun: a\n"); });
  clock_.Advance(Duration::Seconds(1));
  BothBeat(a, {Started(first, 1, 0)});
  clock_.Advance(Duration::Seconds(199));
  BothBeat(a);  // first crosses the threshold: queue 2
  JobId second = Both([&](Engine& e) { return Submit(e, "resources: {gpus: 1}\nrun: b\n"); });
  clock_.Advance(Duration::Seconds(1));
  BothBeat(a, {Exited(first, 1, 0, 0, /*stopped=*/true)});  // preempted; second is placed
  const Time second_placed = clock_.Now();
  clock_.Advance(Duration::Seconds(1));
  BothBeat(a, {Started(second, 1, 0)});
  clock_.Advance(Duration::Seconds(20));
  JobId third = Both([&](Engine& e) { return Submit(e, "resources: {gpus: 1}\nrun: c\n"); });
  ASSERT_EQ(Queue(*kept_, kept_store_),
            (std::vector<std::pair<JobId, api::JobState>>{
                {second, api::JobState::kRunning}, {third, api::JobState::kPending}, {first, api::JobState::kPending}}));

  clock_.Advance(Duration::Seconds(10));
  Restart({{"node-a", {1, {{second, 1, 0}}}}});
  ExpectSameQueue();

  // At 100 GPU-seconds of service second drops to queue 2, and third preempts it.
  clock_.Set(second_placed + Duration::Seconds(100));
  BothBeat(a);
  ExpectSameQueue();
  EXPECT_EQ(StateOf(second), api::JobState::kStopping);
  clock_.Advance(Duration::Seconds(1));
  BothBeat(a, {Exited(second, 1, 0, 0, /*stopped=*/true)});
  ExpectSameQueue();
  EXPECT_EQ(StateOf(third), api::JobState::kStarting);
}

TEST_F(RestartEquivalenceTest, FairShareReclaimPicksTheSameVictimAfterATakeover) {
  // Given `fair-share` with one guaranteed GPU per team on a two-GPU node, team b running two
  // jobs (one borrowed), the older of which checkpointed lately: expect a controller that took
  // over to rank the queue alike and, when team a claims its GPU, to reclaim the job that loses
  // the least work (the one that checkpointed), as the controller that kept running does.
  Start("fair-share", {{"quota.a", "1"}, {"quota.b", "1"}});
  NodeId a = Both([&](Engine& e) { return Register(e, "node-a", 2); });
  JobId x = Both([&](Engine& e) { return Submit(e, "team: b\nresources: {gpus: 1}\nrun: x\n"); });
  clock_.Advance(Duration::Seconds(1));
  BothBeat(a, {Started(x, 1, 0)});
  clock_.Advance(Duration::Seconds(10));
  JobId y = Both([&](Engine& e) { return Submit(e, "team: b\nresources: {gpus: 1}\nrun: y\n"); });
  clock_.Advance(Duration::Seconds(1));
  BothBeat(a, {Started(y, 1, 0)});
  clock_.Advance(Duration::Seconds(100));
  BothBeat(a, {Checkpointed(x, 1, 0)});
  clock_.Advance(Duration::Seconds(5));
  JobId waiting_b = Both([&](Engine& e) { return Submit(e, "team: b\nresources: {gpus: 1}\nrun: w\n"); });

  clock_.Advance(Duration::Seconds(5));
  Restart({{"node-a", {2, {{x, 1, 0}, {y, 1, 0}}}}});
  ExpectSameQueue();

  clock_.Advance(Duration::Seconds(10));
  JobId z = Both([&](Engine& e) { return Submit(e, "team: a\nresources: {gpus: 1}\nrun: z\n"); });
  ExpectSameQueue();
  EXPECT_EQ(StateOf(x), api::JobState::kStopping);
  EXPECT_EQ(StateOf(y), api::JobState::kRunning);
  clock_.Advance(Duration::Seconds(1));
  BothBeat(a, {Exited(x, 1, 0, 0, /*stopped=*/true)});
  ExpectSameQueue();
  EXPECT_EQ(StateOf(z), api::JobState::kStarting);
  EXPECT_EQ(StateOf(waiting_b), api::JobState::kPending);
}

TEST_F(EngineTest, AStopThatACrashInterruptsEndsAsItWasMeant) {
  // Given a job stopped for reaching its max_cost and another cancelled, both still `stopping`
  // when the controller restarts, expect the new controller to end each as the old one meant to
  // (the max_cost job failed, not requeued; the cancelled one cancelled), from the records'
  // stop intent and not from their reason text.
  NodeId a, b;
  JobId capped, cancelled;
  {
    auto e = MakeEngine();
    a = Register(*e, "node-a", 8, {}, 0, 0, /*price_micros_per_hour=*/8'000'000);
    b = Register(*e, "node-b", 1);
    capped = Submit(*e, "resources: {gpus: 8}\nrun: x\nmax_cost: $1\n");
    cancelled = Submit(*e, "resources: {gpus: 1}\nrun: y\n");
    Beat(*e, a, {Started(capped, 1, 0)});
    Beat(*e, b, {Started(cancelled, 1, 0)});
    for (int i = 0; i < 60 && StateOf(capped) == JobState::kRunning; ++i) {
      clock_.Advance(Duration::Seconds(10));
      Beat(*e, a);
      Beat(*e, b);
    }
    ASSERT_EQ(StateOf(capped), JobState::kStopping);
    EXPECT_EQ((*store_.GetJob(capped))->stop_intent, "max-cost");
    auto f = e->Cancel(cancelled, "alice");
    e->Step();
    ASSERT_TRUE(f.get().ok());
    ASSERT_EQ(StateOf(cancelled), JobState::kStopping);
    EXPECT_EQ((*store_.GetJob(cancelled))->stop_intent, "cancelled");
  }
  auto e = MakeEngine();
  Register(*e, "node-a", 8, {{capped, 1, 0}});
  Register(*e, "node-b", 1, {{cancelled, 1, 0}});
  Beat(*e, a, {Exited(capped, 1, 0, 0, true)});
  Beat(*e, b, {Exited(cancelled, 1, 0, 0, true)});
  EXPECT_EQ(StateOf(capped), JobState::kFailed);
  EXPECT_NE((*store_.GetJob(capped))->reason.find("max_cost"), std::string::npos) << (*store_.GetJob(capped))->reason;
  EXPECT_EQ(StateOf(cancelled), JobState::kCancelled);
  EXPECT_EQ((*store_.GetJob(capped))->stop_intent, "");  // kept only while stopping
}

TEST_F(EngineTest, BadRegistrationChangesNothing) {
  auto e = MakeEngine();
  api::RegisterRequest req;
  req.name = "node-x";
  req.spec.gpu_model = "Z999";
  req.spec.gpus = 4;
  auto f = e->Register(req, "h");
  e->Step();
  auto r = f.get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown GPU model 'Z999'"), std::string::npos);
  EXPECT_TRUE(e->Nodes().empty());
}

TEST_F(EngineTest, ADrainOrUndrainTheStoreRefusesChangesNothing) {
  // Given node-a drained, expect an undrain whose write fails to fail and leave it drained (no
  // job lands there); once the store takes writes again, an undrain puts it back to work. The
  // same for a drain of an up node.
  auto e = MakeEngine();
  Register(*e, "node-a", 1);
  auto d = e->Drain("node-a", true);
  e->Step();
  ASSERT_TRUE(d.get().ok());
  store_.FailNextWrite(Status::Unavailable("connection refused"));
  auto u = e->Drain("node-a", false);
  e->Step();
  EXPECT_EQ(u.get().code(), StatusCode::kUnavailable);
  EXPECT_EQ(e->Nodes()[0].record.state, api::NodeState::kDraining);
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: x\n");
  EXPECT_EQ(StateOf(j), JobState::kPending) << "a job landed on a node whose undrain failed";
  auto ok = e->Drain("node-a", false);
  e->Step();
  ASSERT_TRUE(ok.get().ok());
  e->Step();
  EXPECT_EQ(StateOf(j), JobState::kStarting);
  store_.FailNextWrite(Status::Unavailable("connection refused"));
  auto d2 = e->Drain("node-a", true);
  e->Step();
  EXPECT_EQ(d2.get().code(), StatusCode::kUnavailable);
  EXPECT_EQ(e->Nodes()[0].record.state, api::NodeState::kUp);
}

TEST_F(EngineTest, ReRegistrationKeepsADrainAndAReleasedNodeStaysOut) {
  // An agent that comes back keeps its node drained (a restart does not undo a drain), and a
  // node released from the cluster cannot register again under its name.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 8);
  auto d = e->Drain("node-a", true);
  e->Step();
  ASSERT_TRUE(d.get().ok());
  Register(*e, "node-a", 8);
  ASSERT_EQ(e->Nodes().size(), 1u);
  EXPECT_EQ(e->Nodes()[0].record.state, api::NodeState::kDraining);
  JobId j = Submit(*e, "name: x\nrun: sleep 1\nresources: {gpus: 1}\n");
  EXPECT_EQ(e->Queue()[0].job.state, JobState::kPending);  // not placed on the drained node
  (void)j;
  (void)a;

  auto rel = e->Release("node-a", /*only_if_idle=*/true, "test");
  e->Step();
  ASSERT_TRUE(rel.get().ok());
  api::RegisterRequest req;
  req.name = "node-a";
  req.spec.gpu_model = "H100";
  req.spec.gpus = 8;
  auto f = e->Register(req, "hash-node-a");
  e->Step();
  auto r = f.get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("was released from the cluster"), std::string::npos);
  EXPECT_EQ(e->Nodes()[0].record.state, api::NodeState::kGone);
}

TEST_F(EngineTest, JoinTokenCannotTakeOverALiveNodesName) {
  // Given node-a registered and heard from, expect a join-token registration under its name to be
  // refused while it is alive, and allowed once the node is lost.
  auto e = MakeEngine();
  Register(*e, "node-a", 8);
  api::RegisterRequest req;
  req.name = "node-a";
  req.spec.gpu_model = "H100";
  req.spec.gpus = 8;
  auto f = e->Register(req, "hash-thief", /*by_join_token=*/true);
  e->Step();
  auto r = f.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("cannot take over"), std::string::npos) << r.status().message();
  auto tok = store_.FindToken("hash-thief");
  ASSERT_TRUE(tok.ok());
  EXPECT_FALSE(tok->has_value()) << "a refused registration must store no token";

  clock_.Advance(Duration::Seconds(31));
  e->Step();  // node-a is lost now
  auto g = e->Register(req, "hash-replacement", /*by_join_token=*/true);
  e->Step();
  EXPECT_TRUE(g.get().ok());
}

TEST_F(EngineTest, ReRegistrationRevokesTheNodesOlderAgentTokens) {
  // Given node-a registered twice (its agent restarted), expect only the newest agent token to be
  // current and the older one revoked in the store.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 8);
  api::RegisterRequest req;
  req.name = "node-a";
  req.spec.gpu_model = "H100";
  req.spec.gpus = 8;
  auto f = e->Register(req, "hash-second");
  e->Step();
  ASSERT_TRUE(f.get().ok());
  EXPECT_TRUE(e->IsCurrentAgentToken(a, "hash-second"));
  EXPECT_FALSE(e->IsCurrentAgentToken(a, "hash-node-a"));
  auto old = store_.FindToken("hash-node-a");
  ASSERT_TRUE(old.ok() && old->has_value());
  EXPECT_TRUE((*old)->revoked);
  auto current = store_.FindToken("hash-second");
  ASSERT_TRUE(current.ok() && current->has_value());
  EXPECT_FALSE((*current)->revoked);
}

TEST_F(EngineTest, JobNoNodeCouldEverHoldIsRefusedWithTheReason) {
  // Given one node with 8 CPUs and 16 GiB, expect a job asking 16 CPUs, 32 GiB or an A100 to be
  // refused at submit with a reason that names what it asks and what the node has, and nothing
  // stored; a job that fits, and a 2-node gang (more nodes may join), to be taken.
  auto e = MakeEngine();
  Register(*e, "node-a", 2, {}, 8000, 16384);
  auto refused = [&](const std::string& yaml) {
    auto f = e->Submit("r" + std::to_string(++rid_), {Job(yaml)});
    e->Step();
    auto r = f.get();
    EXPECT_FALSE(r.ok()) << yaml;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    return r.status().message();
  };
  std::string cpus = refused("name: big\nresources: {gpus: 1, cpus: 16}\nrun: x\n");
  EXPECT_NE(cpus.find("job 'big' can never run"), std::string::npos) << cpus;
  EXPECT_NE(cpus.find("16 CPUs"), std::string::npos) << cpus;
  EXPECT_NE(cpus.find("8 CPUs (node-a)"), std::string::npos) << cpus;
  std::string mem = refused("resources: {gpus: 1, memory: 32Gi}\nrun: x\n");
  EXPECT_NE(mem.find("32 GiB"), std::string::npos) << mem;
  EXPECT_NE(mem.find("16 GiB (node-a)"), std::string::npos) << mem;
  std::string model = refused("resources: {gpus: 1, gpu_type: A100}\nrun: x\n");
  EXPECT_NE(model.find("no node has A100"), std::string::npos) << model;
  auto all = store_.ListJobs({});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());

  JobId fits = Submit(*e, "resources: {gpus: 1, cpus: 4, memory: 8Gi}\nrun: x\n");
  EXPECT_EQ(StateOf(fits), JobState::kStarting);
  JobId gang = Submit(*e, "resources: {gpus: 1, nodes: 2}\nrun: x\n");
  EXPECT_EQ(StateOf(gang), JobState::kPending);
}

TEST_F(EngineTest, ASubmissionIsRefusedWhenAnyOfItsJobsCouldNeverRun) {
  // Given one 8-CPU node and a submission of four jobs of which the first three ask the same and
  // fit, and the last asks 16 CPUs, expect the whole submission refused for the last one (checks
  // skip only jobs that ask exactly what the last checked one asked), and nothing stored.
  auto e = MakeEngine();
  Register(*e, "node-a", 2, {}, 8000, 16384);
  std::vector<api::JobRequest> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(Job("name: ok-" + std::to_string(i) + "\nresources: {gpus: 1, cpus: 4}\nrun: x\n"));
  jobs.push_back(Job("name: last\nresources: {gpus: 1, cpus: 16}\nrun: x\n"));
  auto f = e->Submit("r" + std::to_string(++rid_), jobs);
  e->Step();
  auto r = f.get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("job 'last' can never run"), std::string::npos) << r.status().message();
  auto all = store_.ListJobs({});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->empty());
  // The same three alone are taken.
  jobs.pop_back();
  auto g = e->Submit("r" + std::to_string(++rid_), jobs);
  e->Step();
  auto taken = g.get();
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->ids.size(), 3u);
}

TEST_F(EngineTest, WithoutNodesOrWithAPoolEveryJobIsTaken) {
  // Given no node yet, expect a job asking 64 CPUs to be taken (nodes may still join); given a
  // pool that may rent nodes, the same after a node registers.
  auto e = MakeEngine();
  Submit(*e, "resources: {gpus: 1, cpus: 64}\nrun: x\n");
  e->SetNodeSizeHints({{"H100", 8}});
  Register(*e, "node-a", 2, {}, 8000, 16384);
  Submit(*e, "resources: {gpus: 1, cpus: 64}\nrun: x\n");
  auto all = store_.ListJobs({});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
}

TEST_F(EngineTest, RecoveredNodesTakeNoNewWorkUntilTheirAgentRegisters) {
  // Given node-a running a job and node-b idle when the controller restarts, expect a new job to
  // wait rather than land on a node whose agent has not come back, to start on node-b once its
  // agent registers, and node-a's job to go on through its agent's re-registration.
  JobId running;
  std::string busy = "node-a", idle = "node-b";
  NodeId on;
  {
    auto e = MakeEngine();
    NodeId a = Register(*e, "node-a", 4);
    Register(*e, "node-b", 4);
    running = Submit(*e, "resources: {gpus: 4}\nrun: x\n");
    on = (*store_.GetJob(running))->placement->parts[0].node;
    if (on != a) std::swap(busy, idle);
    Beat(*e, on, {Started(running, 1, 0)});
  }
  auto e = MakeEngine();
  JobId fresh = Submit(*e, "resources: {gpus: 4}\nrun: y\n");
  EXPECT_EQ(StateOf(fresh), JobState::kPending);
  EXPECT_EQ(StateOf(running), JobState::kRunning);
  NodeId idle_id = Register(*e, idle, 4);
  EXPECT_EQ(StateOf(fresh), JobState::kStarting);
  EXPECT_EQ((*store_.GetJob(fresh))->placement->parts[0].node, idle_id);
  Register(*e, busy, 4, {{running, 1, 0}});
  EXPECT_EQ(StateOf(running), JobState::kRunning);
  Beat(*e, on, {Exited(running, 1, 0, 0)});
  EXPECT_EQ(StateOf(running), JobState::kSucceeded);
}

TEST_F(EngineTest, PartsTheirAgentStopsAreRequeuedNotFailed) {
  // Given a job running on node-a whose agent shuts down (it stops the part with its checkpoint
  // signal on its own), expect the job preempted and requeued, not failed, with a reason naming
  // the agent, and nothing new placed on node-a until its agent registers again.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId j = Submit(*e, "name: j\nrun: x\n");
  Beat(*e, a, {Started(j, 1, 0)});
  api::PartEvent stopped = Exited(j, 1, 0, 143, /*stopped=*/true);
  stopped.message = "the agent is shutting down";
  stopped.at = clock_.Now();
  Beat(*e, a, {stopped});
  EXPECT_EQ(StatesOf(j), (std::vector<JobState>{JobState::kPending, JobState::kStarting, JobState::kRunning,
                                                JobState::kStopping, JobState::kPreempted, JobState::kPending}));
  auto h = store_.History(j);
  EXPECT_NE((*h)[4].reason.find("stopped by its agent on node-a (the agent is shutting down)"), std::string::npos)
      << (*h)[4].reason;
  EXPECT_EQ(StateOf(j), JobState::kPending);  // not back on node-a while its agent is away
  Register(*e, "node-a", 1);
  EXPECT_EQ(StateOf(j), JobState::kStarting);
  EXPECT_EQ((*store_.GetJob(j))->attempt, 2);
}

TEST_F(EngineTest, APartItsAgentStoppedBeforeRegisteringAgainDoesNotHoldTheNode) {
  // Given a controller away longer than lost_after (its agent fenced itself: it stopped its part),
  // expect the stop, reported after the agent registered again, to requeue the job without holding
  // the node (held, nothing would clear it: the agent has registered already), so the job starts
  // there again.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  JobId j = Submit(*e, "name: j\nrun: x\n");
  Beat(*e, a, {Started(j, 1, 0)});
  ASSERT_EQ(StateOf(j), JobState::kRunning);
  e.reset();
  clock_.Advance(Duration::Seconds(30));
  const Time fenced = clock_.Now();
  clock_.Advance(Duration::Seconds(10));
  auto again = MakeEngine();
  acked_.clear();
  NodeId back = Register(*again, "node-a", 1, {{j, 1, 0}});  // still stopping, within its grace
  api::PartEvent stopped = Exited(j, 1, 0, 143, /*stopped=*/true);
  stopped.message = "the controller was silent";
  stopped.at = fenced;
  Beat(*again, back, {stopped});
  again->Step();
  EXPECT_EQ(StateOf(j), JobState::kStarting) << "the node was held after its agent had registered again";
  EXPECT_EQ((*store_.GetJob(j))->attempt, 2);
}

TEST_F(EngineTest, AHeldNodeTakesWorkAgainWhenItsAgentRegisters) {
  // Given node-a held (its agent is going away, as `gpufleet dev` says on Ctrl-C), expect a new
  // job to wait, also after an undrain, and to start once the agent registers.
  auto e = MakeEngine();
  Register(*e, "node-a", 1);
  auto held = e->HoldUntilRegistered("node-a");
  e->Step();
  ASSERT_TRUE(held.get().ok());
  JobId j = Submit(*e, "run: x\n");
  EXPECT_EQ(StateOf(j), JobState::kPending);
  auto undrain = e->Drain("node-a", false);
  e->Step();
  ASSERT_TRUE(undrain.get().ok());
  EXPECT_EQ(StateOf(j), JobState::kPending);
  Register(*e, "node-a", 1);
  EXPECT_EQ(StateOf(j), JobState::kStarting);
}

TEST_F(EngineTest, ExplainNamesThePolicyAndAHeldJobCannotStartNow) {
  // Given backfill (fifo order, EASY) with an 8-GPU job waiting behind a 6-GPU one and a 2-GPU
  // job that would fit but is held by the 8-GPU job's reservation, expect explain to name the
  // policy and to say the 2-GPU job cannot start now.
  auto e = MakeEngine("backfill");
  NodeId a = Register(*e, "node-a", 8);
  JobId first = Submit(*e, "resources: {gpus: 6}\nrun: x\n");
  Beat(*e, a, {Started(first, 1, 0)});
  JobId head = Submit(*e, "resources: {gpus: 8}\nrun: x\n");
  JobId small = Submit(*e, "resources: {gpus: 2}\nrun: x\n");
  ASSERT_EQ(StateOf(head), JobState::kPending);
  ASSERT_EQ(StateOf(small), JobState::kPending);
  auto ex = e->Explain(small);
  ASSERT_TRUE(ex.ok());
  EXPECT_NE(ex->placement, sched::PlaceResult::Kind::kPlaced);
  ASSERT_FALSE(ex->reasons.empty());
  EXPECT_NE(ex->reasons[0].find("policy backfill"), std::string::npos) << ex->reasons[0];
  bool held = false;
  for (const auto& r : ex->reasons) held = held || r.find("held by a reservation") != std::string::npos;
  EXPECT_TRUE(held);
}

TEST_F(EngineTest, ExplainNamesDrainedAndReclaimedNodesThatCouldHoldTheJob) {
  // Given node-a drained by an admin and node-b under a spot notice, both free, expect a waiting
  // 1-GPU job's explain to name each and why it takes no work.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 4);
  NodeId b = Register(*e, "node-b", 4);
  (void)a;
  auto d = e->Drain("node-a", true);
  e->Step();
  ASSERT_TRUE(d.get().ok());
  api::Heartbeat hb;
  hb.notice = api::SpotNotice{"terminate", clock_.Now() + Duration::Seconds(120)};
  auto f = e->Heartbeat(b, hb);
  e->Step();
  ASSERT_TRUE(f.get().ok());
  JobId j = Submit(*e, "resources: {gpus: 1}\nrun: x\n");
  ASSERT_EQ(StateOf(j), JobState::kPending);
  auto ex = e->Explain(j);
  ASSERT_TRUE(ex.ok());
  bool drained = false, reclaimed = false;
  for (const auto& r : ex->reasons) {
    drained = drained || r.find("node node-a takes no new work: it is drained ('gpufleet undrain node-a'") == 0;
    reclaimed = reclaimed || r.find("node node-b takes no new work: its provider reclaims it (spot interruption "
                                    "notice: terminate at") == 0;
  }
  EXPECT_TRUE(drained) << ::testing::PrintToString(ex->reasons);
  EXPECT_TRUE(reclaimed) << ::testing::PrintToString(ex->reasons);
}

TEST_F(EngineTest, ExplainNamesOnlyQuarantinedNodesOfAModelTheJobTakes) {
  // Given an H100 node that failed its burn-in and a busy A100 node, expect the explain of an
  // A100 job to leave the H100 node out, and that of an H100 job to name it.
  auto e = MakeEngine();
  e->RequireBurnIn("node-a");
  NodeId a = Register(*e, "node-a", 2);
  api::RegisterRequest req;
  req.name = "node-b";
  req.address = "10.0.0.2";
  req.spec.gpu_model = "A100";
  req.spec.gpus = 1;
  req.gpus.push_back({0, "GPU-node-b-0", "NVIDIA A100-SXM4-80GB", 81920});
  auto rf = e->Register(req, "hash-node-b");
  e->Step();
  ASSERT_TRUE(rf.get().ok());
  api::Heartbeat hb;
  model::BurnInReport report;
  report.path = "cuda";
  report.request = 1;
  model::GpuHealth h;
  h.index = 0;
  h.ecc_uncorrected = 4;
  report.health = {h};
  hb.burn_in = report;
  auto beat = e->Heartbeat(a, hb);
  e->Step();
  ASSERT_TRUE(beat.get().ok());
  ASSERT_EQ(e->Nodes()[0].record.acceptance, "quarantined");
  Submit(*e, "resources: {gpus: 1, gpu_type: A100}\nrun: x\n");  // takes node-b
  JobId a100 = Submit(*e, "resources: {gpus: 1, gpu_type: A100}\nrun: x\n");
  JobId h100 = Submit(*e, "resources: {gpus: 1, gpu_type: H100}\nrun: x\n");
  ASSERT_EQ(StateOf(a100), JobState::kPending);
  ASSERT_EQ(StateOf(h100), JobState::kPending);
  auto names_quarantine = [&](JobId j) {
    auto ex = e->Explain(j);
    EXPECT_TRUE(ex.ok());
    bool named = false;
    for (const auto& r : ex->reasons) named = named || r.find("node node-a is quarantined") == 0;
    return named;
  };
  EXPECT_FALSE(names_quarantine(a100));
  EXPECT_TRUE(names_quarantine(h100));
}

TEST_F(EngineTest, ARestartedControllerCountsOnlyTheSpendInsideTheBudgetsPeriod) {
  // Given an 8-GPU node at $8/h and team a's job running 900 s ($2) before a budget is set, then
  // 450 s more ($1) inside it before it is cancelled, expect the team's spend $1 before and after
  // a controller restart (the restart counted the job's whole $3: it ended inside the period).
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 8, {}, 0, 0, 8'000'000);
  JobId j = Submit(*e, "team: a\nresources: {gpus: 8}\nrun: x\n");
  Commands(*e, a);
  Beat(*e, a, {Started(j, 1, 0)});
  for (int i = 0; i < 45; ++i) {
    clock_.Advance(Duration::Seconds(20));
    Beat(*e, a);
  }
  SetHardBudget(*e, "a", 10'000'000);
  for (int i = 0; i < 45; ++i) {
    clock_.Advance(Duration::Seconds(10));
    Beat(*e, a);
  }
  auto cf = e->Cancel(j, "test");
  e->Step();
  ASSERT_TRUE(cf.get().ok());
  Commands(*e, a);
  Beat(*e, a, {Exited(j, 1, 0, 143, true)});
  ASSERT_EQ(StateOf(j), JobState::kCancelled);
  EXPECT_EQ((*store_.GetJob(j))->cost_micros, 3'000'000);
  EXPECT_EQ(SpentOf(*e, "a"), 1'000'000);
  e.reset();
  auto again = MakeEngine();
  EXPECT_EQ(SpentOf(*again, "a"), 1'000'000);
}

TEST_F(EngineTest, ATeamItsHardBudgetStoppedStaysStoppedAfterARestart) {
  // Given an 8-GPU node at $8/h and team a with $2, its job stopped at 870 s by the stop lead
  // (its 30 s grace) and exiting at once (so the team spent $1.93, under the limit), expect the
  // team to stay stopped: before a restart, and after one (it started its job again, running
  // until the lead, at every restart); a larger limit lets it go.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 8, {}, 0, 0, 8'000'000);
  SetHardBudget(*e, "a", 2'000'000);
  JobId j = Submit(*e, "team: a\nresources: {gpus: 8}\nrun: x\n");
  Commands(*e, a);
  Beat(*e, a, {Started(j, 1, 0)});
  for (int i = 0; i < 87; ++i) {
    clock_.Advance(Duration::Seconds(10));
    Beat(*e, a);
  }
  ASSERT_EQ(StateOf(j), JobState::kStopping);
  Commands(*e, a);
  clock_.Advance(Duration::Seconds(1));
  Beat(*e, a, {Exited(j, 1, 0, 143, true)});
  ASSERT_EQ(StateOf(j), JobState::kPending);
  auto stopped = [](Engine& eng) {
    for (const auto& c : eng.TeamCosts()) {
      if (c.team == "a") return c.spend.hard_stop && c.spend.spent_micros < 2'000'000;
    }
    return false;
  };
  EXPECT_TRUE(stopped(*e));
  // The queue says what holds the job, not its last transition's "requeued".
  auto queue = e->Queue();
  ASSERT_EQ(queue.size(), 1u);
  EXPECT_NE(queue[0].job.reason.find("hard budget"), std::string::npos) << queue[0].job.reason;
  e.reset();
  auto again = MakeEngine();
  Register(*again, "node-a", 8, {}, 0, 0, 8'000'000);
  clock_.Advance(Duration::Seconds(10));
  again->Step();
  EXPECT_EQ(StateOf(j), JobState::kPending) << "a restart let the stopped team start its job";
  EXPECT_TRUE(stopped(*again));
  sched::TeamBudget b = again->TeamCosts().at(0).budget.value();
  b.hard_micros = 3'000'000;
  auto more = again->SetBudget("a", b);
  again->Step();
  ASSERT_TRUE(more.get().ok());
  again->Step();
  EXPECT_EQ(StateOf(j), JobState::kStarting) << "a larger limit lets it go";
}

TEST_F(EngineTest, TeamCostsListTeamsWithoutABudgetWhoseJobsEnded) {
  // Given team v (no budget) whose 8-GPU job ran 15 minutes on an $8/h node and ended, expect
  // team costs to list v with its $2, also after a controller restart.
  {
    auto e = MakeEngine();
    api::RegisterRequest req;
    req.name = "node-a";
    req.spec.gpu_model = "H100";
    req.spec.gpus = 8;
    req.spec.price_micros_per_hour = 8'000'000;
    auto rf = e->Register(req, "h");
    e->Step();
    NodeId a = rf.get()->node;
    JobId j = Submit(*e, "team: v\nresources: {gpus: 8}\nrun: x\n");
    Beat(*e, a, {Started(j, 1, 0)});
    clock_.Advance(Duration::Minutes(15));
    Beat(*e, a, {Exited(j, 1, 0, 0)});
    ASSERT_EQ(StateOf(j), JobState::kSucceeded);
    auto costs = e->TeamCosts();
    ASSERT_EQ(costs.size(), 1u);
    EXPECT_EQ(costs[0].team, "v");
    EXPECT_EQ(costs[0].spend.spent_micros, 2'000'000);
  }
  auto again = MakeEngine();
  auto costs = again->TeamCosts();
  ASSERT_EQ(costs.size(), 1u);
  EXPECT_EQ(costs[0].team, "v");
  EXPECT_EQ(costs[0].spend.spent_micros, 2'000'000);
}

TEST_F(EngineTest, PartOnNodeKnowsWhereEachPartRunsUntilTheJobEnds) {
  // Given a job started on node-a, expect its part to belong to node-a (not node-b) until the
  // job finishes, and to nobody after.
  auto e = MakeEngine();
  NodeId a = Register(*e, "node-a", 1);
  NodeId b = Register(*e, "node-b", 1);
  JobId j = Submit(*e, "name: j\nresources: {gpus: 1}\nrun: [sleep, '1']\n");
  e->Step();
  NodeId on = e->PartOnNode(a, {j, 1, 0}) ? a : b;
  NodeId other = on == a ? b : a;
  EXPECT_TRUE(e->PartOnNode(on, {j, 1, 0}));
  EXPECT_FALSE(e->PartOnNode(other, {j, 1, 0}));
  EXPECT_FALSE(e->PartOnNode(on, {j, 2, 0})) << "no second attempt exists";
  Beat(*e, on, {Started(j, 1, 0)});
  Beat(*e, on, {Exited(j, 1, 0, 0)});
  e->Step();
  EXPECT_FALSE(e->PartOnNode(on, {j, 1, 0}));
}

}  // namespace
}  // namespace gpufleet::controller
