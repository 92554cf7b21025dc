#!/usr/bin/env bash
# Given `gpufleet --help` and `gpufleet sim --help`, expect exit 0, the commands and flags a user
# needs, and examples; expect every repository file the sim examples name to exist, so the
# examples do not rot when data moves.
#
# Usage: cli_help_test.sh PATH/TO/gpufleet SOURCE_DIR
source "$(dirname "$0")/lib.sh"

GPUFLEET="${1:?usage: cli_help_test.sh GPUFLEET SOURCE_DIR}"
SRC="${2:?usage: cli_help_test.sh GPUFLEET SOURCE_DIR}"

run "$WORK/top" "$GPUFLEET" --help
expect_rc "$WORK/top" 0 "gpufleet --help"
for word in sim policies version; do
  expect_contains "$WORK/top.out" "$word" "gpufleet --help lists its commands"
done
# The top-level help points at the per-command examples ("... options and examples").
grep -qi "examples" "$WORK/top.out" || { show "$WORK/top"; fail "gpufleet --help does not mention examples"; }

run "$WORK/sim" "$GPUFLEET" sim --help
expect_rc "$WORK/sim" 0 "gpufleet sim --help"
expect_contains "$WORK/sim.out" "Examples:" "gpufleet sim --help"
for flag in --trace --columns --cluster --cluster-gpus --policy --compare --jobs-out --plot --skip-bad-rows; do
  expect_contains "$WORK/sim.out" "$flag" "gpufleet sim --help documents $flag"
done

# Files of this repository that the examples use (data/..., examples/...) exist.
paths=$(grep -oE '(data|examples)/[A-Za-z0-9_./-]+\.(csv|yaml|yml|jsonl)' "$WORK/sim.out" | sort -u || true)
[[ -n "$paths" ]] || fail "gpufleet sim --help: the examples name no bundled trace or cluster file"
for p in $paths; do
  [[ -f "$SRC/$p" ]] || fail "gpufleet sim --help: an example uses $p, which is not in the repository"
done

# The agent talks to the controller's agent listener (the API port + 1): its default and every
# example name that port, and no example passes a flag the command refuses (--join-token).
run "$WORK/agent" "$GPUFLEET" agent --help
expect_rc "$WORK/agent" 0 "gpufleet agent --help"
expect_contains "$WORK/agent.out" "http://127.0.0.1:8471" "gpufleet agent --help: the default --server is the agent listener"
if grep -E 'gpufleet agent .*:8470|--join-token [^-]' "$WORK/agent.out"; then
  fail "gpufleet agent --help: an example names the API port or passes --join-token"
fi
run "$WORK/agentjt" "$GPUFLEET" agent --join-token gf_join_x --fake-gpus 1xH100
expect_rc "$WORK/agentjt" 2 "gpufleet agent --join-token (refused: the secret would show in ps)"
# A join token file that is not there is named, not taken for no file at all.
run "$WORK/agentjf" env GPUFLEET_JOIN_TOKEN=gf_join_from_env "$GPUFLEET" agent --join-token-file "$WORK/no-such.token" \
  --fake-gpus 1xH100 --data-dir "$WORK/agent-data"
expect_rc "$WORK/agentjf" 2 "gpufleet agent --join-token-file MISSING"
expect_contains "$WORK/agentjf.err" "--join-token-file $WORK/no-such.token: no such file" "the missing token file is named"

# --version answers as `gpufleet version` does.
run "$WORK/ver" "$GPUFLEET" version
run "$WORK/dashver" "$GPUFLEET" --version
expect_rc "$WORK/dashver" 0 "gpufleet --version"
cmp -s "$WORK/ver.out" "$WORK/dashver.out" || { show "$WORK/dashver"; fail "gpufleet --version differs from gpufleet version"; }
# An unknown word after a command that has subcommands is named, with the ones there are.
run "$WORK/lst" "$GPUFLEET" token lst
expect_rc "$WORK/lst" 2 "gpufleet token lst"
expect_contains "$WORK/lst.err" "unknown subcommand 'lst' (subcommands: create, list, revoke)" "gpufleet token lst"
# The commands with subcommands have examples of their own, not the top level's.
for group in node token; do
  run "$WORK/g-$group" "$GPUFLEET" "$group" --help
  expect_contains "$WORK/g-$group.out" "gpufleet $group " "gpufleet $group --help has its own examples"
  if grep -q "gpufleet sim --trace" "$WORK/g-$group.out"; then fail "gpufleet $group --help shows the top-level examples"; fi
