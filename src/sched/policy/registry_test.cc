#include "sched/policy/registry.h"

#include <set>

#include <gtest/gtest.h>

#include "sched/policy/las.h"

namespace gpufleet::sched {
namespace {

using Options = std::map<std::string, std::string>;

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class RegistryTest : public ::testing::Test {
 protected:
  static PolicyConfig Build(const std::string& name, const Options& opts = {}) {
    Result<PolicyConfig> cfg = MakePolicies(name, opts);
    EXPECT_TRUE(cfg.ok()) << name << ": " << cfg.status().ToString();
    if (!cfg.ok()) return PolicyConfig{};
    return std::move(cfg).value();
  }
  static Status BuildError(const std::string& name, const Options& opts) {
    Result<PolicyConfig> cfg = MakePolicies(name, opts);
    EXPECT_FALSE(cfg.ok()) << name;
    return cfg.status();
  }
};

TEST_F(RegistryTest, EveryTableEntryBuildsWithItsDefaults) {
  // Given each name in the policy table, expect complete policies whose name and default
  // backfill match the table's promise, with preemption on.
  const std::map<std::string, std::string> expected = {
      {"fifo", "fifo+off/topology"},           {"backfill", "fifo+easy/topology"},
      {"priority", "priority+easy/topology"},  {"fair-share", "fair-share+easy/topology"},
      {"las", "las+greedy/topology"},          {"sjf", "sjf+easy/topology"},
      {"srtf", "srtf+greedy/topology"},
  };
  std::set<std::string> seen;
  for (const PolicyInfo& info : PolicyTable()) {
    EXPECT_FALSE(info.help.empty()) << info.name;
    seen.insert(info.name);
    PolicyConfig cfg = Build(info.name);
    ASSERT_NE(cfg.policies.queue, nullptr) << info.name;
    ASSERT_NE(cfg.policies.placement, nullptr) << info.name;
    ASSERT_TRUE(expected.count(info.name)) << "untested policy " << info.name;
    EXPECT_EQ(cfg.policies.Name(), expected.at(info.name));
    EXPECT_TRUE(cfg.policies.options.preemption) << info.name;
    EXPECT_EQ(cfg.policies.options.max_preemption_attempts, 16) << info.name;
    EXPECT_TRUE(cfg.team_quota_gpus.empty());
  }
  EXPECT_EQ(seen.size(), expected.size());
  EXPECT_EQ(PolicyTable().front().name, "fifo");
}

TEST_F(RegistryTest, UnknownPolicyErrorListsTheKnownOnes) {
  // Given an unknown name, expect invalid-argument listing every policy in table order.
  Status s = BuildError("round-robin", {});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "unknown policy 'round-robin' (known: fifo, backfill, priority, fair-share, las, sjf, srtf)");
}

TEST_F(RegistryTest, UnknownOptionErrorListsTheCommonAndThePolicysOptions) {
  // Given an option no policy takes, expect an error listing the common options plus the
  // policy's own; an option of another policy (aging for las) is unknown too.
  Status s = BuildError("las", {{"speed", "3"}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "unknown option 'speed' for policy las (known: backfill, preempt, max_preempt_attempts, min_run, "
            "victims, hot, fit, quota.TEAM, thresholds=GPU_S,GPU_S,... starve=FACTOR order=submit|entry)");
  Status aging = BuildError("las", {{"aging", "1h"}});
  EXPECT_TRUE(Contains(aging.message(), "unknown option 'aging' for policy las")) << aging.message();
  Status fifo = BuildError("fifo", {{"thresholds", "1,2"}});
  EXPECT_EQ(fifo.message(),
            "unknown option 'thresholds' for policy fifo (known: backfill, preempt, max_preempt_attempts, "
            "min_run, victims, hot, fit, quota.TEAM, order=submit|gpus)");
  Status prio = BuildError("priority", {{"x", "1"}});
  EXPECT_TRUE(Contains(prio.message(), "aging=DURATION")) << prio.message();
}

TEST_F(RegistryTest, ParityOptionsReachThePoliciesAndBadValuesAreNamed) {
  // Given the options that reproduce Tiresias' simulator (victims=worst-rank, fit=first,
  // order=entry for las), expect each applied and named in the policy's name where it shows;
  // given a bad value, or order= for a policy that has no such choice, expect an error naming it.
  PolicyConfig tiresias = Build("las", {{"victims", "worst-rank"}, {"fit", "first"}, {"order", "entry"}});
  EXPECT_EQ(tiresias.policies.options.victims, VictimOrder::kWorstRank);
  EXPECT_EQ(tiresias.policies.Name(), "las+greedy/topology:first-fit");
  EXPECT_EQ(Build("las").policies.options.victims, VictimOrder::kLeastWorkLost);
  EXPECT_EQ(Build("priority", {{"victims", "least-work-lost"}}).policies.options.victims,
            VictimOrder::kLeastWorkLost);
  EXPECT_EQ(BuildError("las", {{"victims", "oldest"}}).message(),
            "victims must be least-work-lost or worst-rank, got 'oldest'");
  EXPECT_EQ(BuildError("fifo", {{"fit", "worst"}}).message(), "fit must be best or first, got 'worst'");
  EXPECT_EQ(BuildError("las", {{"order", "random"}}).message(), "order must be submit or entry, got 'random'");
  EXPECT_EQ(BuildError("fifo", {{"order", "entry"}}).message(), "order must be submit or gpus, got 'entry'");
  EXPECT_TRUE(Contains(BuildError("sjf", {{"order", "gpus"}}).message(), "unknown option 'order' for policy sjf"));
}

TEST_F(RegistryTest, BackfillOptionOverridesThePolicyDefault) {
  // Given backfill=easy for las, off for priority and greedy for fifo, expect each applied;
  // "none" means off; other words are errors.
  EXPECT_EQ(Build("las", {{"backfill", "easy"}}).policies.options.backfill, BackfillMode::kEasy);
  EXPECT_EQ(Build("priority", {{"backfill", "off"}}).policies.options.backfill, BackfillMode::kOff);
  EXPECT_EQ(Build("priority", {{"backfill", "none"}}).policies.options.backfill, BackfillMode::kOff);
  EXPECT_EQ(Build("fifo", {{"backfill", "greedy"}}).policies.options.backfill, BackfillMode::kGreedy);
  Status bad = BuildError("fifo", {{"backfill", "aggressive"}});
  EXPECT_EQ(bad.message(), "backfill must be off, easy or greedy, got 'aggressive'");
}

TEST_F(RegistryTest, PreemptOptionTurnsPreemptionOff) {
  // Given preempt=false (or no/0/off), expect scheduler preemption off; preempt=yes keeps it;
  // a word that is not a boolean is an error naming the option.
  for (const char* off : {"false", "no", "0", "off", "FALSE"}) {
    EXPECT_FALSE(Build("las", {{"preempt", off}}).policies.options.preemption) << off;
  }
  EXPECT_TRUE(Build("priority", {{"preempt", "yes"}}).policies.options.preemption);
  Status bad = BuildError("priority", {{"preempt", "maybe"}});
  EXPECT_EQ(bad.message(), "preempt must be true or false, got 'maybe'");
}

TEST_F(RegistryTest, MaxPreemptAttemptsIsBounded) {
  // Given max_preempt_attempts=3, expect 3; negative or non-numeric values are errors.
  EXPECT_EQ(Build("priority", {{"max_preempt_attempts", "3"}}).policies.options.max_preemption_attempts, 3);
  EXPECT_EQ(Build("priority", {{"max_preempt_attempts", "0"}}).policies.options.max_preemption_attempts, 0);
  EXPECT_FALSE(MakePolicies("priority", {{"max_preempt_attempts", "-1"}}).ok());
  EXPECT_FALSE(MakePolicies("priority", {{"max_preempt_attempts", "100001"}}).ok());
  EXPECT_FALSE(MakePolicies("priority", {{"max_preempt_attempts", "many"}}).ok());
}

TEST_F(RegistryTest, QuotaOptionsBecomeTeamQuotas) {
  // Given quota.a=8 and quota.ml-research=16, expect both teams' quotas in whole GPUs; a
  // negative or non-numeric quota is an error naming the option.
  PolicyConfig cfg = Build("fair-share", {{"quota.a", "8"}, {"quota.ml-research", "16"}});
  EXPECT_EQ(cfg.team_quota_gpus, (std::map<std::string, int64_t>{{"a", 8}, {"ml-research", 16}}));
  Status bad = BuildError("fair-share", {{"quota.a", "eight"}});
  EXPECT_EQ(bad.message(), "quota.a must be a whole number of GPUs, got 'eight'");
  EXPECT_EQ(BuildError("fair-share", {{"quota.", "4"}}).message(),
            "quota.TEAM needs a team name after 'quota.', e.g. quota.vision=8");
  EXPECT_FALSE(MakePolicies("fair-share", {{"quota.a", "-1"}}).ok());
}

TEST_F(RegistryTest, HotOptionIsPassedToPlacementAndValidated) {
  // Given hot=90, expect policies to build; hot=500 is an error from the placement policy.
  EXPECT_NE(Build("fifo", {{"hot", "90"}}).policies.placement, nullptr);
  Status bad = BuildError("fifo", {{"hot", "500"}});
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.message(), "hot must be a temperature")) << bad.message();
}

