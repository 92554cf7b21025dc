#!/usr/bin/env bash
# Bad input to the HTTP API: each request is answered 4xx with {"error": {"code", "message"}}
# whose message names the problem; afterwards nothing has changed and the server still serves.
#
# Usage: api_bad_input_test.sh GPUFLEET_BIN SOURCE_DIR
source "$(dirname "$0")/lib.sh"
BIN="$1"

DATA="$WORK/server"
PORT="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
URL="http://127.0.0.1:$PORT"
AGENT_PORT="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$BIN" server --data-dir "$DATA" --listen "127.0.0.1:$PORT" --agent-listen "127.0.0.1:$AGENT_PORT" \
  >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill -KILL $SERVER_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 300); do
  curl -fsS "$URL/v1/health" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; fail "the server exited at start"; }
  sleep 0.1
done
curl -fsS "$URL/v1/health" >/dev/null || fail "the server did not answer /v1/health within 30 s"

"$PYTHON" - "$URL" "$DATA" "$AGENT_PORT" <<'EOF'
import http.client, json, sys, urllib.parse
url, data = sys.argv[1:3]
u = urllib.parse.urlparse(url)
admin = open(data + "/admin.token").read().strip()
join = open(data + "/join.token").read().strip()
failures = []


def call(method, path, body=None, token=None, headers=None, raw=False):
    # Agents have their own listener; everything else goes to the API's.
    port = int(sys.argv[3]) if path.startswith("/v1/agents/") else u.port
    conn = http.client.HTTPConnection(u.hostname, port, timeout=60)
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = "Bearer " + token
    if body is not None and not raw:
        body = json.dumps(body)
    if body is not None:
        h.setdefault("Content-Type", "application/json")
    try:
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def must(method, path, body=None, token=None, want=200):
    status, out = call(method, path, body, token)
    if status != want:
        sys.exit("FAIL: %s %s: HTTP %d, expected %d: %s" % (method, path, status, want, out[:300]))
    return json.loads(out)


# Setup: an agent token (a node registers with the join token; one T4, so the 2-GPU jobs below,
# a gang of two 1-GPU parts, never start: taken, since nodes may join, but never placed) and one
# job, so "nothing changed" compares against something. (A job no node could ever hold, such as
# an H100 job here, is refused at submit.)
node = {"name": "bad-input-node", "address": "127.0.0.1", "version": "test",
        "spec": {"name": "bad-input-node", "gpu_model": "T4", "gpus": 1, "nvlink_domain": [0], "cpu_milli": 4000,
                 "mem_mib": 16384, "labels": {}, "market": "on-demand"},
        "gpus": [], "running": []}
agent = must("POST", "/v1/agents/register", node, join)["token"]
job = {"name": "valid", "resources": {"gpus": 2, "gpu_type": ["T4"]}, "run": "true"}
must("POST", "/v1/jobs", {"request_id": "valid-1", "job": job}, admin, want=201)


def state():
    jobs, cursor = [], None
    while True:  # every page
        page = must("GET", "/v1/jobs?limit=1000" + ("&cursor=%d" % cursor if cursor else ""), token=admin)
        jobs += page["jobs"]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    nodes = must("GET", "/v1/nodes", token=admin)["nodes"]
    return sorted((j["id"], j["name"], j["state"]) for j in jobs), sorted(n["name"] for n in nodes)


before = state()


def case(what, method, path, body=None, token=admin, want=400, names=(), raw=False, headers=None):
    """The request must be answered `want` with an error object whose message contains every
    string in `names` (case-insensitive)."""
    try:
        status, out = call(method, path, body, token, headers, raw)
    except (OSError, http.client.HTTPException) as e:
        failures.append("%s: no answer (%s)" % (what, e))
        return
    if status != want:
        failures.append("%s: HTTP %d, expected %d: %s" % (what, status, want, out[:300]))
        return
    try:
        err = json.loads(out)["error"]
        code, message = err["code"], err["message"]
    except (ValueError, KeyError, TypeError):
        failures.append("%s: HTTP %d without a JSON error object: %r" % (what, status, out[:300]))
        return
    if not isinstance(code, str) or not code or not isinstance(message, str) or not message:
        failures.append("%s: empty error code or message: %r" % (what, err))
        return
    for n in names:
        if n.lower() not in message.lower():
            failures.append("%s: the message does not name '%s': %s" % (what, n, message))


