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
( make --no-print-directory lab-up >"$lab_log" 2>&1; echo $? >"$lab_log.rc" ) &
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
trap 'kill -TERM -- "-$checks_pid" 2>/dev/null || true' EXIT
checks_wait() {
  local rc=0
  wait "$checks_pid" || rc=$?
  cat "$checks_log"
  local line
  while read -r line; do timings+=("$line (beside acc-terraform)"); done < <(grep '^timing:' "$checks_log")
  return "$rc"
}

phase acc-terraform  make --no-print-directory testacc-terraform
phase checks         checks_wait
phase release-install make --no-print-directory release-install
phase acc-opentofu   make --no-print-directory testacc-tofu
phase acc-ray-next   make --no-print-directory testacc-ray-next
phase module-test    make --no-print-directory test-module
phase reality        make --no-print-directory reality

echo "=== all phases passed"
printf '%s\n' "${timings[@]}"
