#!/usr/bin/env bash
# The whole test suite, phase by phase, one timing line per phase. This is
# the README's test command (`make test-all`) and what CI runs.
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
# and disk) builds while the toolchain (mostly compiling) does: on a new
# machine they are the two longest phases, and they need nothing of each other.
mkdir -p .lab
lab_log=.lab/lab-up.log
rm -f "$lab_log.rc"
( make --no-print-directory lab-up >"$lab_log" 2>&1; echo $? >"$lab_log.rc" ) &
lab_pid=$!
phase tools          make --no-print-directory tools
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
phase unit           make --no-print-directory test
phase lint           make --no-print-directory lint
phase docs-check     make --no-print-directory docs-check
phase release-check  make --no-print-directory release-check
phase release-install make --no-print-directory release-install
phase acc-terraform  make --no-print-directory testacc-terraform
phase acc-opentofu   make --no-print-directory testacc-tofu
phase acc-ray-next   make --no-print-directory testacc-ray-next
phase module-test    make --no-print-directory test-module
phase reality        make --no-print-directory reality

echo "=== all phases passed"
printf '%s\n' "${timings[@]}"
