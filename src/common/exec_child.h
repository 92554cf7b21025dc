// The steps every forked child of gpufleet takes before exec, in one place: the job launcher's
// shim and job (agent/launcher.cc) and the command runner (common/process.cc) share them.
// Everything here is async-signal-safe (no allocation, no locks): it runs between fork and exec.
//
// Thread-safety: call only in a child after fork.
#pragma once

namespace gpufleet::exec_child {

// Every signal back to its default disposition, the mask left as it is (a child forked with
// every signal blocked keeps them blocked until it is ready to handle them).
void ResetDispositions();
// ResetDispositions and an empty mask, so that the parent's signal handling (an ignored SIGPIPE
// or SIGTERM, a blocked SIGCHLD) does not leak into what runs next.
void ResetSignals();

// Closes descriptors lo..hi (close_range, or one by one where the kernel lacks it).
void CloseRange(int lo, int hi);

// Keeps 0..2 and the error-report pipe, which it moves to descriptor 3 with FD_CLOEXEC set (so
// exec closes it and the parent's read sees EOF), and closes every other descriptor: what runs
// next must not hold the parent's sockets and pipes open. Returns the report descriptor (3), or
// -1 when it could not be moved (errno set).
int KeepOnlyStdioAndReport(int report_fd);

}  // namespace gpufleet::exec_child
