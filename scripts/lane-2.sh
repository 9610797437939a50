#!/usr/bin/env bash
# Lane 2's track of test-all (scripts/test-all.sh runs it in the background,
# with LAB_FILE set to lane 2's nodes, while lane 1 runs the acceptance tests
# that start a vLLM server): the acceptance tests that start none, the
# Ray-reading tests on the second Ray release, the shared module's tests, one
# at a time on this lane's nodes; then the reality table, on this lane, taking
# lane 1 too once $1 exists (test-all creates it when lane 1's acceptance
# phases have passed). Each lane then takes the next row when it is free.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/step.sh
lane1_free=$1

step acc-terraform-no-server make --no-print-directory testacc-terraform-no-server
step acc-ray-next  make --no-print-directory testacc-ray-next
step module-test   make --no-print-directory test-module
step reality       make --no-print-directory reality LABS="$LAB_FILE,${LANE1_LAB_FILE:?}" JOIN_WHEN="$lane1_free"
