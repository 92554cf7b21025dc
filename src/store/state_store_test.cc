// The behaviour every StateStore shares, run over the in-memory fake, SQLite and PostgreSQL.
#include <algorithm>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/codec.h"
#include "store/state_store.h"
#include "store/store_fixture_test.h"
#include "testing/memory_store.h"

namespace gpufleet::store {
namespace {

// Behaviour shared by every StateStore: the in-memory fake, SQLite and PostgreSQL. One suite, so
// that the three cannot drift apart.

enum class StoreKind { kMemory, kSqlite, kPostgres };
void PrintTo(StoreKind kind, std::ostream* os) {
  *os << (kind == StoreKind::kMemory ? "memory" : kind == StoreKind::kSqlite ? "sqlite" : "postgres");
}

class StateStoreTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    if (GetParam() == StoreKind::kPostgres) {
      auto url = FreshPostgresSchema();
      ASSERT_TRUE(url.ok()) << "the PostgreSQL tests need a PostgreSQL server and could not start one: "
                            << url.status().ToString();
      postgres_url_ = *url;
    }
    Open();
  }

  void Open() {
    Result<std::unique_ptr<StateStore>> s = std::unique_ptr<StateStore>();
    switch (GetParam()) {
      case StoreKind::kMemory:
        store_ = std::make_unique<testing::MemoryStore>();
        return;
      case StoreKind::kSqlite:
        s = OpenSqliteStore(db_path());
        break;
      case StoreKind::kPostgres:
        s = OpenPostgresStore(postgres_url_);
        break;
    }
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  // Closes and opens the database again; a no-op for the fake, which has nothing to reopen.
  void Reopen() {
    if (GetParam() == StoreKind::kMemory) return;
    store_.reset();
    Open();
  }
  std::string db_path() const { return dir_.path() + "/state.db"; }

  std::vector<SubmitOutcome> SubmitOk(std::vector<Submission> subs) {
    auto r = store_->Submit(std::move(subs));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<SubmitOutcome>{};
  }
  api::JobRecord GetOk(JobId id) {
    auto r = store_->GetJob(id);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r.ok() && r->has_value()) << "no job " << id;
    return r.ok() && r->has_value() ? **r : api::JobRecord{};
  }
  std::vector<api::JobRecord> ListOk(const JobFilter& filter) {
    auto r = store_->ListJobs(filter);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<api::JobRecord>{};
  }
  std::vector<api::Transition> HistoryOk(JobId id) {
    auto r = store_->History(id);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<api::Transition>{};
  }

  TempDir dir_;
  std::string postgres_url_;
  std::unique_ptr<StateStore> store_;
};

TEST_P(StateStoreTest, IdsAscendFromOneAndAreNeverReusedAcrossReopen) {
  // Given a batch of three submissions (the middle one an array of two), expect ids 1..4 in
  // submission order; after a reopen, expect the next submission to get 5.
  auto out = SubmitOk({MakeSubmission("a"), MakeSubmission("b", 2), MakeSubmission("c")});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(Ids(out[0].ids), (std::vector<int64_t>{1}));
  EXPECT_EQ(Ids(out[1].ids), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Ids(out[2].ids), (std::vector<int64_t>{4}));
  EXPECT_TRUE(out[0].created && out[1].created && out[2].created);
  Reopen();
  auto more = SubmitOk({MakeSubmission("d")});
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(Ids(more[0].ids), (std::vector<int64_t>{5}));
}

TEST_P(StateStoreTest, JobIdsSkippedThroughAnIdGoOnAfterItAndNeverGoBack) {
  // Given jobs 1 and 2, expect ids skipped through 10 to make the next job 11 (also after a
  // reopen), and a skip through an id already passed to change nothing.
  SubmitOk({MakeSubmission("a", 2)});
  ASSERT_TRUE(store_->SkipJobIdsThrough(10).ok());
  auto out = SubmitOk({MakeSubmission("b")});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Ids(out[0].ids), (std::vector<int64_t>{11}));
  ASSERT_TRUE(store_->SkipJobIdsThrough(5).ok());
  Reopen();
  auto more = SubmitOk({MakeSubmission("c")});
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(Ids(more[0].ids), (std::vector<int64_t>{12}));
}

TEST_P(StateStoreTest, SubmitHandsTheRecordsBackAsStored) {
  // Given a new request of two jobs and a repeat of an earlier request id, expect the new one's
  // records back as stored (ids, request id and reason set, the same as GetJob reads) and the
  // repeat's records back as they were given.
  SubmitOk({MakeSubmission("seen", 1, "vision")});
  Submission fresh = MakeSubmission("fresh", 2);
  fresh.jobs[0].request_id = "something else";
  fresh.jobs[0].reason = "anything";
  Submission repeat = MakeSubmission("seen", 3, "nlp", 2000);
  auto out = SubmitOk({fresh, repeat});
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0].jobs.size(), 2u);
  EXPECT_EQ(Ids(out[0].jobs), Ids(out[0].ids));
  for (const api::JobRecord& job : out[0].jobs) {
    EXPECT_EQ(job.request_id, "fresh");
    EXPECT_EQ(job.reason, "submitted");
    EXPECT_EQ(api::ToJson(job), api::ToJson(GetOk(job.id)));
  }
  ASSERT_EQ(out[1].jobs.size(), 3u);
  EXPECT_FALSE(out[1].created);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(api::ToJson(out[1].jobs[i]), api::ToJson(repeat.jobs[i]));
}

TEST_P(StateStoreTest, ResubmittedRequestIdGetsTheEarlierIds) {
  // Given a request submitted twice (the second time with other content), and another request
  // twice within one batch, expect the earlier ids with created=false and no new jobs.
  auto first = SubmitOk({MakeSubmission("req-1", 2)});
  auto again = SubmitOk({MakeSubmission("req-1", 3, "vision")});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_FALSE(again[0].created);
  EXPECT_EQ(Ids(again[0].ids), Ids(first[0].ids));

  auto batch = SubmitOk({MakeSubmission("req-2"), MakeSubmission("req-2"), MakeSubmission("req-1")});
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_TRUE(batch[0].created);
  EXPECT_FALSE(batch[1].created);
  EXPECT_EQ(Ids(batch[1].ids), Ids(batch[0].ids));
  EXPECT_FALSE(batch[2].created);
  EXPECT_EQ(Ids(batch[2].ids), Ids(first[0].ids));
  EXPECT_EQ(ListOk({}).size(), 3u);
  Reopen();
  auto after_reopen = SubmitOk({MakeSubmission("req-2")});
  EXPECT_FALSE(after_reopen[0].created);
  EXPECT_EQ(Ids(after_reopen[0].ids), Ids(batch[0].ids));
}

