#!/usr/bin/env bash
# `make demo`: the field report on the lab, start to finish: it brings the
# lab up and builds Terraform first.
#   1. plan the field report's mistake (VLLM_HOST_IP = the head's fabric address
#      while Ray registers its external one) and show the plan's diagnostic;
#   2. apply the fixed configuration: Ray cluster + real vLLM (CPU build), chat;
#   3. the default executor with the same mistake: a warning, and it serves;
#   4. a plan with no changes.
# It leaves running: the lab (dockerd and its node containers), and on
# them the demo's Ray cluster and vLLM server (`make demo-down` destroys
# those; `make test-all` does it first, saying so).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# The lab and Terraform build side by side: on a new machine, downloads
# and disk beside compiling.
mkdir -p .lab .tools
( bash scripts/tools.sh terraform >.lab/demo-tools.log 2>&1; echo $? >.lab/demo-tools.rc ) &
tools_pid=$!
make --no-print-directory lab-up
wait "$tools_pid" || true
if [ "$(cat .lab/demo-tools.rc 2>/dev/null)" != 0 ]; then
  cat .lab/demo-tools.log >&2
  echo "demo: building Terraform failed" >&2
  exit 1
fi
# Use this build of the provider instead of a registry download.
rc=$(bash scripts/dev-provider.sh)
export TF_CLI_CONFIG_FILE="$rc" TF_IN_AUTOMATION=1
tf="${TF:-$root/.tools/bin/terraform}"
lab="$root/.lab/lab.json"
field() { python3 -c 'import json,sys; print(eval("json.load(open(sys.argv[1]))" + sys.argv[2]))' "$lab" "$1"; }
head_fab=$(field '["nodes"][0]["fabric_ip"]')
key_file="$root/.lab/demo-api-key"

# The API key lives on the head in a 0600 file; it never enters Terraform.
[ -s "$key_file" ] || { umask 077; python3 -c 'import secrets; print(secrets.token_hex(16))' > "$key_file"; }
# (Written through Docker: a fresh machine need not have an ssh client.)
docker exec -i "$(field '["nodes"][0]["container"]')" sh -c 'umask 077; cat > /etc/vllm-api-key && chown "$0" /etc/vllm-api-key' "$(field '["ssh_user"]')" < "$key_file"

cd examples/demo
chat() {
  python3 - "$("$tf" output -raw endpoint)" "$key_file" <<'PY'
import json, sys, urllib.request
endpoint, key = sys.argv[1], open(sys.argv[2]).read().strip()
req = urllib.request.Request(endpoint + "/chat/completions", method="POST",
    data=json.dumps({"model": "tiny", "max_tokens": 8,
                     "messages": [{"role": "user", "content": "Say hello from the Spark lab."}]}).encode(),
    headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
reply = json.load(urllib.request.urlopen(req, timeout=120))
print("   %s (real vLLM, random weights): %r" % (reply["model"], reply["choices"][0]["message"]["content"]))
PY
}
placement() {
  "$tf" output -json placement | python3 -c '
import json, sys
p = json.load(sys.stdin)
print("   vLLM %s on the head, %s, placement pinned to node:<ip>: %s (placement_ip %s)" % (
    p["vllm_version"], p["executor"], str(p["placement_pinned"]).lower(), p["placement_ip"]))'
}

echo "== 1. the field report's mistake, with vLLM's legacy Ray executor (VLLM_USE_RAY_V2_EXECUTOR_BACKEND=0,"
echo "      how every vLLM before 0.21 places): vllm_host_ip = $head_fab (the fabric address), Ray left to detect"
if "$tf" plan -input=false -compact-warnings -var "vllm_host_ip=$head_fab" -no-color > /tmp/spark-demo-plan.txt 2>&1; then
  echo "unexpected: the plan accepted the mismatch" >&2; exit 1
fi
sed -n '/Error: vLLM placement address/,/RayExecutorV2, which pins nothing/p' /tmp/spark-demo-plan.txt | sed 's/^/   /'

echo "== 2. apply the fix: host_ip = the address Ray registers for the head (real Ray, real vLLM)"
t0=$SECONDS
"$tf" apply -auto-approve -input=false -compact-warnings -no-color > /tmp/spark-demo-apply.txt 2>&1 || { cat /tmp/spark-demo-apply.txt; exit 1; }
echo "   applied in $((SECONDS - t0))s; head registered as $("$tf" output -raw head_registered_ip)"
"$tf" output -json nodes | python3 -c '
import json, sys
for name, n in sorted(json.load(sys.stdin).items()):
    print("   %-7s Ray/vLLM detect %-15s fabric %-15s %s" % (name, n["auto_detected_ip"], n["fabric_ip"],
          "(they differ: the trap)" if n["trap"] else ""))'
placement
echo "   one chat completion through $("$tf" output -raw endpoint):"
chat

echo "== 3. the same mistake with vLLM 0.32's default executor (RayExecutorV2): it pins nothing, so the plan"
echo "      warns and vLLM serves"
t0=$SECONDS
"$tf" apply -auto-approve -input=false -no-color -var "vllm_host_ip=$head_fab" -var legacy_executor=false > /tmp/spark-demo-apply2.txt 2>&1 || { cat /tmp/spark-demo-apply2.txt; exit 1; }
sed -n '/Warning: VLLM_HOST_IP is not the address/,/start the head with node_ip/p' /tmp/spark-demo-apply2.txt | sed 's/^/   /'
echo "   applied in $((SECONDS - t0))s"
placement
chat

echo "== 4. a second plan shows no changes:"
"$tf" plan -input=false -detailed-exitcode -compact-warnings -var "vllm_host_ip=$head_fab" -var legacy_executor=false >/dev/null && echo "   no changes"
echo "(tear down with: make demo-down)"
