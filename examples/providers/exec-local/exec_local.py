#!/usr/bin/env python3
"""exec-local: the exec provider's contract, carried out on this machine.

An "instance" is a fake-GPU `gpufleet agent` process in its own session; its record is one JSON
file in $EXEC_LOCAL_DIR. Use it to try the exec provider without a cloud, and as a starting
point for scripts that call a real cloud's CLI (see README.md).

  exec_local.py create   stdin: the instance request (JSON)  stdout: the instance (JSON)
  exec_local.py delete   stdin: {"id": "..."}                stdout: nothing
  exec_local.py list     stdin: nothing                      stdout: JSON array of instances

Environment:
  EXEC_LOCAL_DIR            records and logs (default ~/.local/state/gpufleet/exec-local)
  GPUFLEET_BIN              the gpufleet binary (default: gpufleet on PATH)
  GPUFLEET_SERVER           the controller's agent listener (default http://127.0.0.1:8471)
  GPUFLEET_JOIN_TOKEN_FILE  (default ~/.local/share/gpufleet/server/join.token)
  EXEC_LOCAL_AGENT_COMMAND  a bash command run instead of the agent; it sees NAME, GPUS,
                            GPU_MODEL, MARKET, PRICE_PER_HOUR, ZONE and INSTANCE_ID
Errors go to stderr with a non-zero exit; the provider quotes them.
"""

import datetime
import json
import os
import secrets
import signal
import subprocess
import sys
import time


def fail(msg, code=1):
    sys.stderr.write("exec-local: %s\n" % msg)
    sys.exit(code)


def state_dir():
    d = os.environ.get("EXEC_LOCAL_DIR") or os.path.expanduser("~/.local/state/gpufleet/exec-local")
    os.makedirs(os.path.join(d, "instances"), exist_ok=True)
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    return d


def record_path(d, instance_id):
    return os.path.join(d, "instances", instance_id + ".json")


def start_ticks(pid):
    """Field 22 of /proc/PID/stat (tells a pid apart from a later process with the same number)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()
    return fields[0], int(fields[19])  # state, start time


def alive(rec):
    st = start_ticks(rec["pid"])
    return st is not None and st[1] == rec["start_ticks"] and st[0] not in ("Z", "X")


def records(d):
    out = []
    for name in sorted(os.listdir(os.path.join(d, "instances"))):
        if name.endswith(".json"):
            with open(os.path.join(d, "instances", name)) as f:
                out.append(json.load(f))
    out.sort(key=lambda r: r["created"])
    return out


def as_instance(rec):
    inst = {k: rec[k] for k in ("id", "name", "offer", "gpu_model", "gpus", "market",
                                "price_micros_per_hour", "zone", "labels", "created", "pid")}
    if alive(rec):
        inst["state"] = "running"
        inst["started"] = rec["created"]
    else:
        inst["state"] = "terminated"
        inst["end_reason"] = "process exited"
    return inst


def write_atomically(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
    os.replace(tmp, path)


def agent_argv(req, instance_id):
    custom = os.environ.get("EXEC_LOCAL_AGENT_COMMAND")
    if custom:
        return ["bash", "-c", custom]
    token = os.environ.get("GPUFLEET_JOIN_TOKEN_FILE") or os.path.expanduser(
        "~/.local/share/gpufleet/server/join.token")
    argv = [os.environ.get("GPUFLEET_BIN", "gpufleet"), "agent",
            "--server", os.environ.get("GPUFLEET_SERVER", "http://127.0.0.1:8471"),
            "--join-token-file", token,
            "--name", req["name"],
            "--fake-gpus", "%dx%s" % (req["gpus"], req["gpu_model"]),
            "--market", req["market"],
            "--price-per-hour", req["price_per_hour"],
            "--max-disconnected", "60s"]
    if req.get("zone"):
        argv += ["--label", "zone=" + req["zone"]]
    for k, v in sorted(req.get("labels", {}).items()):
        argv += ["--label", "%s=%s" % (k, v)]
    return argv


def create():
    try:
        req = json.load(sys.stdin)
    except ValueError as e:
        fail("create: stdin is not a JSON request: %s" % e, 2)
    if not req.get("name"):
        fail("create: the request has no name", 2)
    d = state_dir()
    for rec in records(d):
        if rec["name"] == req["name"] and alive(rec):
            fail("create: instance %s already has the name %s" % (rec["id"], req["name"]))
    instance_id = "el-" + secrets.token_hex(4)
    env = dict(os.environ, NAME=req["name"], GPUS=str(req.get("gpus", 0)),
               GPU_MODEL=req.get("gpu_model", ""), MARKET=req.get("market", ""),
               PRICE_PER_HOUR=str(req.get("price_per_hour", "0")), ZONE=req.get("zone", ""),
               INSTANCE_ID=instance_id)
    log = open(os.path.join(d, "logs", instance_id + ".log"), "ab")
    try:
        proc = subprocess.Popen(agent_argv(req, instance_id), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=log, env=env, start_new_session=True)
    except OSError as e:
        fail("create %s: cannot start the agent: %s" % (req["name"], e))
    st = start_ticks(proc.pid)
    rec = {
        "id": instance_id,
        "name": req["name"],
        "offer": req.get("offer", ""),
        "gpu_model": req.get("gpu_model", ""),
        "gpus": req.get("gpus", 0),
        "market": req.get("market", "on-demand"),
        "price_micros_per_hour": req.get("price_micros_per_hour", 0),
        "zone": req.get("zone", ""),
        "labels": req.get("labels", {}),
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "pid": proc.pid,
        "start_ticks": st[1] if st else 0,
    }
    write_atomically(record_path(d, instance_id), rec)
    json.dump(as_instance(rec), sys.stdout)
    sys.stdout.write("\n")


def delete():
    try:
        instance_id = json.load(sys.stdin)["id"]
    except (ValueError, KeyError, TypeError) as e:
        fail("delete: stdin must be {\"id\": ...}: %s" % e, 2)
    d = state_dir()
    path = record_path(d, instance_id)
    if not os.path.exists(path):
        return  # gone already: deleting is idempotent
    with open(path) as f:
        rec = json.load(f)
    if alive(rec):
        pgid = rec["pid"]  # it leads its own session, so its pid is its group
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 10
        while alive(rec) and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            os.killpg(pgid, signal.SIGKILL)  # the leader or whatever it left behind
        except ProcessLookupError:
            pass
    os.remove(path)


def list_instances():
    json.dump([as_instance(r) for r in records(state_dir())], sys.stdout)
    sys.stdout.write("\n")


def main(argv):
    calls = {"create": create, "delete": delete, "list": list_instances}
    if len(argv) != 2 or argv[1] not in calls:
        fail("usage: exec_local.py create|delete|list", 2)
    calls[argv[1]]()


if __name__ == "__main__":
    main(sys.argv)