TEST_P(StateStoreTest, ARetryOnlySubmissionGetsTheEarlierIdsOrNothingAndStoresNothing) {
  // Given a submission marked only_if_seen (a submit the caller refuses unless it is a retry),
  // expect the earlier ids for a request id seen before, and for a new one no ids, no job, no
  // request remembered (the same id later creates its jobs) and no id used up.
  auto first = SubmitOk({MakeSubmission("req-1", 2)});
  Submission known;
  known.request_id = "req-1";
  known.only_if_seen = true;
  Submission unknown;
  unknown.request_id = "req-new";
  unknown.only_if_seen = true;
  auto both = SubmitOk({std::move(known), std::move(unknown)});
  ASSERT_EQ(both.size(), 2u);
  EXPECT_FALSE(both[0].created);
  EXPECT_EQ(Ids(both[0].ids), Ids(first[0].ids));
  EXPECT_FALSE(both[1].created);
  EXPECT_TRUE(both[1].ids.empty());
  EXPECT_EQ(ListOk({}).size(), 2u);
  auto later = SubmitOk({MakeSubmission("req-new")});
  ASSERT_EQ(later.size(), 1u);
  EXPECT_TRUE(later[0].created);
  EXPECT_EQ(later[0].ids.at(0).value(), first[0].ids.back().value() + 1);
}

TEST_P(StateStoreTest, SubmitStoresTheRecordAndASubmittedTransition) {
  // Given an array submission, expect each job stored with its id, the request id, its index and
  // its request, and a history of one pending -> pending "submitted" transition at submission.
  auto out = SubmitOk({MakeSubmission("sweep", 2, "nlp", 7000)});
  ASSERT_EQ(out[0].ids.size(), 2u);
  api::JobRecord job = GetOk(out[0].ids[1]);
  EXPECT_EQ(job.id, out[0].ids[1]);
  EXPECT_EQ(job.request_id, "sweep");
  EXPECT_EQ(job.array_index, 1);
  EXPECT_EQ(job.state, api::JobState::kPending);
  EXPECT_EQ(job.reason, "submitted");
  EXPECT_EQ(job.submitted, Time::FromMillis(7000));
  EXPECT_EQ(job.request.spec.team, "nlp");
  EXPECT_EQ(job.request.argv, (std::vector<std::string>{"python", "train.py"}));
  auto history = HistoryOk(job.id);
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].at, Time::FromMillis(7000));
  EXPECT_EQ(history[0].from, api::JobState::kPending);
  EXPECT_EQ(history[0].to, api::JobState::kPending);
  EXPECT_EQ(history[0].reason, "submitted");

  auto missing = store_->GetJob(JobId(99));
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  EXPECT_TRUE(HistoryOk(JobId(99)).empty());
}

TEST_P(StateStoreTest, AnUpdateWrittenAgainAppendsItsTransitionOnce) {
  // Given an update written twice (the retry of a commit whose answer was lost after the server
  // had committed it), expect one transition; a later transition that differs, even between the
  // same states, is appended.
  auto ids = SubmitOk({MakeSubmission("again")});
  api::JobRecord a = GetOk(ids[0].ids[0]);
  a.state = api::JobState::kStarting;
  a.reason = "placed";
  const JobUpdate placed{a, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kStarting, "placed"}};
  ASSERT_TRUE(store_->Update({placed}).ok());
  ASSERT_TRUE(store_->Update({placed}).ok());
  EXPECT_EQ(HistoryOk(a.id).size(), 2u);  // submitted, placed
  a.state = api::JobState::kPending;
  const JobUpdate back{a, {Time::FromMillis(2500), api::JobState::kStarting, api::JobState::kPending, "requeued"}};
  ASSERT_TRUE(store_->Update({back}).ok());
  a.state = api::JobState::kStarting;
  const JobUpdate again{a, {Time::FromMillis(3000), api::JobState::kPending, api::JobState::kStarting, "placed"}};
  ASSERT_TRUE(store_->Update({again, back}).ok());  // (both differ from the one before them)
  auto history = HistoryOk(a.id);
  ASSERT_EQ(history.size(), 5u);
  EXPECT_EQ(history[3].at, Time::FromMillis(3000));
  EXPECT_EQ(history[4].reason, "requeued");
}

TEST_P(StateStoreTest, BadSubmissionFailsTheWholeBatch) {
  // Given a batch with a good submission and one without a request id (or without jobs), expect
  // InvalidArgument and nothing stored, not even the good one.
  auto r = store_->Submit({MakeSubmission("good"), MakeSubmission("")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(r.status().message(), "submission 1")) << r.status().message();
  auto empty = store_->Submit({MakeSubmission("good"), Submission{"no-jobs", {}, std::nullopt}});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ListOk({}).empty());
  // The ids were not spent either.
  EXPECT_EQ(Ids(SubmitOk({MakeSubmission("good")})[0].ids), (std::vector<int64_t>{1}));
}

TEST_P(StateStoreTest, UpdateWritesRecordsAndAppendsHistoryInOrder) {
  // Given a job that starts and then succeeds (two updates, the first covering two jobs), expect
  // the latest record and the transitions oldest first.
  auto ids = SubmitOk({MakeSubmission("a"), MakeSubmission("b")});
  api::JobRecord a = GetOk(ids[0].ids[0]);
  api::JobRecord b = GetOk(ids[1].ids[0]);
  a.state = api::JobState::kStarting;
  a.reason = "placed on node-a gpus 0-1";
  a.attempt = 1;
  a.updated = Time::FromMillis(2000);
  a.placement = model::Placement{"H100", {{NodeId(1), {0, 1}, 1000, 0, 0}}};
  b.state = api::JobState::kCancelled;
  b.reason = "cancelled by alice";
  ASSERT_TRUE(store_
                  ->Update({{a, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kStarting, a.reason}},
                            {b, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kCancelled, b.reason}}})
                  .ok());
  a.state = api::JobState::kSucceeded;
  a.exit_code = 0;
  a.reason = "exit code 0";
  ASSERT_TRUE(
      store_->Update({{a, {Time::FromMillis(3000), api::JobState::kStarting, api::JobState::kSucceeded, a.reason}}})
          .ok());
  Reopen();
  api::JobRecord stored = GetOk(a.id);
  EXPECT_EQ(stored.state, api::JobState::kSucceeded);
  EXPECT_EQ(stored.attempt, 1);
  EXPECT_EQ(stored.exit_code, 0);
  ASSERT_TRUE(stored.placement.has_value());
  EXPECT_EQ(stored.placement->parts[0].gpus, (std::vector<int>{0, 1}));
  auto history = HistoryOk(a.id);
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[0].reason, "submitted");
  EXPECT_EQ(history[1].to, api::JobState::kStarting);
  EXPECT_EQ(history[1].reason, "placed on node-a gpus 0-1");
  EXPECT_EQ(history[2].from, api::JobState::kStarting);
  EXPECT_EQ(history[2].to, api::JobState::kSucceeded);
  EXPECT_EQ(history[2].at, Time::FromMillis(3000));
  EXPECT_EQ(HistoryOk(b.id).size(), 2u);
  EXPECT_EQ(GetOk(b.id).state, api::JobState::kCancelled);
}

