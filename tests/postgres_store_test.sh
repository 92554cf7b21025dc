#!/usr/bin/env bash
# Given `gpufleet server --store`, expect a value that is neither sqlite:PATH nor a PostgreSQL URL
# to be refused with exit 2, naming the flag and the value; a PostgreSQL that is not there to be
# refused with libpq's reason and what to check, without showing the password; and, on a
# throwaway PostgreSQL, a job submitted before a restart of the controller to be there after it
# with its history, the data directory holding no state.db.
#
# Usage: postgres_store_test.sh PATH/TO/gpufleet PATH/TO/gpufleet-test-postgres
GPUFLEET="${1:?usage: postgres_store_test.sh GPUFLEET GPUFLEET_TEST_POSTGRES}"
PG_TOOL="${2:?usage: postgres_store_test.sh GPUFLEET GPUFLEET_TEST_POSTGRES}"
source "$(dirname "$0")/cluster_lib.sh"

run "$WORK/scheme" "$GPUFLEET" server --data-dir "$WORK/d1" --listen 127.0.0.1:0 --store mysql://db/gpufleet
expect_rc "$WORK/scheme" 2 "--store with another scheme"
expect_contains "$WORK/scheme.err" "--store 'mysql://db/gpufleet'" "the refusal names the flag and value"
expect_contains "$WORK/scheme.err" "sqlite:PATH" "the refusal says what is accepted"

run "$WORK/param" "$GPUFLEET" server --data-dir "$WORK/d2" --listen 127.0.0.1:0 \
  --store "postgresql://gf:s3cret@db/gpufleet?no_such_setting=1"
expect_rc "$WORK/param" 2 "--store with a URL libpq cannot parse"
expect_contains "$WORK/param.err" "no_such_setting" "libpq's reason"
grep -q s3cret "$WORK/param.err" && fail "the refusal shows the password: $(cat "$WORK/param.err")"

run "$WORK/gone" "$GPUFLEET" server --data-dir "$WORK/d3" --listen 127.0.0.1:0 \
  --store "postgresql://gf:s3cret@/gpufleet?host=$WORK/no-server-here"
expect_rc "$WORK/gone" 1 "--store naming a PostgreSQL that is not running"
expect_contains "$WORK/gone.err" "cannot connect" "the refusal says what failed"
expect_contains "$WORK/gone.err" "is PostgreSQL running there" "the refusal says what to check"
expect_contains "$WORK/gone.err" "gf:***@" "the URL is shown with the password hidden"
grep -q s3cret "$WORK/gone.err" && fail "the refusal shows the password: $(cat "$WORK/gone.err")"

# A server of our own, stopped when its stdin (this script's coprocess pipe) closes: closed on
# exit before cluster_cleanup, which waits for every child.
coproc PG { exec "$PG_TOOL" 2>"$WORK/pg.err"; }
PG_TOOL_PID=$PG_PID
stop_pg() {
  exec {PG[1]}>&- 2>/dev/null || true
  wait "$PG_TOOL_PID" 2>/dev/null || true
}
trap 'rc=$?; set +e; stop_pg; (exit $rc); cluster_cleanup' EXIT
read -r -t 120 PG_URL <&"${PG[0]}" || fail "could not start PostgreSQL: $(cat "$WORK/pg.err")"

cluster_start_server --store "$PG_URL"
id="$(api POST /v1/jobs '{"request_id": "pg-1", "job": {"name": "kept", "resources": {"gpus": 1}, "run": "true"}}' |
  json_get "j['jobs'][0]['id']")"
[[ "$id" == 1 ]] || fail "the first job got id '$id'"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
[[ ! -e "$SERVER_DIR/state.db" ]] || fail "the controller wrote state.db although --store names PostgreSQL"

cluster_start_server --store "$PG_URL"
job="$(api GET /v1/jobs/1)"
[[ "$(echo "$job" | json_get "j['name']")" == kept ]] || fail "job 1 after the restart: $job"
[[ "$(echo "$job" | json_get "j['state']")" == pending ]] || fail "job 1 after the restart: $job"
again="$(api POST /v1/jobs '{"request_id": "pg-1", "job": {"name": "kept", "resources": {"gpus": 1}, "run": "true"}}')"
[[ "$(echo "$again" | json_get "j['created']")" == false ]] || fail "the request id was forgotten: $again"

