# Helpers the benchmark scripts share: a gpufleet server and a throwaway PostgreSQL, started and
# stopped. Source it after setting PY (a python3) and, for start_pg, PG_TOOL (the path of
# gpufleet-test-postgres); the caller sets its own EXIT trap, usually 'stop_server; stop_pg'.

SERVER_PID=""
PG_PID=""
PG_URL=""

# Stops the server in SERVER_PID (TERM, then waits), if any.
stop_server() {
  if [[ -n "$SERVER_PID" ]]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}

# A fresh PostgreSQL server (initdb in a temporary directory, a unix socket, fsync on) as a
# coprocess; PG_URL is its URL. stop_pg closes its stdin, which stops it and removes its files.
start_pg() {
  coproc PG { exec "$PG_TOOL"; }
  PG_PID=$!
  read -r -t 120 PG_URL <&"${PG[0]}" || { echo "could not start PostgreSQL" >&2; exit 1; }
}
stop_pg() {
  if [[ -n "$PG_PID" ]]; then
    exec {PG[1]}>&- 2>/dev/null || true  # its stdin's end stops it
    wait "$PG_PID" 2>/dev/null || true
  fi
  PG_PID=""
}

# A free TCP port on 127.0.0.1.
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