TEST_P(StateStoreTest, UpdateOfAnUnknownJobChangesNothing) {
  // Given a batch updating a known job and an unknown one, expect NotFound and the known job and
  // its history untouched.
  auto ids = SubmitOk({MakeSubmission("a")});
  api::JobRecord a = GetOk(ids[0].ids[0]);
  a.state = api::JobState::kRunning;
  api::JobRecord ghost = a;
  ghost.id = JobId(42);
  Status s = store_->Update({{a, {Time::FromMillis(5), api::JobState::kPending, api::JobState::kRunning, "x"}},
                             {ghost, {Time::FromMillis(5), api::JobState::kPending, api::JobState::kRunning, "x"}}});
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "42")) << s.message();
  EXPECT_EQ(GetOk(a.id).state, api::JobState::kPending);
  EXPECT_EQ(HistoryOk(a.id).size(), 1u);
  EXPECT_FALSE(store_->GetJob(JobId(42))->has_value());
}

model::JobMemory SampleMemory(int64_t base) {
  model::JobMemory m;
  m.attained_gpu_ms = base + 1;
  m.las_service_gpu_ms = base + 2;
  m.run_time = Duration::Millis(base + 3);
  m.last_run = Duration::Millis(base + 4);
  m.preemptions = 5;
  m.spot_reclaims = 6;
  m.queued_since = Time::FromMillis(1'700'000'000'000 + base + 7);
  m.rank_class_since = Time::FromMillis(1'700'000'000'000 + base + 8);
  m.rank_class = 2;
  m.run_started_at = Time::FromMillis(1'700'000'000'000 + base + 9);
  m.last_checkpoint = Time::FromMillis(1'700'000'000'000 + base + 10);
  m.accrued_micros = (int64_t{1} << 40) + base;
  return m;
}

TEST_P(StateStoreTest, SchedulerMemoryIsStoredWithItsTransitionAndDroppedWhenTheJobEnds) {
  // Given two jobs, one updated with the scheduler's memory and one without, then the memory of
  // the first saved alone, expect only the first's memory back (after a reopen), the later value
  // replacing the earlier; an update without memory keeps it; a batch naming an unknown job
  // stores no memory at all; and the memory is gone once the job has ended.
  auto ids = SubmitOk({MakeSubmission("a"), MakeSubmission("b")});
  api::JobRecord a = GetOk(ids[0].ids[0]);
  api::JobRecord b = GetOk(ids[1].ids[0]);
  EXPECT_TRUE(store_->ListJobMemory()->empty());
  a.state = api::JobState::kStarting;
  b.state = api::JobState::kStarting;
  JobUpdate ua{a, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kStarting, "placed"}};
  ua.memory = SampleMemory(100);
  JobUpdate ub_plain{b, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kStarting, "placed"}};
  ASSERT_TRUE(store_->Update({ua, ub_plain}).ok());
  Reopen();
  auto memory = store_->ListJobMemory();
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  EXPECT_EQ(*memory, (std::vector<JobMemoryRecord>{{a.id, SampleMemory(100)}}));

  ASSERT_TRUE(store_->SaveJobMemory({{a.id, SampleMemory(200)}}).ok());
  a.state = api::JobState::kRunning;
  ASSERT_TRUE(
      store_->Update({{a, {Time::FromMillis(3000), api::JobState::kStarting, api::JobState::kRunning, "ok"}}}).ok());
  Reopen();
  EXPECT_EQ(*store_->ListJobMemory(), (std::vector<JobMemoryRecord>{{a.id, SampleMemory(200)}}));

  Status s = store_->SaveJobMemory({{b.id, SampleMemory(300)}, {JobId(42), SampleMemory(400)}});
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  api::JobRecord ghost = b;
  ghost.id = JobId(42);
  JobUpdate ub{b, {Time::FromMillis(4000), api::JobState::kStarting, api::JobState::kRunning, "ok"}};
  ub.memory = SampleMemory(500);
  s = store_->Update({ub, {ghost, {Time::FromMillis(4000), api::JobState::kStarting, api::JobState::kRunning, "ok"}}});
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_EQ(*store_->ListJobMemory(), (std::vector<JobMemoryRecord>{{a.id, SampleMemory(200)}}));

  a.state = api::JobState::kSucceeded;
  JobUpdate done{a, {Time::FromMillis(5000), api::JobState::kRunning, api::JobState::kSucceeded, "exit code 0"}};
  done.memory = SampleMemory(600);  // a finished job has nothing to remember
  ASSERT_TRUE(store_->Update({done}).ok());
  Reopen();
  EXPECT_TRUE(store_->ListJobMemory()->empty());
}

TEST_P(StateStoreTest, ListJobsHonoursTeamSinceTerminalAndLimit) {
  // Given jobs of two teams submitted at different times, one of them finished, expect each
  // filter to select the right ones: oldest first without a limit, newest first with one.
  auto out = SubmitOk({MakeSubmission("1", 1, "nlp", 1000), MakeSubmission("2", 1, "vision", 2000),
                       MakeSubmission("3", 1, "nlp", 3000), MakeSubmission("4", 1, "nlp", 4000)});
  api::JobRecord third = GetOk(out[2].ids[0]);
  third.state = api::JobState::kFailed;
  ASSERT_TRUE(
      store_->Update({{third, {Time::FromMillis(3500), api::JobState::kPending, api::JobState::kFailed, "exit 1"}}})
          .ok());
  Reopen();
  EXPECT_EQ(Ids(ListOk({})), (std::vector<int64_t>{1, 2, 3, 4}));
  JobFilter nlp;
  nlp.team = "nlp";
  EXPECT_EQ(Ids(ListOk(nlp)), (std::vector<int64_t>{1, 3, 4}));
  JobFilter live;
  live.include_terminal = false;
  EXPECT_EQ(Ids(ListOk(live)), (std::vector<int64_t>{1, 2, 4}));
  JobFilter since;
  since.since = Time::FromMillis(2000);
  EXPECT_EQ(Ids(ListOk(since)), (std::vector<int64_t>{2, 3, 4}));
  JobFilter newest;
  newest.limit = 2;
  EXPECT_EQ(Ids(ListOk(newest)), (std::vector<int64_t>{4, 3}));
  JobFilter all;
  all.team = "nlp";
  all.include_terminal = false;
  all.since = Time::FromMillis(1000);
  all.limit = 5;
  EXPECT_EQ(Ids(ListOk(all)), (std::vector<int64_t>{4, 1}));
  JobFilter nobody;
  nobody.team = "robotics";
  EXPECT_TRUE(ListOk(nobody).empty());
}