done
# A token id that cannot be one is refused before any request (it asked for no route at all).
run "$WORK/revoke" "$GPUFLEET" token revoke xyz --server http://127.0.0.1:9
expect_rc "$WORK/revoke" 2 "gpufleet token revoke xyz"
expect_contains "$WORK/revoke.err" "'xyz' is not a token id" "gpufleet token revoke xyz"
run "$WORK/joinrole" "$GPUFLEET" token create --join --role admin --server http://127.0.0.1:9
expect_rc "$WORK/joinrole" 2 "gpufleet token create --join --role admin (a join token has no role)"
# `run` tells what is wrong with its flags in flags, not in the job file it makes of them.
run "$WORK/rungpus" "$GPUFLEET" run --gpus -1 --server http://127.0.0.1:9 -- true
expect_rc "$WORK/rungpus" 2 "gpufleet run --gpus -1"
expect_contains "$WORK/rungpus.err" "gpufleet run: --gpus: must be from 0 to 1024 per node, got -1" "run --gpus -1"
run "$WORK/runenv" "$GPUFLEET" run --env 1A=x --server http://127.0.0.1:9 -- true
expect_contains "$WORK/runenv.err" "gpufleet run: --env 1A: is not a valid environment variable name" "run --env 1A=x"
# -o takes text and table alike on every command (listings said table, reports text).
run "$WORK/otable" "$GPUFLEET" policies -o table
expect_rc "$WORK/otable" 0 "gpufleet policies -o table"
run "$WORK/otext" "$GPUFLEET" queue -o text --server http://127.0.0.1:9
expect_rc "$WORK/otext" 3 "gpufleet queue -o text (accepted; the controller is not there)"
# A file argument that is a directory, or missing, says which.
run "$WORK/subdir" "$GPUFLEET" submit "$WORK" --server http://127.0.0.1:9
expect_rc "$WORK/subdir" 2 "gpufleet submit DIRECTORY"
expect_contains "$WORK/subdir.err" "$WORK: is a directory, not a file" "submit of a directory"
run "$WORK/submissing" "$GPUFLEET" submit "$WORK/no-such.yaml" --server http://127.0.0.1:9
expect_contains "$WORK/submissing.err" "$WORK/no-such.yaml: no such file" "submit of a missing file"
# A budget period (or stop rule) without a limit is refused: without limits the budget is removed.
# A command whose own flags were not put after --: told where the command goes.
run "$WORK/rundash" "$GPUFLEET" run --gpus 0 echo -n hi
expect_rc "$WORK/rundash" 2 "gpufleet run --gpus 0 echo -n hi"
expect_contains "$WORK/rundash.err" "Put the command after --, its flags and all" "run without --"
run "$WORK/runtypo" "$GPUFLEET" run --gpuz 1 python3 x.py
expect_rc "$WORK/runtypo" 2 "gpufleet run --gpuz 1 python3 x.py"
if grep -q "Put the command after --" "$WORK/runtypo.err"; then fail "a mistyped flag of run's got the -- hint: $(cat "$WORK/runtypo.err")"; fi
expect_contains "$WORK/runtypo.err" "--gpuz" "a mistyped flag of run's is named"
run "$WORK/budgetperiod" "$GPUFLEET" budget ml --period daily --server http://127.0.0.1:9
expect_rc "$WORK/budgetperiod" 2 "gpufleet budget ml --period daily (no limit)"
expect_contains "$WORK/budgetperiod.err" "--period needs a limit to apply to" "budget --period without a limit"
# Help that cannot be written (a full disk) is a failure too.
if [[ -w /dev/full ]]; then
  rc=0
  "$GPUFLEET" sim --help >/dev/full 2>"$WORK/helpfull.err" || rc=$?
  [[ $rc == 1 ]] || fail "sim --help to a full disk: exit status $rc, expected 1"
  expect_contains "$WORK/helpfull.err" "could not write the output" "sim --help to a full disk"
fi
# An empty value for a flag that names a file (a script's unset variable) is refused, not read as
# the flag left out (sim wrote no per-job CSV and said nothing).
run "$WORK/emptyout" "$GPUFLEET" sim --trace "$SRC/tests/data/cli/tiny.csv" --cluster-gpus 8 --jobs-out ''
expect_rc "$WORK/emptyout" 2 "sim --jobs-out ''"
expect_contains "$WORK/emptyout.err" "--jobs-out: an empty value" "sim --jobs-out ''"
run "$WORK/emptyfmt" "$GPUFLEET" plan --trace "$SRC/tests/data/cli/tiny.csv" --format ''
expect_rc "$WORK/emptyfmt" 2 "plan --format ''"
expect_contains "$WORK/emptyfmt.err" "--format: an empty value" "plan --format ''"
# An empty request id and a variable given twice are refused before anything is sent.
run "$WORK/emptyrid" "$GPUFLEET" submit job.yaml --request-id '' --server http://127.0.0.1:9
expect_rc "$WORK/emptyrid" 2 "submit --request-id ''"
expect_contains "$WORK/emptyrid.err" "an empty request id" "submit --request-id ''"
run "$WORK/envtwice" "$GPUFLEET" run --env A=1 --env A=2 --server http://127.0.0.1:9 -- true
expect_rc "$WORK/envtwice" 2 "run --env A twice"
expect_contains "$WORK/envtwice.err" "--env A is given twice" "run --env A twice"
# A flag before the command is told to go after it (it crashed the CLI).
run "$WORK/lead" "$GPUFLEET" --server http://127.0.0.1:9 queue
expect_rc "$WORK/lead" 2 "gpufleet --server URL queue"
expect_contains "$WORK/lead.err" "--server goes after the command: gpufleet queue --server" "a leading flag"
# Revoking by the secret instead of its id: not printed back.
run "$WORK/revsecret" "$GPUFLEET" token revoke gf_user_37e6b6aab1940df1005b37c023193387 --server http://127.0.0.1:9
expect_rc "$WORK/revsecret" 2 "token revoke SECRET"
if grep -q 37e6b6aab1940df1005b37c023193387 "$WORK/revsecret.err"; then fail "token revoke printed the secret"; fi
expect_contains "$WORK/revsecret.err" "that is a token, not its id" "token revoke SECRET says what it is"
# A token typed where it does not belong is not printed back in the parse error.
secret=gf_user_37e6b6aab1940df1005b37c023193387
run "$WORK/leak" "$GPUFLEET" backup --data-dir "$WORK/none" "$WORK/x.db" "$secret"
expect_rc "$WORK/leak" 2 "a stray token on the command line"
if grep -q "$secret" "$WORK/leak.out" "$WORK/leak.err"; then show "$WORK/leak"; fail "a parse error printed the token"; fi
expect_contains "$WORK/leak.err" "gf_user_" "the parse error names what was not expected"

echo "PASS: gpufleet --help and gpufleet sim --help (examples use: $(echo $paths))"
