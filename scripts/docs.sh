#!/usr/bin/env bash
# `make docs`: docs/ from templates/, examples/ and the provider's schema.
# The schema comes from OpenTofu (`tofu providers schema -json`): Terraform
# 1.8.5, the one built here, predates write-only attributes and drops the flag,
# so its schema would document api_key_wo as an ordinary argument.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=$(bash scripts/dev-provider.sh)
cat >"$tmp/main.tf" <<'TF'
terraform {
  required_providers {
    spark = { source = "lab-infra/spark" }
  }
}
TF
(cd "$tmp" && TF_CLI_CONFIG_FILE="$rc" "$root/.tools/bin/tofu" providers schema -json >"$tmp/tofu.json")
# tfplugindocs looks the provider up by its short name.
python3 - "$tmp/tofu.json" "$tmp/schema.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
(schema,) = s["provider_schemas"].values()
s["provider_schemas"] = {"spark": schema}
json.dump(s, open(sys.argv[2], "w"))
PY
"$root/.tools/bin/terraform" fmt -recursive examples/
tfplugindocs generate --provider-name spark --rendered-provider-name spark --providers-schema "$tmp/schema.json"
tfplugindocs validate --provider-name spark