// An array of `n` tasks as api::ParseJobs expands one: each task has its own index, name,
// command, directory, environment and parameters, and shares everything else.
Submission MakeArray(const std::string& request_id, int n, const std::string& team, int64_t submitted_ms) {
  Submission s{request_id, {}, std::nullopt};
  for (int i = 0; i < n; ++i) {
    api::JobRecord job = MakeJob(team, submitted_ms, i);
    const std::string v = std::to_string(i);
    job.request.spec.name = "sweep-" + v;
    job.request.argv = {"python", "train.py", "--lr", "0." + v};
    job.request.workdir = "/runs/" + v;
    job.request.env = {{"GPUFLEET_ARRAY_INDEX", v}, {"GPUFLEET_PARAM_LR", "0." + v}, {"WANDB_MODE", "offline"}};
    job.request.array_params = {{"lr", "0." + v}};
    job.request.cost.step_seconds = {{"H100", 0.25}};
    s.jobs.push_back(std::move(job));
  }
  return s;
}

TEST_P(StateStoreTest, ALargeArrayReadsAsOneJobPerTask) {
  // Given a plain job, an array of 2,500 tasks (more than one stored chunk) and another plain job
  // of another team, expect every read to see 2,502 jobs as submitted, before and after a
  // reopen: each task's record, its one "submitted" transition, and every listing filter and
  // page; the next submission after a reopen gets the next id.
  auto out = SubmitOk({MakeSubmission("one", 1, "nlp", 1000), MakeArray("sweep", 2500, "nlp", 2000),
                       MakeSubmission("two", 1, "vision", 3000)});
  ASSERT_EQ(out.size(), 3u);
  ASSERT_EQ(out[1].ids.size(), 2500u);
  EXPECT_EQ(out[1].ids.front(), JobId(2));
  EXPECT_EQ(out[1].ids.back(), JobId(2501));
  EXPECT_EQ(out[2].ids[0], JobId(2502));
  const std::vector<api::JobRecord> tasks = out[1].jobs;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "as written" : "after a reopen");
    for (int i : {0, 1, 1023, 1024, 2047, 2048, 2499}) {
      EXPECT_EQ(api::ToJson(GetOk(tasks[i].id)), api::ToJson(tasks[i])) << "task " << i;
      auto history = HistoryOk(tasks[i].id);
      ASSERT_EQ(history.size(), 1u);
      EXPECT_EQ(history[0].reason, "submitted");
      EXPECT_EQ(history[0].at, Time::FromMillis(2000));
    }
    EXPECT_FALSE(store_->GetJob(JobId(2503))->has_value());
    EXPECT_TRUE(HistoryOk(JobId(2503)).empty());

    std::vector<api::JobRecord> all = ListOk({});
    ASSERT_EQ(all.size(), 2502u);
    for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i].id, JobId(static_cast<int64_t>(i) + 1));
    EXPECT_EQ(api::ToJson(all[1 + 1500]), api::ToJson(tasks[1500]));
    JobFilter live;
    live.include_terminal = false;
    EXPECT_EQ(ListOk(live).size(), 2502u);
    JobFilter vision;
    vision.team = "vision";
    EXPECT_EQ(Ids(ListOk(vision)), (std::vector<int64_t>{2502}));
    JobFilter nlp;
    nlp.team = "nlp";
    EXPECT_EQ(ListOk(nlp).size(), 2501u);
    JobFilter late;
    late.since = Time::FromMillis(2500);
    EXPECT_EQ(Ids(ListOk(late)), (std::vector<int64_t>{2502}));
    JobFilter page;
    page.limit = 3;
    EXPECT_EQ(Ids(ListOk(page)), (std::vector<int64_t>{2502, 2501, 2500}));
    page.before = JobId(2500);
    std::vector<api::JobRecord> next = ListOk(page);
    EXPECT_EQ(Ids(next), (std::vector<int64_t>{2499, 2498, 2497}));
    if (next.size() == 3) {
      EXPECT_EQ(api::ToJson(next[0]), api::ToJson(tasks[2497]));
    }
    page.before = JobId(3);
    EXPECT_EQ(Ids(ListOk(page)), (std::vector<int64_t>{2, 1}));
    Reopen();
  }
  auto more = SubmitOk({MakeSubmission("after")});
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(Ids(more[0].ids), (std::vector<int64_t>{2503}));
  // The same request id again names the array's ids and creates nothing.
  auto again = SubmitOk({MakeArray("sweep", 2500, "nlp", 9000)});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_FALSE(again[0].created);
  EXPECT_EQ(again[0].ids, out[1].ids);
  EXPECT_EQ(ListOk({}).size(), 2503u);
}

TEST_P(StateStoreTest, ASubmissionsAuditRecordNamesItsJobsAsRanges) {
  // Given a submission of one job and one of an array of 2,500 tasks, each with its audit record,
  // expect the records committed with them to name "job 1" and "jobs 2-2501 (2500)" (the same in
  // every store; not 2,500 ids in one record).
  Submission one = MakeSubmission("one", 1, "nlp", 1000);
  one.audit = Audit("alice", "job.submit", 1000);
  Submission sweep = MakeArray("sweep", 2500, "nlp", 2000);
  sweep.audit = Audit("alice", "job.submit", 2000);
  SubmitOk({one, sweep});
  auto log = store_->ListAudit({});
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->size(), 2u);
  EXPECT_EQ((*log)[0].object, "job 1");
  EXPECT_EQ((*log)[1].object, "jobs 2-2501 (2500)");
  EXPECT_EQ(api::JobsAuditObject({4, 5, 7, 8, 9, 11}), "jobs 4,5,7-9,11 (6)");
  EXPECT_EQ(api::JobsAuditObject({4, 5}), "jobs 4,5");
}