def sub(job, **kw):
    return {"request_id": "bad-" + str(len(failures)) + "-" + json.dumps(job)[:40], "job": job, **kw}


def with_res(**res):
    return {"name": "bad", "resources": dict({"gpus": 1}, **res), "run": "true"}


# Malformed bodies.
case("malformed JSON", "POST", "/v1/jobs", '{"request_id": "x", "job": {', raw=True, names=["invalid JSON"])
case("not JSON at all", "POST", "/v1/jobs", "name: x\nrun: true\n", raw=True, names=["invalid JSON"])
case("empty body", "POST", "/v1/jobs", "", raw=True, names=["JSON"])
case("body is an array", "POST", "/v1/jobs", [1, 2], names=["JSON object"])
case("unknown body field", "POST", "/v1/jobs", {"request_id": "u", "jobz": job}, names=["jobz"])
case("neither job nor yaml", "POST", "/v1/jobs", {"request_id": "n"}, names=["job", "yaml"])
case("malformed YAML", "POST", "/v1/jobs", {"request_id": "y1", "yaml": "name: [unclosed\nrun: true\n"},
     names=["job.yaml"])
case("YAML with an unknown field", "POST", "/v1/jobs",
     {"request_id": "y2", "yaml": "name: x\nrun: true\ncolour: red\n", "source": "train.yaml"},
     names=["train.yaml", "colour"])
case("YAML with an unknown resources field", "POST", "/v1/jobs",
     {"request_id": "y3", "yaml": "name: x\nrun: true\nresources:\n  gpu: 2\n"}, names=["gpu"])
case("JSON job with an unknown field", "POST", "/v1/jobs", sub(dict(job, retries=3)), names=["retries"])
case("missing run", "POST", "/v1/jobs", sub({"name": "x"}), names=["run"])

# Negative and absurd resources.
case("gpus: -1", "POST", "/v1/jobs", sub(with_res(gpus=-1)), names=["resources.gpus"])
case("gpus: 100000", "POST", "/v1/jobs", sub(with_res(gpus=100000)), names=["resources.gpus"])
case("gpus: 1.5", "POST", "/v1/jobs", sub(with_res(gpus=1.5)), names=["resources.gpus"])
case("nodes: 100000", "POST", "/v1/jobs", sub(with_res(nodes=100000)), names=["resources.nodes"])
case("nodes: 0", "POST", "/v1/jobs", sub(with_res(nodes=0)), names=["resources.nodes"])
case("memory: 99Ti", "POST", "/v1/jobs", sub(with_res(memory="99Ti")), names=["resources.memory"])
case("memory: -5Gi", "POST", "/v1/jobs", sub(with_res(memory="-5Gi")), names=["resources.memory"])
case("memory: lots", "POST", "/v1/jobs", sub(with_res(memory="lots")), names=["resources.memory"])
case("cpus: -2", "POST", "/v1/jobs", sub(with_res(cpus=-2)), names=["resources.cpus"])
case("unknown GPU model", "POST", "/v1/jobs", sub(with_res(gpu_type=["H9000"])), names=["H9000"])
case("priority: 99999", "POST", "/v1/jobs", sub(dict(job, priority=99999)), names=["priority"])

# Wrong types.
case("request_id a number", "POST", "/v1/jobs", {"request_id": 7, "job": job}, names=["request_id"])
case("request_id too long", "POST", "/v1/jobs", {"request_id": "r" * 200, "job": job}, names=["request_id"])
case("yaml a number", "POST", "/v1/jobs", {"request_id": "t1", "yaml": 5}, names=["yaml"])
case("priority a string", "POST", "/v1/jobs", sub(dict(job, priority="high")), names=["priority"])
case("resources a list", "POST", "/v1/jobs", sub(dict(job, resources=[1])), names=["resources"])
case("env a string", "POST", "/v1/jobs", sub(dict(job, env="A=1")), names=["env"])
case("nodes a string", "POST", "/v1/jobs", sub(with_res(nodes="two")), names=["resources.nodes"])

# Oversized body (the limit is 8 MiB).
big = json.dumps({"request_id": "big", "job": dict(job, env={"PAD": "x" * (9 << 20)})})
case("body over 8 MiB", "POST", "/v1/jobs", big, raw=True, want=413, names=["too large"])