TEST_F(RegistryTest, AgingMustBeADuration) {
  // Given aging=90m for priority, expect it to build; aging=soon is an error.
  EXPECT_NE(Build("priority", {{"aging", "90m"}}).policies.queue, nullptr);
  Status bad = BuildError("priority", {{"aging", "soon"}});
  EXPECT_EQ(bad.message(), "aging must be a duration such as 30m or 2h, got 'soon'");
}

TEST_F(RegistryTest, LasThresholdsAndStarveOptionsReachThePolicy) {
  // Given thresholds=100,200 and starve=0, expect a las policy with those queues and no
  // starvation promotion.
  PolicyConfig cfg = Build("las", {{"thresholds", "100,200"}, {"starve", "0"}});
  const auto* las = dynamic_cast<const LasPolicy*>(cfg.policies.queue.get());
  ASSERT_NE(las, nullptr);
  model::JobSpec spec;
  JobView v;
  v.spec = &spec;
  v.phase = JobPhase::kRunning;
  EXPECT_EQ(las->QueueOf(v, Time::FromSeconds(99)), 0);
  EXPECT_EQ(las->QueueOf(v, Time::FromSeconds(100)), 1);
  EXPECT_EQ(las->QueueOf(v, Time::FromSeconds(200)), 2);
  JobView waiting;
  waiting.spec = &spec;
  waiting.last_run = Duration::Seconds(1);
  EXPECT_EQ(las->NextRankChange(waiting, QueueContext{}), std::nullopt);
}