TEST_P(StateStoreTest, ABatchThatChangesOneJobTwiceAndManyTasksKeepsTheirOrder) {
  // Given a job and a 40-task array, and one batch that starts the job and then runs it (two
  // updates of one job, with memory), and cancels 30 tasks (twice one of them, the same
  // transition: stored once), expect the job's record to be the later one with both transitions
  // in order and its memory, each cancelled task cancelled with one transition after "submitted",
  // the other ten as submitted, and the live listing to hold the job and the ten, after a reopen
  // too; then memories alone, one task's twice in a batch, to keep the last.
  auto out = SubmitOk({MakeSubmission("one"), MakeArray("sweep", 40, "nlp", 1000)});
  ASSERT_EQ(out.size(), 2u);
  api::JobRecord job = out[0].jobs[0];
  std::vector<api::JobRecord> tasks = out[1].jobs;
  ASSERT_EQ(tasks.size(), 40u);
  api::JobRecord starting = job;
  starting.state = api::JobState::kStarting;
  starting.attempt = 1;
  api::JobRecord running = starting;
  running.state = api::JobState::kRunning;
  std::vector<JobUpdate> batch;
  batch.push_back({starting, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kStarting, "placed"}});
  for (int i = 0; i < 30; ++i) {
    api::JobRecord c = tasks[i];
    c.state = api::JobState::kCancelled;
    batch.push_back({c, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kCancelled, "cancelled"}});
  }
  batch.push_back(batch[5]);  // the same change again
  batch.push_back({running, {Time::FromMillis(2001), api::JobState::kStarting, api::JobState::kRunning, "started"}});
  batch.back().memory = SampleMemory(3);
  ASSERT_TRUE(store_->Update(batch).ok());
  for (int reopen = 0; reopen < 2; ++reopen) {
    SCOPED_TRACE(reopen == 0 ? "as written" : "after a reopen");
    EXPECT_EQ(api::ToJson(GetOk(job.id)), api::ToJson(running));
    auto history = HistoryOk(job.id);
    ASSERT_EQ(history.size(), 3u);
    EXPECT_EQ(history[1].to, api::JobState::kStarting);
    EXPECT_EQ(history[2].to, api::JobState::kRunning);
    EXPECT_EQ(history[2].reason, "started");
    for (int i = 0; i < 40; ++i) {
      EXPECT_EQ(GetOk(tasks[i].id).state, i < 30 ? api::JobState::kCancelled : api::JobState::kPending) << i;
      auto h = HistoryOk(tasks[i].id);
      ASSERT_EQ(h.size(), i < 30 ? 2u : 1u) << i;
      EXPECT_EQ(h[0].reason, "submitted");
    }
    auto memory = store_->ListJobMemory();
    ASSERT_TRUE(memory.ok());
    EXPECT_EQ(*memory, (std::vector<JobMemoryRecord>{{job.id, SampleMemory(3)}}));
    JobFilter live;
    live.include_terminal = false;
    std::vector<int64_t> want{job.id.value()};
    for (int i = 30; i < 40; ++i) want.push_back(tasks[i].id.value());
    EXPECT_EQ(Ids(ListOk(live)), want);
    Reopen();
  }
  // Memories alone, one task's twice in a batch: the last one is kept; the tasks stay as submitted.
  ASSERT_TRUE(store_
                  ->SaveJobMemory({{tasks[31].id, SampleMemory(1)},
                                   {tasks[32].id, SampleMemory(2)},
                                   {tasks[31].id, SampleMemory(4)}})
                  .ok());
  auto memory = store_->ListJobMemory();
  ASSERT_TRUE(memory.ok());
  EXPECT_EQ(*memory, (std::vector<JobMemoryRecord>{
                         {job.id, SampleMemory(3)}, {tasks[31].id, SampleMemory(4)}, {tasks[32].id, SampleMemory(2)}}));
  EXPECT_EQ(api::ToJson(GetOk(tasks[31].id)), api::ToJson(tasks[31]));
  EXPECT_EQ(HistoryOk(tasks[31].id).size(), 1u);
}

TEST_P(StateStoreTest, BriefsGiveTheTeamAndStateOfJobsAndTasksAndLeaveOutIdsOfNoJob) {
  // Given a job of team vision that ended and a 40-task array of nlp with one task cancelled,
  // expect the briefs of the job, the cancelled task and a task still stored in its array (pending),
  // in the order asked, and nothing for ids of no job (before, between and after them).
  auto out = SubmitOk({MakeSubmission("one", 1, "vision"), MakeArray("sweep", 40, "nlp", 1000)});
  api::JobRecord job = out[0].jobs[0];
  std::vector<api::JobRecord> tasks = out[1].jobs;
  job.state = api::JobState::kSucceeded;
  api::JobRecord task = tasks[3];
  task.state = api::JobState::kCancelled;
  ASSERT_TRUE(store_
                  ->Update({{job, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kSucceeded, "done"}},
                            {task, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kCancelled, "x"}}})
                  .ok());
  auto briefs = store_->GetJobBriefs({JobId(999), tasks[10].id, job.id, JobId(0), task.id, JobId(42)});
  ASSERT_TRUE(briefs.ok()) << briefs.status().ToString();
  ASSERT_EQ(briefs->size(), 3u);
  EXPECT_EQ((*briefs)[0].id, tasks[10].id);
  EXPECT_EQ((*briefs)[0].team, "nlp");
  EXPECT_EQ((*briefs)[0].state, api::JobState::kPending);
  EXPECT_EQ((*briefs)[1].id, job.id);
  EXPECT_EQ((*briefs)[1].team, "vision");
  EXPECT_EQ((*briefs)[1].state, api::JobState::kSucceeded);
  EXPECT_EQ((*briefs)[2].id, task.id);
  EXPECT_EQ((*briefs)[2].state, api::JobState::kCancelled);
}

