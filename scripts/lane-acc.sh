#!/usr/bin/env bash
# Lane 1's acceptance phases after Terraform's (scripts/test-all.sh runs this
# in the background while `make reality` starts on lane 2): OpenTofu's
# subset, the Ray-reading tests on the second Ray release, the shared
# module's tests, one at a time on LAB_FILE's nodes. When they pass it
# creates $1, and reality's second lane starts taking rows on these nodes.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/step.sh
free=$1
rm -f "$free"

step acc-opentofu  make --no-print-directory testacc-tofu
step acc-ray-next  make --no-print-directory testacc-ray-next
step module-test   make --no-print-directory test-module
touch "$free"
