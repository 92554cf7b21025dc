// The local provider: an emulated cloud on this machine, for the dev cluster, demos and tests.
//
// An instance is a record in `state_dir/instances/<id>.json` and, once booted, a process: the
// configured agent command, started in its own session (so it outlives the controller), writing
// to `state_dir/logs/<id>.log`. Everything the provider knows is in the state directory, so a
// new provider on the same directory (a restarted controller) sees the same instances.
//
// Life of an instance:
//   Create            record written, state booting.
//   Poll, boot due    (created + boot_delay) the agent command is spawned: running, kStarted.
//   Poll, process     exited on its own: terminated ("process exited"), kDied.
//   Poll, spot        interruption due: the AWS-format notice is published at the instance's
//                     notice_url (kSpotNotice); notice_lead later the process group is killed:
//                     terminated ("spot interruption"), kInterrupted.
//   Delete            booting: the record goes at once. running: SIGTERM to the process group,
//                     terminating; Poll sends SIGKILL after stop_grace and drops the record once
//                     the process is gone (kTerminated). terminated: the record goes.
//
// Spot interruptions (spot instances only; `after` and the hazard count from the start):
//   - hazard: with interruptions_per_hour > 0, each spot instance draws its interruption time
//     from an exponential distribution with that rate, from a generator seeded by `seed` and the
//     instance's name, so a seed and a name always give the same time, whatever the order of
//     creation;
//   - schedule: each entry interrupts the instance it names (a name, or a 0-based index into the
//     spot instances in creation order) `after` its start.
//   The earliest of these wins. The planned time is kept in the record, so a restart keeps it.
//
// Notice endpoint: an HTTP server on 127.0.0.1:notice_port (0: any free port) serving
//   GET /<instance_id>/latest/meta-data/spot/instance-action
// with 404 until a notice, then 200 {"action":"terminate","time":"<UTC, seconds>"}.
//
// Placeholders of agent_command, replaced anywhere inside an argument: {name} {gpus}
// {gpu_model} {market} {price_per_hour} (dollars, "2.1") {zone} {notice_url} {instance_id}
// {state_dir}.
//
// Thread-safety: as Provider (one owning thread); the notice endpoint runs its own thread.
// Destroying the provider stops the endpoint and leaves the instances running.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "provider/provider.h"

namespace gpufleet::provider {

// The placeholder names agent_command may use, without braces.
const std::vector<std::string>& LocalPlaceholders();

// Checks that every {word} in the template is a known placeholder; the message names the first
// unknown one.
Status CheckAgentCommand(const std::vector<std::string>& argv);

// Opens (creating when needed) the state directory and starts the notice endpoint.
Result<std::unique_ptr<Provider>> OpenLocalProvider(const LocalConfig& config);

}  // namespace gpufleet::provider