TEST_P(StateStoreTest, TasksOfALargeArrayChangeOneAtATime) {
  // Given a 40-task array, one task started, one given the scheduler's memory alone and one
  // cancelled, expect each changed task read back changed (with its whole history) and every
  // other task as submitted, each id listed once, after a reopen too; an update naming an id past
  // the array fails and changes nothing; once every task has ended, no job is live.
  auto out = SubmitOk({MakeArray("sweep", 40, "nlp", 1000)});
  ASSERT_EQ(out.size(), 1u);
  std::vector<api::JobRecord> tasks = out[0].jobs;
  ASSERT_EQ(tasks.size(), 40u);
  api::JobRecord started = tasks[7];
  started.state = api::JobState::kStarting;
  started.attempt = 1;
  started.reason = "placed on node-a gpus 0-1";
  started.placement = model::Placement{"H100", {{NodeId(1), {0, 1}, 1000, 0, 0}}};
  JobUpdate start{started, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kStarting, started.reason}};
  start.memory = SampleMemory(10);
  ASSERT_TRUE(store_->Update({start}).ok());
  ASSERT_TRUE(store_->SaveJobMemory({{tasks[20].id, SampleMemory(20)}}).ok());
  api::JobRecord cancelled = tasks[39];
  cancelled.state = api::JobState::kCancelled;
  cancelled.reason = "cancelled by alice";
  ASSERT_TRUE(store_
                  ->Update({{cancelled,
                             {Time::FromMillis(3000), api::JobState::kPending, api::JobState::kCancelled, "cancelled"}}})
                  .ok());
  // A batch whose last update names an id past the array changes none of its tasks either.
  api::JobRecord ghost = tasks[0];
  ghost.id = JobId(41);
  api::JobRecord also = tasks[8];
  also.state = api::JobState::kRunning;
  Status s = store_->Update({{also, {Time::FromMillis(4000), api::JobState::kPending, api::JobState::kRunning, "x"}},
                             {ghost, {Time::FromMillis(4000), api::JobState::kPending, api::JobState::kRunning, "x"}}});
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_EQ(store_->SaveJobMemory({{tasks[9].id, SampleMemory(9)}, {JobId(41), SampleMemory(41)}}).code(),
            StatusCode::kNotFound);

  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "as written" : "after a reopen");
    EXPECT_EQ(api::ToJson(GetOk(started.id)), api::ToJson(started));
    auto history = HistoryOk(started.id);
    ASSERT_EQ(history.size(), 2u);
    EXPECT_EQ(history[0].reason, "submitted");
    EXPECT_EQ(history[0].at, Time::FromMillis(1000));
    EXPECT_EQ(history[1].to, api::JobState::kStarting);
    EXPECT_EQ(api::ToJson(GetOk(tasks[20].id)), api::ToJson(tasks[20]));
    EXPECT_EQ(HistoryOk(tasks[20].id).size(), 1u);
    EXPECT_EQ(GetOk(cancelled.id).state, api::JobState::kCancelled);
    EXPECT_EQ(api::ToJson(GetOk(tasks[8].id)), api::ToJson(tasks[8]));
    EXPECT_EQ(HistoryOk(tasks[8].id).size(), 1u);
    EXPECT_EQ(HistoryOk(tasks[9].id).size(), 1u);
    EXPECT_FALSE(store_->GetJob(JobId(41))->has_value());
    auto memory = store_->ListJobMemory();
    ASSERT_TRUE(memory.ok()) << memory.status().ToString();
    EXPECT_EQ(*memory,
              (std::vector<JobMemoryRecord>{{started.id, SampleMemory(10)}, {tasks[20].id, SampleMemory(20)}}));
    std::vector<api::JobRecord> all = ListOk({});
    ASSERT_EQ(all.size(), 40u);
    for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].id, tasks[i].id);
    EXPECT_EQ(all[7].state, api::JobState::kStarting);
    JobFilter live;
    live.include_terminal = false;
    EXPECT_EQ(ListOk(live).size(), 39u);
    JobFilter page;
    page.limit = 2;
    EXPECT_EQ(Ids(ListOk(page)), (std::vector<int64_t>{40, 39}));
    EXPECT_EQ(ListOk(page)[0].state, api::JobState::kCancelled);
    // A page across a task with its own row, between tasks without: 9, 8 (started), 7.
    page.limit = 3;
    page.before = JobId(10);
    std::vector<api::JobRecord> across = ListOk(page);
    EXPECT_EQ(Ids(across), (std::vector<int64_t>{9, 8, 7}));
    if (across.size() == 3) {
      EXPECT_EQ(across[0].state, api::JobState::kPending);
      EXPECT_EQ(api::ToJson(across[1]), api::ToJson(started));
      EXPECT_EQ(api::ToJson(across[2]), api::ToJson(tasks[6]));
    }
    Reopen();
  }

  std::vector<JobUpdate> end_all;
  for (const api::JobRecord& listed : ListOk({})) {
    if (api::IsTerminal(listed.state)) continue;
    api::JobRecord done = listed;
    done.state = api::JobState::kCancelled;
    end_all.push_back({done, {Time::FromMillis(5000), listed.state, api::JobState::kCancelled, "cancelled"}});
  }
  EXPECT_EQ(end_all.size(), 39u);
  ASSERT_TRUE(store_->Update(end_all).ok());
  Reopen();
  JobFilter live;
  live.include_terminal = false;
  EXPECT_TRUE(ListOk(live).empty());
  EXPECT_EQ(ListOk({}).size(), 40u);
  EXPECT_TRUE(store_->ListJobMemory()->empty());
  EXPECT_EQ(HistoryOk(tasks[3].id).size(), 2u);
}

TEST_P(StateStoreTest, LivePagesSkipTheEndedTasksOfAnArray) {
  // Given a 300-task array whose newest 150 tasks were cancelled, expect a page of the 5 newest
  // live jobs to be the tasks 150..146 (past 150 ended tasks, read in more than one page of
  // ids), the page before 100 to be 99..95, and every live job to be the first 150 in order.
  auto out = SubmitOk({MakeArray("sweep", 300, "nlp", 1000)});
  ASSERT_EQ(out.size(), 1u);
  std::vector<JobUpdate> cancel;
  for (size_t i = 150; i < 300; ++i) {
    api::JobRecord done = out[0].jobs[i];
    done.state = api::JobState::kCancelled;
    cancel.push_back({done, {Time::FromMillis(2000), api::JobState::kPending, api::JobState::kCancelled, "cancelled"}});
  }
  ASSERT_TRUE(store_->Update(cancel).ok());
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "as written" : "after a reopen");
    JobFilter live;
    live.include_terminal = false;
    live.limit = 5;
    EXPECT_EQ(Ids(ListOk(live)), (std::vector<int64_t>{150, 149, 148, 147, 146}));
    live.before = JobId(100);
    EXPECT_EQ(Ids(ListOk(live)), (std::vector<int64_t>{99, 98, 97, 96, 95}));
    JobFilter all_live;
    all_live.include_terminal = false;
    std::vector<api::JobRecord> listed = ListOk(all_live);
    ASSERT_EQ(listed.size(), 150u);
    for (size_t i = 0; i < listed.size(); ++i) EXPECT_EQ(listed[i].id, out[0].jobs[i].id);
    JobFilter newest;
    newest.limit = 3;
    EXPECT_EQ(Ids(ListOk(newest)), (std::vector<int64_t>{300, 299, 298}));
    Reopen();
  }
}

