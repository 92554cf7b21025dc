// Pool: the live controller's autoscaling loop. It runs the scheduler core's Autoscaler (the
// policy the simulator runs too) on the engine's pending queue and nodes, and carries its
// decisions out through a provider (provider/provider.h): rent = create an instance whose agent
// registers under the instance's name; release = take the node out of the engine, then delete
// the instance.
//
//   GF_ASSIGN_OR_RETURN(PoolConfig config, LoadPoolConfig("pool.yaml", catalog));
//   GF_ASSIGN_OR_RETURN(auto provider, provider::MakeProvider(config.provider));
//   Pool pool(config, std::move(provider), engine, store);
//   GF_RETURN_IF_ERROR(pool.Start(now));   // load the instance table, reconcile, adopt
//   pool.Tick(now);                        // every second or so (Run does it on a thread)
//
// Never leak an instance:
//   - the instance table (name, provider id, offer, jobs it was rented for) is stored in the
//     state store (meta key "pool.instances") before a provider call creates the instance, so a
//     controller that dies mid-create finds the name on restart;
//   - on Start and every `reconcile_interval`, the provider's List is the truth: an instance
//     whose name carries this pool's prefix but is not in the table is deleted (it leaked), a
//     table entry the provider no longer lists is dropped and its node released;
//   - an instance that dies or is interrupted takes its node out of the engine at once;
//   - agents rented by the local provider are started with --max-disconnected, so one whose
//     controller stays away stops its jobs and exits.
//
// Idle: an up node is idle while no job holds GPUs there and every GPU's utilisation is under
// `idle_gpu_util_below` percent; the Autoscaler releases it after `idle_duration`.
//
// Thread-safety: one thread calls Start and Tick (Run's thread); Instances() may be called from
// any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"
#include "controller/engine.h"
#include "cost/offer.h"
#include "model/gpu_catalog.h"
#include "provider/provider.h"
#include "sched/autoscaler.h"
#include "sched/clock.h"
#include "store/state_store.h"

namespace gpufleet::controller {

struct PoolConfig {
  provider::ProviderConfig provider;
  std::vector<sched::RentableOffer> offers;
  std::vector<std::map<std::string, std::string>> offer_labels;  // index-aligned with offers
  sched::PoolLimits limits;
  sched::AutoscalerOptions options;
  int idle_gpu_util_below = 5;                          // percent
  Duration reconcile_interval = Duration::Seconds(60);
  Duration tick = Duration::Seconds(1);
  std::string name_prefix = "gf";                       // instance names: <prefix>-<offer>-<n>
  // Every rented node must pass the acceptance burn-in before it takes work (docs/nodes.md); one
  // that fails is released at once and its offer avoided for failed_offer_backoff.
  bool burn_in = false;
};

// Reads a pool file (docs/providers.md has the reference):
//   provider: {kind: local, state_dir: ..., agent_command: [...], boot_delay: 5s, ...}
//   offers:
//     - {name: h100-spot, gpu: H100, gpus: 8, market: spot, price_per_hour: 30,
//        boot_estimate: 2m, zone: a, interruptions_per_hour: 0.05}
//     - catalog: {cloud: aws, region: us-east-1, instance_type: p4d.24xlarge, market: spot}
//       boot_estimate: 5m        # GPU, price and interruption rate from the offer catalog
//   min_nodes: 0
//   max_nodes: 16
//   max_gpus: 128
//   idle_duration: 10m
//   idle_gpu_util_below: 5
//   boot_timeout: 15m
//   max_rents_per_minute: 0
//   max_releases_per_minute: 0
//   spot_fallback_after_preemptions: 2
//   spot_fallback_after_wait: 30m
//   reconcile_interval: 1m
//   name_prefix: gf
//   burn_in: true            # rented nodes must pass the acceptance burn-in (docs/nodes.md)
// `substitutions` replace {key} anywhere under provider: (the server fills in {server},
// {join_token_file}, {gpufleet} and {data_dir}). `offers` is the price catalog that `catalog:`
// offers are taken from (null: such offers are an error). Errors name the file, line and field.
Result<PoolConfig> LoadPoolConfig(const std::string& path, const model::GpuCatalog& catalog,
                                  const std::map<std::string, std::string>& substitutions = {},
                                  const cost::OfferTable* offers = nullptr);
Result<PoolConfig> ParsePoolConfig(const std::string& yaml, const std::string& source,
                                   const model::GpuCatalog& catalog,
                                   const std::map<std::string, std::string>& substitutions = {},
                                   const cost::OfferTable* offers = nullptr);

// One instance the pool rented, as `gpufleet pool` shows it.
struct PoolInstance {
  std::string name;         // the node name
  std::string provider_id;  // empty while the create call has not answered
  std::string offer;
  std::string state;        // creating, booting, up, draining, releasing
  Time created;
  std::vector<JobId> for_jobs;
  std::string team;         // billed for the whole instance: the team of the job it was rented for
  int64_t price_micros_per_hour = 0;  // its offer's price when rented (0: not recorded)
  std::optional<Time> idle_since;
  std::string note;         // the last thing that happened to it
};

class Pool {
 public:
  Pool(PoolConfig config, std::unique_ptr<provider::Provider> provider, Engine& engine,
       store::StateStore& store, const sched::Clock& clock);
  ~Pool();

  // Loads the instance table and reconciles it with the provider. Call once, before Tick.
  Status Start();
  // One round: provider events, reconciliation when due, one autoscaler decision, its actions.
  void Tick();
  // Ticks every `tick` on its own thread until Stop.
  void Run() GF_EXCLUDES(run_mu_);
  void Stop() GF_EXCLUDES(run_mu_);

  std::vector<PoolInstance> Instances() const GF_EXCLUDES(mu_);
  const PoolConfig& config() const { return config_; }

 private:
  struct Entry {
    PoolInstance info;
    int offer = -1;
  };

  Status Save() GF_EXCLUDES(mu_);
  Status Reconcile(Time now);
  void HandleProviderEvents(Time now);
  void ReleaseNode(const std::string& name, const std::string& reason, Time now);
  void Rent(const sched::Rent& rent, const std::string& team, Time now);
  // Tells the engine which instances are billed to which team (Engine::ChargeNode): new ones
  // from their creation (or this controller's start), gone ones end.
  void SyncCharges();

  PoolConfig config_;
  std::unique_ptr<provider::Provider> provider_;
  Engine& engine_;
  store::StateStore& store_;
  const sched::Clock& clock_;
  sched::Autoscaler scaler_;
  Time last_reconcile_;
  int64_t next_serial_ = 0;

  // entries_ is read by Instances() (any thread); the rest is the ticking thread's alone.
  // Neither lock is held across a provider, store or engine call that waits.
  mutable Mutex mu_;
  std::map<std::string, Entry> entries_ GF_GUARDED_BY(mu_);  // by name
  std::map<std::string, Time> idle_since_;
  std::map<std::string, Time> drained_idle_since_;  // drained (or reclaimed) nodes without jobs, since when
  std::map<std::string, std::vector<std::string>> offer_environments_;  // offer -> what its nodes run
  std::set<std::string> charged_;  // instance names the engine bills to a team
  bool save_pending_ = false;      // the last save of the instance table failed
  Time started_;                   // when Start ran: charges of older instances count from here

  Mutex run_mu_;
  CondVar run_cv_;
  bool stopping_ GF_GUARDED_BY(run_mu_) = false;
};

}  // namespace gpufleet::controller
