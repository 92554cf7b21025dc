#!/usr/bin/env bash
# Given `gpufleet dev --tls`, expect HTTPS everywhere: the CLI config pins the dev CA and the CLI
# runs a job through it; the agent registered over TLS; curl with the CA is answered, curl without
# it or over plain HTTP is not (and changes nothing); a CLI trusting another CA is refused with a
# hint; the keys are private; a restart keeps the CA, so the pin still holds. And `gpufleet server`
# refuses plain HTTP on an address other hosts can reach.
#
# Usage: tls_test.sh PATH/TO/gpufleet
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: tls_test.sh GPUFLEET}"
export HOME="$WORK/home"
mkdir -p "$HOME"
unset GPUFLEET_CONFIG GPUFLEET_SERVER GPUFLEET_TOKEN GPUFLEET_CA_CERT XDG_CONFIG_HOME
cd "$WORK"
CONFIG="$HOME/.config/gpufleet/config.yaml"

DEV_PID=""
start_dev() {
  rm -f "$CONFIG"
  "$GPUFLEET" dev --tls --data-dir "$WORK/data" --port 0 --agents 1 --fake-gpus 1xH100 \
    --job-user "$(id -un)" --allow-root-jobs >>"$WORK/dev.log" 2>&1 &
  DEV_PID=$!
}
stop_dev() {
  if [[ -n "$DEV_PID" ]]; then
    kill "$DEV_PID" 2>/dev/null || true
    wait "$DEV_PID" 2>/dev/null || true
    DEV_PID=""
  fi
}
trap 'stop_dev; rm -rf "$WORK"' EXIT
wait_for() { wait_for_while "$DEV_PID" "$WORK/dev.log" "$@"; }
node_up() { "$GPUFLEET" nodes -o json | grep '"state": "up"' >/dev/null; }
job_count() { "$GPUFLEET" history -o json | "$PYTHON" -c 'import json,sys; print(len(json.load(sys.stdin)))'; }