TEST_P(StateStoreTest, JobsOfOneSubmissionThatDifferBeyondTheirArrayFieldsAreEachKept) {
  // Given a submission of 20 jobs whose priorities differ (not an array's tasks), expect each
  // read back as given.
  Submission mixed = MakeArray("mixed", 20, "nlp", 1000);
  for (int i = 0; i < 20; ++i) mixed.jobs[i].request.spec.priority = i % 3;
  auto out = SubmitOk({mixed});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].jobs.size(), 20u);
  Reopen();
  std::vector<api::JobRecord> all = ListOk({});
  ASSERT_EQ(all.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(all[i].request.spec.priority, i % 3);
    EXPECT_EQ(api::ToJson(all[i]), api::ToJson(out[0].jobs[i]));
  }
}

TEST_P(StateStoreTest, EndedCostByTeamSumsOnlyJobsThatEnded) {
  // Given jobs of three teams with costs, some ended (succeeded, failed, cancelled) and one still
  // running with a cost, expect the sums per team of the ended ones only; a team whose ended jobs
  // cost nothing is absent; the sums survive reopening.
  auto out = SubmitOk({MakeSubmission("1", 1, "nlp"), MakeSubmission("2", 1, "nlp"), MakeSubmission("3", 1, "vision"),
                       MakeSubmission("4", 1, "nlp"), MakeSubmission("5", 1, "free"), MakeSubmission("6", 1, "vision")});
  EXPECT_TRUE(store_->EndedCostByTeam()->empty());
  const std::pair<int, std::pair<api::JobState, int64_t>> ends[] = {
      {0, {api::JobState::kSucceeded, 1'500'000}}, {1, {api::JobState::kFailed, 250}},
      {2, {api::JobState::kCancelled, 7}},         {3, {api::JobState::kRunning, 1'000'000'000}},
      {4, {api::JobState::kSucceeded, 0}},         {5, {api::JobState::kSucceeded, 4'000'000'000'000}}};
  std::vector<JobUpdate> updates;
  for (const auto& [index, end] : ends) {
    api::JobRecord job = GetOk(out[index].ids[0]);
    job.state = end.first;
    job.cost_micros = end.second;
    updates.push_back({job, {Time::FromMillis(5000), api::JobState::kPending, end.first, "end"}});
  }
  ASSERT_TRUE(store_->Update(updates).ok());
  const std::map<std::string, int64_t> want = {{"nlp", 1'500'250}, {"vision", 4'000'000'000'007}};
  EXPECT_EQ(*store_->EndedCostByTeam(), want);
  Reopen();
  EXPECT_EQ(*store_->EndedCostByTeam(), want);
}

TEST_P(StateStoreTest, UpsertNodeKeepsTheIdOfAName) {
  // Given two nodes registered and the first registering again with new details (and a wrong id),
  // expect it to keep its id and get the new details.
  api::NodeRecord a;
  a.name = "node-a";
  a.spec.name = "node-a";
  a.spec.gpus = 8;
  a.spec.gpu_model = "H100";
  a.gpus = {{0, "GPU-a0", "NVIDIA H100", 81'559}};
  a.address = "10.0.0.1";
  auto id_a = store_->UpsertNode(a);
  ASSERT_TRUE(id_a.ok()) << id_a.status().ToString();
  api::NodeRecord b = a;
  b.name = "node-b";
  auto id_b = store_->UpsertNode(b);
  ASSERT_TRUE(id_b.ok());
  EXPECT_EQ(*id_a, NodeId(1));
  EXPECT_EQ(*id_b, NodeId(2));
  a.id = NodeId(77);
  a.address = "10.0.0.9";
  a.state = api::NodeState::kDraining;
  auto again = store_->UpsertNode(a);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, NodeId(1));
  Reopen();
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].id, NodeId(1));
  EXPECT_EQ((*nodes)[0].name, "node-a");
  EXPECT_EQ((*nodes)[0].address, "10.0.0.9");
  EXPECT_EQ((*nodes)[0].state, api::NodeState::kDraining);
  EXPECT_EQ((*nodes)[0].gpus.size(), 1u);
  EXPECT_EQ((*nodes)[1].id, NodeId(2));
  api::NodeRecord unnamed;
  EXPECT_EQ(store_->UpsertNode(unnamed).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(StateStoreTest, TokensArePutFoundReplacedAndListed) {
  // Given two tokens and one replaced (revoked) by hash, expect lookups by hash to see the latest
  // and the list to hold both, ordered by hash.
  api::TokenRecord user{"bbbb", api::TokenKind::kUser, "alice", "user", "nlp", Time::FromMillis(1), false, std::nullopt, std::nullopt, ""};
  api::TokenRecord agent{"aaaa", api::TokenKind::kAgent, "node-a", "agent", "", Time::FromMillis(2), false, std::nullopt, std::nullopt, ""};
  ASSERT_TRUE(store_->PutToken(user).ok());
  ASSERT_TRUE(store_->PutToken(agent).ok());
  user.revoked = true;
  ASSERT_TRUE(store_->PutToken(user).ok());
  Reopen();
  auto found = store_->FindToken("bbbb");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_TRUE((*found)->revoked);
  EXPECT_EQ((*found)->subject, "alice");
  EXPECT_EQ((*found)->team, "nlp");
  auto none = store_->FindToken("cccc");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto all = store_->ListTokens();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].hash, "aaaa");
  EXPECT_EQ((*all)[0].kind, api::TokenKind::kAgent);
  EXPECT_EQ((*all)[1].hash, "bbbb");
  EXPECT_EQ(store_->PutToken(api::TokenRecord{}).code(), StatusCode::kInvalidArgument);
}

TEST_P(StateStoreTest, MetaHoldsSettingsAndTheSchemaVersion) {
  // Given settings written and overwritten, expect the latest values back; expect the schema
  // version to read 4 and to be off limits to callers.
  ASSERT_TRUE(store_->SetMeta("cluster_id", "c-1").ok());
  ASSERT_TRUE(store_->SetMeta("cluster_id", "c-2").ok());
  ASSERT_TRUE(store_->SetMeta("next_master_port", "29500").ok());
  Reopen();
  auto id = store_->GetMeta("cluster_id");
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, std::optional<std::string>("c-2"));
  EXPECT_EQ(*store_->GetMeta("next_master_port"), std::optional<std::string>("29500"));
  EXPECT_EQ(*store_->GetMeta("absent"), std::nullopt);
  EXPECT_EQ(*store_->GetMeta("schema_version"), std::optional<std::string>("8"));
  EXPECT_EQ(store_->SetMeta("schema_version", "8").code(), StatusCode::kInvalidArgument);
}


