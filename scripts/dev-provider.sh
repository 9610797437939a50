#!/usr/bin/env bash
# Builds this checkout's provider into .tools/dev-provider and writes
# .tools/dev.tfrc, a CLI configuration whose dev_overrides make Terraform and
# OpenTofu (each under its own registry host) use that build instead of a
# registry download. Prints the configuration's path. Used by the demo, the
# module's tests, the docs and the bench.
set -euo pipefail
cd "$(dirname "$0")/.."
dev="$PWD/.tools/dev-provider"
rc="$PWD/.tools/dev.tfrc"
mkdir -p "$dev"
# Built aside, then renamed: two test lanes may build at once (scripts/test-all.sh).
# Outside $dev: the CLIs look there for any file named like the provider.
tmp=$(mktemp -d "$PWD/.tools/dev-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/terraform-provider-spark" .
mv -f "$tmp/terraform-provider-spark" "$dev/terraform-provider-spark"
cat >"$rc.$$" <<RC
provider_installation {
  dev_overrides {
    "registry.terraform.io/lab-infra/spark" = "$dev"
    "registry.opentofu.org/lab-infra/spark" = "$dev"
  }
  direct {}
}
RC
mv -f "$rc.$$" "$rc"
echo "$rc"
