#!/usr/bin/env bash
# `make test-module`: the shared module's own tests (examples/modules/*/tests)
# with `terraform test` and `tofu test`, against the lab. Needs `make tools
# lab-up`. Each CLI applies the module, asserts, and destroys what it made.
#   CLIS="terraform"  runs one CLI only.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
clis=${CLIS:-terraform tofu}
# The CLIs, built if they are not yet: on a new machine CI builds the
# toolchain in the background, and test-all's lane 2 gets here before
# the checks that wait for it (a build under way holds the tool's lock: this
# waits for it, then finds it built).
# shellcheck disable=SC2086 # one word per CLI
bash scripts/tools.sh $clis >&2
# This build of the provider instead of a registry download, for both CLIs.
rc=$(bash scripts/dev-provider.sh)
export TF_CLI_CONFIG_FILE="$rc" TF_IN_AUTOMATION=1

lab=${LAB_FILE:-$root/.lab/lab.json}   # a lane's lab file in CI (scripts/test-all.sh)
vars="$(dirname "$lab")/module-test-$(basename "$lab" .json).tfvars.json"
# The module's inputs for the lab's first two nodes.
python3 - "$lab" "$vars" <<'PY'
import json, sys
lab = json.load(open(sys.argv[1]))
nodes = lab["nodes"][:2]
json.dump({
    "nodes": [{"name": n["name"], "ssh_host": n["ssh_host"], "fabric_ip": n["fabric_ip"]} for n in nodes],
    "ray_command": nodes[0]["ray_command"],
    "vllm_command": nodes[0]["vllm_command"],
    "model": nodes[0]["model_path"],
    "served_model_name": "tiny",
    "api_key_file": "/etc/vllm-api-key",
}, open(sys.argv[2], "w"), indent=2)
PY
# SSH access the way a CI runner gives it: the provider's environment.
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$lab" "$1"; }
export SPARK_SSH_USER=$(field ssh_user) SPARK_SSH_PRIVATE_KEY_FILE=$(field private_key_file) \
  SPARK_SSH_KNOWN_HOSTS_FILE=$(field known_hosts_file)
# The API key lives on the head in a 0600 file; it never enters Terraform.
head_container=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["nodes"][0]["container"])' "$lab")
python3 -c 'import secrets; print(secrets.token_hex(16))' |
  docker exec -i "$head_container" sh -c 'umask 077; cat > /etc/vllm-api-key && chown "$0" /etc/vllm-api-key' "$SPARK_SSH_USER"

status=0
for cli in $clis; do
  for mod in examples/modules/*/; do
    echo "=== $cli test $mod"
    (cd "$mod" && "$root/.tools/bin/$cli" test -no-color -var-file="$vars") || status=1
  done
done
exit $status