TEST_P(StateStoreTest, AuditRecordsCommitWithTheirChangeOrNotAtAll) {
  // Given a record attached to a token write, expect both stored; given one attached to a write
  // that fails validation, expect neither stored and the record not carried to the next write.
  store_->AttachAudit({Audit("alice", "token.create", 10)});
  api::TokenRecord t;
  t.hash = "abc";
  t.subject = "alice";
  t.role = "user";
  ASSERT_TRUE(store_->PutToken(t).ok());
  store_->AttachAudit({Audit("bob", "token.create", 20)});
  api::TokenRecord bad;  // no hash: refused
  EXPECT_FALSE(store_->PutToken(bad).ok());
  ASSERT_TRUE(store_->SetMeta("k", "v").ok());
  ASSERT_TRUE(store_->AppendAudit({Audit("carol", "auth.login", 30)}).ok());
  Reopen();
  auto log = store_->ListAudit({});
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->size(), 2u);
  EXPECT_EQ((*log)[0].subject, "alice");
  EXPECT_EQ((*log)[0].seq, 1);
  EXPECT_EQ((*log)[1].subject, "carol");
  EXPECT_EQ((*log)[1].verb, "auth.login");
  EXPECT_EQ((*log)[0].request_id, "r");
}

TEST_P(StateStoreTest, AuditFiltersBySubjectVerbPrefixTimeAndCursor) {
  // Given four records, expect the filters to pick the matching ones, oldest first.
  ASSERT_TRUE(store_->AppendAudit({Audit("a", "job.submit", 1), Audit("b", "job.cancel", 2),
                                   Audit("a", "token.create", 3), Audit("a", "job.cancel", 4)})
                  .ok());
  AuditFilter f;
  f.subject = "a";
  f.verb = "job.";
  auto r = store_->ListAudit(f);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].at.millis(), 1);
  EXPECT_EQ((*r)[1].at.millis(), 4);
  AuditFilter g;
  g.since = Time::FromMillis(2);
  g.limit = 2;
  auto page = store_->ListAudit(g);
  ASSERT_EQ(page->size(), 2u);
  g.after_seq = page->back().seq;
  auto next = store_->ListAudit(g);
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ(next->front().at.millis(), 4);
  AuditFilter exact;
  exact.verb = "job";
  EXPECT_TRUE(store_->ListAudit(exact)->empty()) << "a verb without a trailing dot matches exactly";
}

TEST_P(StateStoreTest, ConcurrentSubmitsGetDistinctAscendingIds) {
  // Given four threads each submitting 25 requests, expect 100 distinct ids, 1..100, and each
  // thread's ids ascending in its own order.
  constexpr int kThreads = 4;
  constexpr int kEach = 25;
  std::vector<std::vector<int64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto r = store_->Submit({MakeSubmission("t" + std::to_string(t) + "-" + std::to_string(i))});
        if (r.ok()) seen[t].push_back((*r)[0].ids[0].value());
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<int64_t> all;
  for (const auto& ids : seen) {
    EXPECT_EQ(ids.size(), static_cast<size_t>(kEach));
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    all.insert(ids.begin(), ids.end());
  }
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kEach);
}

TEST_P(StateStoreTest, LeaderThatRenewsKeepsItsTokenAndWrites) {
  // Given a store that takes the leader lease and renews it, expect it to hold the lease each
  // time with the same token, and its writes to succeed; a lease that is not positive is refused.
  auto first = store_->AcquireLeadership({"http://127.0.0.1:1", "http://127.0.0.1:2"}, Duration::Minutes(1));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->held);
  EXPECT_GT(first->token, 0);
  EXPECT_EQ(first->holder, "http://127.0.0.1:1");
  EXPECT_EQ(first->agent_url, "http://127.0.0.1:2");
  EXPECT_GT(first->expires_in, Duration::Zero());
  SubmitOk({MakeSubmission("a")});
  for (int i = 0; i < 3; ++i) {
    auto again = store_->AcquireLeadership({"http://127.0.0.1:1", "http://127.0.0.1:2"}, Duration::Minutes(1));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_TRUE(again->held);
    EXPECT_EQ(again->token, first->token);
  }
  SubmitOk({MakeSubmission("b")});
  ASSERT_TRUE(store_->SetMeta("cluster_id", "c-1").ok());
  EXPECT_EQ(ListOk({}).size(), 2u);
  EXPECT_EQ(store_->AcquireLeadership({"x", ""}, Duration::Zero()).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(StateStoreTest, ReleasedLeaderMayTakeTheLeaseAgain) {
  // Given a leader that releases its lease, expect the release to succeed and the same store to
  // hold the lease again when it asks (with one controller, as SQLite, releasing changes nothing).
  const LeaderAddress self{"http://127.0.0.1:1", "http://127.0.0.1:2"};
  ASSERT_TRUE(store_->ReleaseLeadership(self).ok());  // never held: nothing to give up
  auto first = store_->AcquireLeadership(self, Duration::Minutes(1));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(store_->ReleaseLeadership(self).ok());
  auto again = store_->AcquireLeadership(self, Duration::Minutes(1));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->held);
  EXPECT_GE(again->token, first->token);
  SubmitOk({MakeSubmission("after-release")});
}

// The PostgreSQL instances (".../Postgres") run in one process, so that they share one server:
// src/store/CMakeLists.txt registers them with ctest as the single test store_test.postgres.
INSTANTIATE_TEST_SUITE_P(Stores, StateStoreTest,
                         ::testing::Values(StoreKind::kMemory, StoreKind::kSqlite, StoreKind::kPostgres),
                         [](const ::testing::TestParamInfo<StoreKind>& info) {
                           switch (info.param) {
                             case StoreKind::kMemory: return "Memory";
                             case StoreKind::kSqlite: return "Sqlite";
                             case StoreKind::kPostgres: return "Postgres";
                           }
                           return "Unknown";
                         });


}  // namespace
}  // namespace gpufleet::store