# A second controller on the same database, without --leader-lease, stands by (it took the lease
# too): it does not lead beside the first and run the same jobs twice.
setsid "$GPUFLEET" server --data-dir "$WORK/second" --listen 127.0.0.1:0 --agent-listen 127.0.0.1:0 \
  --store "$PG_URL" >"$WORK/second.out" 2>"$WORK/second.err" &
SECOND_PID=$!
stood_by() { grep -q "standing by on" "$WORK/second.err"; }
for ((i = 0; i < 300; i++)); do stood_by && break; kill -0 "$SECOND_PID" 2>/dev/null || break; sleep 0.1; done
stood_by || { kill "$SECOND_PID" 2>/dev/null; fail "the second controller did not stand by: $(cat "$WORK/second.err")"; }
port="$(sed -n 's/.*standing by on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$WORK/second.err" | head -1)"
code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/jobs")"
kill -TERM "$SECOND_PID"; wait "$SECOND_PID" 2>/dev/null || true
[[ "$code" == 503 ]] || fail "the standby answered $code, not 503 (not the leader)"

# gpufleet backup while the controller runs: a checked dump; never over an existing file.
"$GPUFLEET" backup --store "$PG_URL" "$WORK/state.dump" -o json >"$WORK/backup.json" 2>"$WORK/backup.err" ||
  fail "gpufleet backup of the PostgreSQL store: $(cat "$WORK/backup.err")"
[[ "$(json_get "j['method']" <"$WORK/backup.json")" == "pg_dump (custom format)" ]] || fail "backup: $(cat "$WORK/backup.json")"
[[ "$(json_get "j['tables'] > 3 and j['bytes'] > 0" <"$WORK/backup.json")" == true ]] || fail "backup: $(cat "$WORK/backup.json")"
# What a dump does not read (the schema version, the jobs) is null, not 0.
[[ "$(json_get "j['schema_version'] is None and j['jobs'] is None" <"$WORK/backup.json")" == true ]] ||
  fail "backup -o json of a dump: $(cat "$WORK/backup.json")"
run "$WORK/again" "$GPUFLEET" backup --store "$PG_URL" "$WORK/state.dump"
expect_rc "$WORK/again" 2 "a backup onto an existing file"
expect_contains "$WORK/again.err" "never overwrites" "the refusal says why"

# ... and of a SQLite controller's data directory, while it runs.
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
SERVER_DIR="$WORK/sqlite-server"
cluster_start_server
api POST /v1/jobs '{"request_id": "lite-1", "job": {"name": "lite", "resources": {"gpus": 1}, "run": "true"}}' >/dev/null
"$GPUFLEET" backup --data-dir "$SERVER_DIR" "$WORK/state-copy.db" >"$WORK/backup.out" 2>"$WORK/backup.err" ||
  fail "gpufleet backup of the SQLite store: $(cat "$WORK/backup.err")"
expect_contains "$WORK/backup.out" "1 jobs" "the backup counts the copied jobs"
expect_contains "$WORK/backup.out" "checked" "the backup says the copy was checked"
# -o json: the jobs and tables of a SQLite copy are counted.
"$GPUFLEET" backup --data-dir "$SERVER_DIR" "$WORK/state-copy2.db" -o json >"$WORK/backup2.json" 2>"$WORK/backup.err" ||
  fail "gpufleet backup -o json of the SQLite store: $(cat "$WORK/backup.err")"
[[ "$(json_get "j['tables'] > 3 and j['jobs'] == 1" <"$WORK/backup2.json")" == true ]] ||
  fail "backup -o json: $(cat "$WORK/backup2.json")"
run "$WORK/nostore" "$GPUFLEET" backup "$WORK/x.db"
expect_rc "$WORK/nostore" 2 "a backup without --data-dir or --store"
expect_contains "$WORK/nostore.err" "--data-dir" "the refusal says what to give"

echo "PASS: --store refuses bad values and absent servers clearly; PostgreSQL keeps jobs across a restart; gpufleet backup copies both stores while they run"
