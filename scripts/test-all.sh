#!/usr/bin/env bash
# The whole test suite, phase by phase, one timing line per phase. This is
# the README's test command (`make test-all`) and what CI runs.
#
# Two tracks. The lab track (the acceptance tests, the module's tests, the
# reality table) runs one phase at a time: its phases share the lab's two
# nodes and ports. The no-lab checks (`make checks`: the toolchain beyond
# Terraform, unit tests, lint, docs, the release configuration) need nothing
# of the lab, so they run beside the lab track's longest phase, Terraform's
# acceptance tests, which leave the CPU 20 to 40 % idle (`vmstat`) while
# they wait on the nodes. Their compiling runs at nice 19: the nodes'
# processes (Ray, vLLM) are in Docker's cgroup and the CLI and provider at
# nice 0, so a compile takes only what those leave (scripts/checks.sh). The
# checks' log and timings are printed when the lab track reaches them
# (phase "checks"), and the run fails there if one failed.
set -euo pipefail
cd "$(dirname "$0")/.."

timings=()
phase() {
  local name=$1; shift
  local t0=$SECONDS
  echo "=== phase $name: $*"
  if ! "$@"; then
    echo "=== phase $name FAILED after $((SECONDS - t0))s" >&2
    printf '%s\n' "${timings[@]}"
    exit 1
  fi
  timings+=("timing: $(printf '%-18s' "$name") $((SECONDS - t0))s")
  echo "${timings[-1]}"
}

# The lab (Docker engine, base image, Python environment: mostly downloads
# and disk) builds while Terraform (mostly compiling) does: on a new
# machine they are the two longest steps, and they need nothing of each other.
mkdir -p .lab
lab_log=.lab/lab-up.log
rm -f "$lab_log.rc"
# Four nodes in two lanes of two (.lab/lane-1.json, .lab/lane-2.json): the
# acceptance tests run on lane 1, the reality table on lane 2 beside the last
# of them, then on both (see "the tail" below).
( make --no-print-directory lab-up NODES=4 LANES=2 >"$lab_log" 2>&1; echo $? >"$lab_log.rc" ) &
lab_pid=$!
phase terraform      bash scripts/tools.sh terraform
lab_wait() {
  wait "$lab_pid" || true
  cat "$lab_log"
  [ "$(cat "$lab_log.rc" 2>/dev/null)" = 0 ]
}
phase lab-up         lab_wait
# The README's first command, `make demo`, leaves its cluster and vLLM
# server on the lab's nodes, holding the ports the tests start Ray on:
# bring it down first, saying so.
demo_up() {
  [ -s examples/demo/terraform.tfstate ] &&
    python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("resources") else 1)' examples/demo/terraform.tfstate
}
if demo_up; then
  echo "=== the demo is up (examples/demo): bringing it down first (make demo-down), so the tests have the lab's nodes to themselves"
  phase demo-down    make --no-print-directory demo-down
fi

# The no-lab checks (scripts/checks.sh), in the background, in a process
# group of their own: a failing lab phase stops the run, and them with it.
checks_log=.lab/checks.log
# Not a process group leader here, setsid makes the script one in place:
# its pid is its group's.
setsid bash scripts/checks.sh >"$checks_log" 2>&1 &
checks_pid=$!
# track_wait PID LOG WHAT: waits for a background track, prints its log and
# adds its timings to the table.
track_wait() {
  local rc=0 line
  wait "$1" || rc=$?
  cat "$2"
  while read -r line; do timings+=("$line ($3)"); done < <(grep '^timing:' "$2")
  return "$rc"
}
trap 'kill -TERM -- "-$checks_pid" 2>/dev/null || true; [ -z "${lane_pid:-}" ] || kill -TERM -- "-$lane_pid" 2>/dev/null || true' EXIT

# The lab track, on two lanes at once (CONTRIBUTING, "CI timings"). Lane 1
# runs the acceptance tests that start a vLLM server, then OpenTofu's subset;
# lane 2 (scripts/lane-2.sh, in the background) runs the ones that start
# none, which wait on Ray, SSH and timeouts rather than the CPU, then the
# second Ray release's tests and the shared module's, then the reality
# table, which takes rows on lane 1 too once lane 1's phases have passed
# (.lab/lane-1.free): each lane takes the next row when it is free, so the
# two finish together. One vLLM start-up runs on each lane at most.
lane1=$PWD/.lab/lane-1.json lane2=$PWD/.lab/lane-2.json
lane_log=.lab/lane-2.log
lane_free=.lab/lane-1.free
rm -f "$lane_free"
LAB_FILE=$lane2 LANE1_LAB_FILE=$lane1 setsid bash scripts/lane-2.sh "$PWD/$lane_free" >"$lane_log" 2>&1 &
lane_pid=$!

export LAB_FILE=$lane1
phase acc-terraform  make --no-print-directory testacc-terraform-serving
phase checks         track_wait "$checks_pid" "$checks_log" "beside acc-terraform"
phase release-install make --no-print-directory release-install
phase acc-opentofu   make --no-print-directory testacc-tofu
touch "$lane_free"
phase lane-2         track_wait "$lane_pid" "$lane_log" "lane 2, beside lane 1"

echo "=== all phases passed"
printf '%s\n' "${timings[@]}"