start_dev
wait_for "the CLI config" test -s "$CONFIG"
SERVER="$(awk '/^server:/{print $2}' "$CONFIG")"
TOKEN="$(awk '/^token:/{print $2}' "$CONFIG")"
CA="$(awk '/^ca_cert:/{print $2}' "$CONFIG")"
[[ "$SERVER" == https://127.0.0.1:* ]] || fail "the config's server is '$SERVER', expected https://127.0.0.1:PORT"
[[ "$CA" == "$WORK/data/tls/ca.pem" && -s "$CA" ]] || fail "the config pins '$CA', expected $WORK/data/tls/ca.pem"
for key in "$WORK/data/tls/server.key" "$WORK/data/tls/ca.key"; do
  [[ "$(stat -c %a "$key")" == 600 ]] || fail "$key has mode $(stat -c %a "$key"), expected 600"
done

# The agent reaches the controller over TLS with the pinned CA: the node comes up.
wait_for "node dev-1 to register over TLS" node_up
run "$WORK/run" "$GPUFLEET" run --gpus 1 -f -- echo hello-over-tls
expect_rc "$WORK/run" 0 "gpufleet run over TLS"
grep -q hello-over-tls "$WORK/run.out" || { show "$WORK/run"; fail "the job's output did not come back over TLS"; }

# curl: with the CA answered; without it refused by curl (exit 60); plain HTTP gets no answer.
curl -sf --max-time 20 --cacert "$CA" "$SERVER/v1/health" | grep '"status":"ok"' >/dev/null || fail "curl --cacert got no health answer"
RC=0
curl -s --max-time 20 "$SERVER/v1/health" >/dev/null 2>&1 || RC=$?
[[ "$RC" == 60 ]] || fail "curl without the CA: exit $RC, expected 60 (certificate not trusted)"
BEFORE="$(job_count)"
[[ "$BEFORE" =~ ^[1-9][0-9]*$ ]] || fail "gpufleet history -o json lists '$BEFORE' jobs, expected the job run above"
PLAIN="${SERVER/https:/http:}"
RC=0
curl -s --max-time 10 -X POST "$PLAIN/v1/jobs" -H "Authorization: Bearer $TOKEN" \
  -d '{"job": {"name": "plain", "resources": {"gpus": 1}, "run": "true"}}' >"$WORK/plain.out" 2>&1 || RC=$?
[[ "$RC" != 0 ]] || fail "plain HTTP to the TLS port was answered: $(cat "$WORK/plain.out")"
[[ "$(job_count)" == "$BEFORE" ]] || fail "plain HTTP to the TLS port changed the job count"

# A CLI that trusts another CA is refused, and told what to set.
mkdir -p "$WORK/other"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=other-ca \
  -keyout "$WORK/other/ca.key" -out "$WORK/other/ca.pem" >/dev/null 2>&1 || fail "openssl cannot make a test CA"
GPUFLEET_CA_CERT="$WORK/other/ca.pem" run "$WORK/wrong" "$GPUFLEET" queue
[[ "$RC" != 0 ]] || { show "$WORK/wrong"; fail "a CLI trusting another CA was answered"; }
grep -q "not one this client trusts" "$WORK/wrong.err" || { show "$WORK/wrong"; fail "no certificate hint"; }

# http:// to the TLS port: the CLI says to use https://.
run "$WORK/plaincli" "$GPUFLEET" queue --server "$PLAIN"
[[ "$RC" != 0 ]] || { show "$WORK/plaincli"; fail "the CLI over http:// to the TLS port was answered"; }
grep -q "use https://" "$WORK/plaincli.err" || { show "$WORK/plaincli"; fail "no https hint for http:// to a TLS port"; }
# An agent that trusts another CA says why it cannot reach the controller, not only that it cannot;
# one whose --ca-cert is not there is refused at once.
run "$WORK/noca" "$GPUFLEET" agent --server "$SERVER" --ca-cert "$WORK/no-such-ca.pem" --fake-gpus 1xH100 \
  --data-dir "$WORK/agent-noca"
expect_rc "$WORK/noca" 2 "agent --ca-cert of a missing file"
printf '%s\n' "$(cat "$WORK/data/join.token" 2>/dev/null || true)" >"$WORK/join.token"
"$GPUFLEET" agent --server "$SERVER" --ca-cert "$WORK/other/ca.pem" --fake-gpus 1xH100 --name wrong-ca \
  --data-dir "$WORK/agent-wrongca" --join-token-file "$WORK/join.token" >"$WORK/wrongca.log" 2>&1 &
WRONG_PID=$!
for ((i = 0; i < 300; i++)); do grep -q "cannot reach the controller" "$WORK/wrongca.log" && break; sleep 0.1; done
kill "$WRONG_PID" 2>/dev/null || true
wait "$WRONG_PID" 2>/dev/null || true
grep -q "is not signed by --ca-cert $WORK/other/ca.pem" "$WORK/wrongca.log" ||
  { cat "$WORK/wrongca.log" >&2; fail "the agent does not say its CA does not match"; }

# A restart keeps the CA: the pinned config still works.
CA_SUM="$(sha256sum <"$CA")"
stop_dev
start_dev
wait_for "the CLI config after a restart" test -s "$CONFIG"
[[ "$(sha256sum <"$CA")" == "$CA_SUM" ]] || fail "a restart replaced the dev CA"
wait_for "node dev-1 after a restart" node_up
stop_dev

# gpufleet server: plain HTTP on a reachable address is refused before it binds.
run "$WORK/server" "$GPUFLEET" server --data-dir "$WORK/server-data" --listen 0.0.0.0:0
expect_rc "$WORK/server" 2 "server --listen 0.0.0.0 without TLS"
grep -q -- "--insecure" "$WORK/server.err" || { show "$WORK/server"; fail "the refusal does not name --insecure"; }
# A refused start writes nothing: no data directory, tokens or store.
[[ ! -e "$WORK/server-data" ]] || fail "a refused start made $WORK/server-data"
run "$WORK/sameport" "$GPUFLEET" server --data-dir "$WORK/sameport-data" --listen 127.0.0.1:18993 \
  --agent-listen 127.0.0.1:18993
expect_rc "$WORK/sameport" 2 "server with --agent-listen the API's own address"
expect_contains "$WORK/sameport.err" "is the API's own address" "the same address twice"
[[ ! -e "$WORK/sameport-data" ]] || fail "a refused start made $WORK/sameport-data"
echo PASS
