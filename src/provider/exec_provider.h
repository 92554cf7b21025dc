// The exec provider: three user scripts carry out create, delete and list on any cloud's CLI.
//
// Contract (docs/providers.md has it in full, examples/providers/ has scripts):
//   create  stdin: the InstanceRequest as one JSON object (RequestToJson). stdout: one instance
//           object, at least {"id": "..."}; "name", "state" (default booting) and the rest are
//           optional.
//   delete  stdin: {"id": "..."}. Exit 0 when the instance is gone or going, also when the
//           cloud no longer knows the id (Delete is idempotent).
//   list    stdin: empty. stdout: a JSON array of instance objects.
// Each runs with the configured timeout; on a non-zero exit, a timeout (its process group is
// killed) or output that is not the JSON asked for, the call fails with a Status that quotes the
// script, what happened and the last lines of its stderr.
//
// Thread-safety: as Provider. A call blocks for as long as its script runs (at most the
// timeout). Poll has nothing to do: the cloud boots and interrupts on its own, and List shows it.
#pragma once

#include <memory>

#include "common/status.h"
#include "provider/provider.h"

namespace gpufleet::provider {

Result<std::unique_ptr<Provider>> MakeExecProvider(const ExecConfig& config);

}  // namespace gpufleet::provider
