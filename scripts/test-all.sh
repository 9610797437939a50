#!/usr/bin/env bash
# The whole test suite, phase by phase, one timing line per phase. This is
# the README's test command (`make test-all`) and what CI runs.
#
# The lab phases run in two lanes at once, each on a 2-node lab of its own
# (a 4-node lab split in two: .lab/lane-1.json, .lab/lane-2.json). Nothing
# one lane's tests do reaches the other's nodes.
#   lane 1: every test that starts vLLM, one at a time, on Terraform and on
#           OpenTofu, then the module's tests and make reality
#   lane 2: the tests that start no vLLM (LANE2_TESTS in the GNUmakefile)
# vLLM's start-up takes both cores for half a minute; Ray's, a node's facts
# and the lab's waits take little. Two vLLM start-ups at once miss their
# readiness bounds, so only one lane starts vLLM.
set -euo pipefail
cd "$(dirname "$0")/.."

timings=()
failed=()
# phase NAME CMD...: runs CMD, records its time; a failure is recorded, and
# the caller decides whether to go on.
phase() {
  local name=$1; shift
  local t0=$SECONDS
  echo "=== phase $name: $*"
  if ! "$@"; then
    echo "=== phase $name FAILED after $((SECONDS - t0))s" >&2
    timings+=("timing: $(printf '%-18s' "$name") $((SECONDS - t0))s FAILED")
    failed+=("$name")
    return 1
  fi
  timings+=("timing: $(printf '%-18s' "$name") $((SECONDS - t0))s")
  echo "${timings[-1]}"
}
finish() {
  printf '%s\n' "${timings[@]}"
  if [ ${#failed[@]} -gt 0 ]; then
    echo "=== FAILED: ${failed[*]}" >&2
    exit 1
  fi
}

# The lab (Docker engine, base image, Python environment: mostly downloads
# and disk) builds while the toolchain (mostly compiling) does: on a new
# machine they are the two longest phases, and they need nothing of each other.
mkdir -p .lab
lab_log=.lab/lab-up.log
rm -f "$lab_log.rc"
( make --no-print-directory lab-up NODES=4 LANES=2 >"$lab_log" 2>&1; echo $? >"$lab_log.rc" ) &
lab_pid=$!
lab_wait() {
  wait "$lab_pid" || true
  cat "$lab_log"
  [ "$(cat "$lab_log.rc" 2>/dev/null)" = 0 ]
}
phase tools          make --no-print-directory tools || { wait "$lab_pid" || true; finish; }
phase lab-up         lab_wait || finish
phase unit           make --no-print-directory test || finish
phase lint           make --no-print-directory lint || finish
phase docs-check     make --no-print-directory docs-check || finish
phase release-check  make --no-print-directory release-check || finish

# Lane 2 runs in the background into its own log, printed whole when it
# ends; lane 1 prints as it goes. Each lane runs all its phases even when
# one fails, so one run shows every failure.
lane2_log=.lab/lane-2.log
lane2() {
  export LAB_FILE=$PWD/.lab/lane-2.json
  phase acc-terraform-2 make --no-print-directory testacc-terraform ACC_LANE=2 || true
  phase acc-opentofu-2  make --no-print-directory testacc-tofu ACC_LANE=2 || true
  printf '%s\n' "${timings[@]}" >"$lane2_log.timings"
  [ ${#failed[@]} -eq 0 ]
}
rm -f "$lane2_log.timings"
lanes_t0=$SECONDS
( timings=(); failed=(); lane2 ) >"$lane2_log" 2>&1 &
lane2_pid=$!
export LAB_FILE=$PWD/.lab/lane-1.json
phase acc-terraform-1 make --no-print-directory testacc-terraform ACC_LANE=1 || true
phase acc-opentofu-1  make --no-print-directory testacc-tofu ACC_LANE=1 || true
phase module-test     make --no-print-directory test-module || true
phase reality         make --no-print-directory reality || true
unset LAB_FILE
lane2_rc=0
wait "$lane2_pid" || lane2_rc=$?
echo "=== lane 2 (LAB_FILE=.lab/lane-2.json), its whole log:"
cat "$lane2_log"
[ -f "$lane2_log.timings" ] && mapfile -t -O "${#timings[@]}" timings <"$lane2_log.timings"
[ "$lane2_rc" = 0 ] || failed+=("lane 2")
timings+=("timing: $(printf '%-18s' lanes) $((SECONDS - lanes_t0))s (both lanes, side by side)")

[ ${#failed[@]} -eq 0 ] && echo "=== all phases passed"
finish
