#!/usr/bin/env bash
# `make checks`: everything of the suite that needs no lab, one timed step at
# a time: the rest of the toolchain, unit tests, lint, docs, the release
# configuration. scripts/test-all.sh runs it beside the Terraform acceptance
# tests (see there why the nice values are what they are).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/step.sh

step tools         nice -n 19 make --no-print-directory tools
# The unit tests' packages compiled ahead at nice 19 (-run '^$' runs none),
# so the run at nice 0 below, whose tests time sub-second deadlines, mostly
# links and tests.
step unit-build    nice -n 19 go test -race -count=1 -run '^$' ./...
step unit          make --no-print-directory test
step lint          nice -n 19 make --no-print-directory lint
step docs-check    nice -n 19 make --no-print-directory docs-check
step release-check nice -n 19 make --no-print-directory release-check
