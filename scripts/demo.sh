#!/usr/bin/env bash
# `make demo`: build the provider, point Terraform at the local build, and
# read every lab node with spark_node. Assumes `make tools lab-up` ran.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin="$root/.tools/bin"
dev="$root/.tools/dev-provider"
mkdir -p "$dev"
go build -o "$dev/terraform-provider-spark" .

# Use this build of the provider instead of a registry download.
rc="$root/.tools/demo.tfrc"
cat >"$rc" <<RC
provider_installation {
  dev_overrides {
    "lab-infra/spark" = "$dev"
  }
  direct {}
}
RC
export TF_CLI_CONFIG_FILE="$rc" TF_IN_AUTOMATION=1
tf="${TF:-$bin/terraform}"

cd examples/demo
echo "== $("$tf" version | head -1): plan + apply examples/demo against the lab"
"$tf" apply -auto-approve -input=false -compact-warnings >/dev/null
"$tf" output -json nodes | python3 -c '
import json, sys
nodes = json.load(sys.stdin)
print("%-8s %-16s %-16s %s" % ("node", "ray/vllm detect", "fabric address", "verdict"))
for name, n in sorted(nodes.items()):
    verdict = ("MISMATCH: without node_ip / host_ip, Ray registers %s and vLLM pins node:%s" % (n["auto_detected_ip"], n["auto_detected_ip"])
               if n["trap"] else "same")
    print("%-8s %-16s %-16s %s" % (name, n["auto_detected_ip"], n["fabric_ip"], verdict))
'
echo "== a second plan shows no changes:"
"$tf" plan -input=false -detailed-exitcode -compact-warnings >/dev/null && echo "no changes"