# Tokens.
case("no token", "GET", "/v1/jobs", token=None, want=401, names=["bearer token"])
case("no token on submit", "POST", "/v1/jobs", {"request_id": "nt", "job": job}, token=None, want=401,
     names=["bearer token"])
case("bad token", "GET", "/v1/jobs", token="gfu_not-a-real-token", want=401, names=["invalid token"])
case("bad token on submit", "POST", "/v1/jobs", {"request_id": "bt", "job": job}, token="nonsense", want=401,
     names=["invalid token"])
case("not a bearer header", "GET", "/v1/jobs", token=None, headers={"Authorization": "Basic YWRtaW46YWRtaW4="},
     want=401, names=["bearer"])
case("agent token lists jobs", "GET", "/v1/jobs", token=agent, want=403, names=["agent token"])
case("agent token submits", "POST", "/v1/jobs", {"request_id": "at", "job": job}, token=agent, want=403,
     names=["agent token"])
case("agent token drains", "POST", "/v1/nodes/bad-input-node/drain", token=agent, want=403, names=["agent token"])
case("join token submits", "POST", "/v1/jobs", {"request_id": "jt", "job": job}, token=join, want=403,
     names=["join token"])
case("user token heartbeats", "POST", "/v1/agents/heartbeat", {}, want=403, names=["only agents"])
case("user token polls commands", "GET", "/v1/agents/commands?after=0", want=403, names=["only agents"])
case("user token uploads logs", "POST", "/v1/agents/logs?job=1&attempt=1&part=0&offset=0", "x", raw=True,
     want=403, names=["only agents"])
case("user token registers a node", "POST", "/v1/agents/register", node, want=403, names=["join token"])
case("agent token makes tokens", "POST", "/v1/tokens", {"kind": "user"}, token=agent, want=403, names=["agent token"])

# Routes and parameters.
case("unknown route", "GET", "/v1/nope", want=404, names=["no such route"])
case("unknown version", "GET", "/v2/jobs", want=404, names=["no such route"])
case("job id not a number", "GET", "/v1/jobs/abc", want=404, names=["no such route"])
case("no such job", "GET", "/v1/jobs/987654", want=404, names=["987654"])
case("cancel no such job", "POST", "/v1/jobs/987654/cancel", want=404, names=["987654"])
case("logs of no such job", "GET", "/v1/jobs/987654/logs", want=404, names=["987654"])
case("limit=abc", "GET", "/v1/jobs?limit=abc", names=["limit", "abc"])
case("limit=-1", "GET", "/v1/jobs?limit=-1", names=["limit"])
case("since_ms=yesterday", "GET", "/v1/jobs?since_ms=yesterday", names=["since_ms"])
case("state=sleeping", "GET", "/v1/jobs?state=sleeping", names=["state", "sleeping"])
case("logs wait_ms=forever", "GET", "/v1/jobs/1/logs?wait_ms=forever", names=["wait_ms"])
case("agent logs without job", "POST", "/v1/agents/logs?attempt=1&part=0&offset=0", "x", token=agent, raw=True,
     names=["job"])
case("token of an unknown kind", "POST", "/v1/tokens", {"kind": "root"}, names=["kind", "root"])
case("token with a wrong role", "POST", "/v1/tokens", {"kind": "user", "role": "god"}, names=["role", "god"])
case("heartbeat not JSON", "POST", "/v1/agents/heartbeat", "{", token=agent, raw=True, names=["invalid JSON"])
case("register without spec", "POST", "/v1/agents/register", {"name": "n2"}, token=join, names=["spec"])

if failures:
    print("FAIL: %d bad requests were not answered as expected:" % len(failures), file=sys.stderr)
    for f in failures:
        print("  " + f, file=sys.stderr)
    sys.exit(1)

after = state()
if after != before:
    sys.exit("FAIL: the bad requests changed the state:\n  before %s\n  after  %s" % (before, after))
health = must("GET", "/v1/health")
if health.get("status") != "ok":
    sys.exit("FAIL: /v1/health after the bad requests: %s" % health)
created = must("POST", "/v1/jobs", {"request_id": "valid-2", "job": job}, admin, want=201)
if len(created["jobs"]) != 1 or len(state()[0]) != len(before[0]) + 1:
    sys.exit("FAIL: a valid submit after the bad requests: %s" % created)
EOF
echo PASS