TEST_F(RegistryTest, LasThresholdsMustIncreaseAndBePositive) {
  // Given decreasing, zero or non-numeric thresholds, and a negative starve, expect errors.
  Status dec = BuildError("las", {{"thresholds", "200,100"}});
  EXPECT_EQ(dec.message(), "thresholds must be increasing positive GPU-seconds, got '200,100'");
  EXPECT_FALSE(MakePolicies("las", {{"thresholds", "0,100"}}).ok());
  EXPECT_FALSE(MakePolicies("las", {{"thresholds", "100,100"}}).ok());
  EXPECT_FALSE(MakePolicies("las", {{"thresholds", "a,b"}}).ok());
  EXPECT_FALSE(MakePolicies("las", {{"starve", "-1"}}).ok());
}

TEST_F(RegistryTest, ParsePolicyOptionsSplitsCommaSeparatedPairs) {
  // Given "a=1,b=2" and a separate "c = 3 ", expect three trimmed pairs.
  Result<Options> r = ParsePolicyOptions({"a=1,b=2", " c = 3 "});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (Options{{"a", "1"}, {"b", "2"}, {"c", "3"}}));
}

TEST_F(RegistryTest, ParsePolicyOptionsKeepsListValuesTogether) {
  // Given "thresholds=3250,7200" and "backfill=easy", expect the list kept as one value; empty
  // pieces are skipped.
  Result<Options> r = ParsePolicyOptions({"thresholds=3250,7200", "backfill=easy,"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (Options{{"backfill", "easy"}, {"thresholds", "3250,7200"}}));
  Result<Options> three = ParsePolicyOptions({"thresholds=10,20,30,starve=4"});
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(*three, (Options{{"starve", "4"}, {"thresholds", "10,20,30"}}));
}

TEST_F(RegistryTest, ParsePolicyOptionsGluesListItemsToTheKeyJustRead) {
  // Given a key that sorts after "thresholds" read first, expect the list continuation to stay
  // with thresholds.
  Result<Options> r = ParsePolicyOptions({"zone=1", "thresholds=100,200"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (Options{{"thresholds", "100,200"}, {"zone", "1"}}));
}

TEST_F(RegistryTest, ParsePolicyOptionsRefusesAKeyGivenTwice) {
  // Given order twice (in two items, or in one), expect an error naming both; different keys
  // and a list value are fine.
  Result<Options> twice = ParsePolicyOptions({"order=gpus", "order=submit"});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "policy option order is given twice (order=gpus and order=submit); give it once");
  EXPECT_FALSE(ParsePolicyOptions({"thresholds=1,2,thresholds=3"}).ok());
  EXPECT_TRUE(ParsePolicyOptions({"thresholds=1,2", "order=gpus"}).ok());
}

TEST_F(RegistryTest, ParsePolicyOptionsRejectsItemsWithoutKeyOrValueForm) {
  // Given "novalue", a bare number first, and "=5", expect errors naming the bad item.
  Result<Options> novalue = ParsePolicyOptions({"novalue"});
  ASSERT_FALSE(novalue.ok());
  EXPECT_EQ(novalue.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(novalue.status().message(), "policy option 'novalue' is not of the form key=value");
  EXPECT_FALSE(ParsePolicyOptions({"5"}).ok());
  Result<Options> empty_key = ParsePolicyOptions({"=5"});
  ASSERT_FALSE(empty_key.ok());
  EXPECT_EQ(empty_key.status().message(), "policy option '=5' has an empty key");
  EXPECT_TRUE(ParsePolicyOptions({}).ok());
  EXPECT_TRUE(ParsePolicyOptions({}).value().empty());
}

TEST_F(RegistryTest, ParsedOptionsBuildPolicies) {
  // Given command-line items for las, expect them to parse and build.
  Result<Options> opts = ParsePolicyOptions({"thresholds=3250,7200", "backfill=easy", "quota.a=4"});
  ASSERT_TRUE(opts.ok());
  PolicyConfig cfg = Build("las", *opts);
  EXPECT_EQ(cfg.policies.Name(), "las+easy/topology");
  EXPECT_EQ(cfg.team_quota_gpus.at("a"), 4);
}

}  // namespace
}  // namespace gpufleet::sched
