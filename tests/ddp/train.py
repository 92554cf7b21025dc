#!/usr/bin/python3
"""A small deterministic PyTorch DDP training for the end-to-end tests (gloo backend, CPU).

Started once per rank by gpufleet with MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK in the
environment (torchrun is not needed). It trains a tiny MLP on synthetic data for --steps steps,
checkpoints every --checkpoint-every steps to $GPUFLEET_CHECKPOINT_DIR, and resumes from the
latest checkpoint there when it starts again.

Determinism: the model starts from a fixed seed, the batch of step s on rank r is a pure function
of (s, r), the optimizer state is part of the checkpoint, and a gloo allreduce of CPU tensors sums
in a fixed order. So a run that was interrupted and resumed, any number of times, ends with
parameters bit-identical to those of an uninterrupted run.

Checkpoints: rank 0 writes ckpt-<step>.pt (model, optimizer, step) after the optimizer update of
every k-th step, to a temporary file that os.replace() renames into place, so a reader never sees
a partial file. On start, rank 0 picks the latest complete checkpoint and broadcasts its step, so
every rank loads the same one.

SIGTERM (the stop signal gpufleet sends on preemption or node loss): the default action, the
process ends at once. Only the periodic checkpoints matter; a checkpoint written on SIGTERM would
need the ranks to agree on the step at which to stop, and a rank whose peer was lost cannot.

At the end rank 0 writes final.pt (the parameters) and final.sha256 (a SHA-256 of the
parameters' bytes, in state_dict order) to the checkpoint directory.

When a peer vanishes (its machine was lost), gloo fails the next collective at once and this
rank exits with code 3; --peer-loss-wait makes it wait for the stop signal instead, the way NCCL
ranks hang until their watchdog fires. Both are what a cluster manager must cope with.

Exit codes: 0 done; 2 bad arguments or environment; 3 a collective failed (a peer went away).
"""

import argparse
import datetime
import glob
import hashlib
import os
import re
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

IN, HIDDEN, OUT, BATCH = 16, 32, 4, 32


def log(rank, msg):
    print(f"[rank {rank}] {msg}", flush=True)


def batch(step, rank):
    """The batch of `step` on `rank`: depends on nothing else (not on restarts)."""
    g = torch.Generator()
    g.manual_seed(1_000_003 * (step + 1) + 7919 * rank)
    x = torch.randn(BATCH, IN, generator=g)
    w = torch.linspace(-1.0, 1.0, IN * OUT).reshape(IN, OUT)
    y = torch.tanh(x @ w) + 0.01 * torch.randn(BATCH, OUT, generator=g)
    return x, y


def make_model():
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
                         nn.Linear(HIDDEN, OUT))


def checkpoints(ckpt_dir):
    """(step, path) of the complete checkpoints, newest last."""
    found = []
    for p in glob.glob(os.path.join(ckpt_dir, "ckpt-*.pt")):
        m = re.fullmatch(r"ckpt-(\d+)\.pt", os.path.basename(p))
        if m:
            found.append((int(m.group(1)), p))
    return sorted(found)


def atomic_save(obj, path):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def params_sha256(model):
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=60, help="training steps in all (default 60)")
    ap.add_argument("--checkpoint-every", type=int, default=5, help="checkpoint every k steps (default 5)")
    ap.add_argument("--step-delay", type=float, default=0.0,
                    help="sleep this many seconds after each step, so a run can be interrupted")
    ap.add_argument("--peer-loss-wait", type=float, default=0.0,
                    help="after a collective fails (a peer went away), wait up to this many seconds for the "
                         "stop signal before exiting with code 3, the way NCCL ranks hang (default 0: exit at once)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds to wait for the other ranks (rendezvous and each collective)")
    args = ap.parse_args()

    try:
        rank = int(os.environ["RANK"])
        world = int(os.environ["WORLD_SIZE"])
        addr = os.environ["MASTER_ADDR"]
        port = int(os.environ["MASTER_PORT"])
        ckpt_dir = os.environ["GPUFLEET_CHECKPOINT_DIR"]
    except (KeyError, ValueError) as e:
        print(f"train.py: environment: {e!r} missing or malformed (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, "
              f"GPUFLEET_CHECKPOINT_DIR)", file=sys.stderr)
        return 2
    if args.steps < 1 or args.checkpoint_every < 1:
        print("train.py: --steps and --checkpoint-every must be positive", file=sys.stderr)
        return 2

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(ckpt_dir, exist_ok=True)
    log(rank, f"start: world_size={world} master={addr}:{port} node_rank={os.environ.get('NODE_RANK', '?')} "
              f"restart_count={os.environ.get('GPUFLEET_RESTART_COUNT', '?')} "
              f"job={os.environ.get('GPUFLEET_JOB_ID', '?')} ckpt_dir={ckpt_dir}")

    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    log(rank, "joined the process group")

    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    # Every rank resumes from the checkpoint rank 0 picked.
    start = torch.zeros(1, dtype=torch.int64)
    if rank == 0:
        found = checkpoints(ckpt_dir)
        start[0] = found[-1][0] if found else 0
    dist.broadcast(start, src=0)
    start_step = int(start[0])
    if start_step > 0:
        state = torch.load(os.path.join(ckpt_dir, f"ckpt-{start_step:06d}.pt"))
        assert state["step"] == start_step, state["step"]
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        log(rank, f"resumed from checkpoint at step {start_step}")
    else:
        log(rank, "no checkpoint: starting at step 0")

    ddp = nn.parallel.DistributedDataParallel(model)
    loss_fn = nn.MSELoss()
    for step in range(start_step, args.steps):
        x, y = batch(step, rank)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        try:
            loss.backward()  # the gradient allreduce
        except RuntimeError as e:
            log(rank, f"collective failed at step {step + 1}: {e}")
            if args.peer_loss_wait > 0:
                log(rank, f"waiting up to {args.peer_loss_wait:g}s for the stop signal")
                time.sleep(args.peer_loss_wait)
            return 3
        opt.step()
        done = step + 1
        if rank == 0 and done % args.checkpoint_every == 0:
            path = os.path.join(ckpt_dir, f"ckpt-{done:06d}.pt")
            atomic_save({"step": done, "model": model.state_dict(), "optimizer": opt.state_dict()}, path)
            for old, p in checkpoints(ckpt_dir)[:-2]:
                os.remove(p)
            log(rank, f"step {done}/{args.steps} loss {loss.item():.6f} checkpoint {os.path.basename(path)}")
        else:
            log(rank, f"step {done}/{args.steps} loss {loss.item():.6f}")
        if args.step_delay > 0:
            time.sleep(args.step_delay)

    if rank == 0:
        digest = params_sha256(model)
        atomic_save(model.state_dict(), os.path.join(ckpt_dir, "final.pt"))
        tmp = os.path.join(ckpt_dir, "final.sha256.tmp")
        with open(tmp, "w") as f:
            f.write(digest + "\n")
        os.replace(tmp, os.path.join(ckpt_dir, "final.sha256"))
        log(rank, f"done: final parameters sha256 {digest}")
    else:
        log(rank, "done")
    # Keep rank 0 from exiting while another rank still talks to it.
    try:
        dist.barrier()
    except RuntimeError:
        pass
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
