#!/usr/bin/env bash
# Measures, side by side in one run (these machines are shared and noisy,
# so compare medians from the same run, never across runs):
#   plan      `terraform plan` with no changes on the demo (2 spark_node reads,
#             spark_ray_cluster with 2 nodes, spark_vllm_deployment)
#   cluster   the same plan for the 2-node spark_ray_cluster alone (-target)
#   floor     what an operator does by hand for the same answer: `ssh <head> true`
#             plus one ray.nodes() query on the head
#   apply     `terraform apply` from nothing (cluster + deployment ready), ROUNDS_APPLY times
# and counts SSH handshakes per plan on each node (sshd's "Accepted publickey").
# Usage: scripts/bench-plan.sh [rounds]   (after `make demo`)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v ssh >/dev/null || { echo "bench-plan.sh needs an ssh client for the floor (apt-get install openssh-client)" >&2; exit 1; }
root=$PWD
rounds=${1:-7}
rounds_apply=${ROUNDS_APPLY:-3}
export TF_CLI_CONFIG_FILE="$root/.tools/demo.tfrc" TF_IN_AUTOMATION=1
tf="${TF:-$root/.tools/bin/terraform}"
lab="$root/.lab/lab.json"
field() { python3 -c 'import json,sys; print(eval("json.load(open(sys.argv[1]))" + sys.argv[2]))' "$lab" "$1"; }
head=$(field '["nodes"][0]["ssh_host"]')
containers=$(python3 -c 'import json,sys; print(" ".join(n["container"] for n in json.load(open(sys.argv[1]))["nodes"]))' "$lab")
ssh_head=(ssh -q -o BatchMode=yes -o UserKnownHostsFile="$(field '["known_hosts_file"]')" -i "$(field '["private_key_file"]')" "$(field '["ssh_user"]')@$head")
py=$(field '["nodes"][0]["python_command"]')
query='import ray; ray.init(address="auto", logging_level="ERROR"); ray.nodes(); ray.shutdown()'
auth='[ -s "$HOME/.ray/auth_token" ] && export RAY_AUTH_MODE=token'
now() { python3 -c 'import time; print(time.monotonic())'; }
elapsed() { python3 -c "print(round($2 - $1, 3))"; }
median() { python3 -c 'import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print("%.2f" % statistics.median(v))' "$@"; }
accepted() { local n=0; for c in $containers; do n=$((n + $(docker logs "$c" 2>&1 | grep -c 'Accepted publickey'))); done; echo "$n"; }

cd examples/demo
"$tf" apply -auto-approve -input=false >/dev/null
plan=() cluster=() floor=() hs=()
for i in $(seq "$rounds"); do
  before=$(accepted)
  t0=$(now); "$tf" plan -input=false -detailed-exitcode >/dev/null; t1=$(now)
  hs+=($(( $(accepted) - before )))
  plan+=("$(elapsed "$t0" "$t1")")
  t0=$(now); "$tf" plan -input=false -detailed-exitcode -target=spark_ray_cluster.lab >/dev/null 2>&1; t1=$(now)
  cluster+=("$(elapsed "$t0" "$t1")")
  t0=$(now); "${ssh_head[@]}" true; "${ssh_head[@]}" "$auth; $py -c '$query'" 2>/dev/null; t1=$(now)
  floor+=("$(elapsed "$t0" "$t1")")
done
apply=()
for i in $(seq "$rounds_apply"); do
  "$tf" destroy -auto-approve -input=false >/dev/null
  t0=$(now); "$tf" apply -auto-approve -input=false >/dev/null; t1=$(now)
  apply+=("$(elapsed "$t0" "$t1")")
done
nodes=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["nodes"]))' "$lab")
echo "plan (no changes):   median $(median "${plan[@]}") s   over $rounds: ${plan[*]}"
echo "cluster-only plan:   median $(median "${cluster[@]}") s   over $rounds: ${cluster[*]}"
echo "floor (ssh+nodes()): median $(median "${floor[@]}") s   over $rounds: ${floor[*]}"
echo "ratio plan/floor:    $(python3 -c "print(round($(median "${plan[@]}") / $(median "${floor[@]}"), 2))")   cluster-only/floor: $(python3 -c "print(round($(median "${cluster[@]}") / $(median "${floor[@]}"), 2))")"
echo "apply from nothing:  median $(median "${apply[@]}") s   over $rounds_apply: ${apply[*]}"
echo "SSH handshakes per plan: ${hs[*]} (distinct hosts: $nodes)"
