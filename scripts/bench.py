#!/usr/bin/env python3
"""`make bench`: issue 10's targets, measured side by side in one run on the lab.

Prints one table: each figure's median and spread (min..max), the ratio
against its target, the node count and the CLI version. Needs `make tools`
and a lab (`NODES=8 make lab-up` for the 8-node rows; with fewer nodes the
largest cluster the lab holds is used and the rows say so).

How each figure is taken (these machines are shared and noisy: every ratio
is between figures of this run, never across runs):
  - plan against floor: farm-bench, A and B alternating (A B A B ...), the
    ratio taken pair by pair; the floor is what an operator does by hand for
    the same answer: `ssh <head> true` plus one ray.nodes() on the head;
  - applies (which need the nodes reset between runs): a loop that resets
    (untimed), then times the apply; the two sides of a ratio alternate
    within each round;
  - a create at N nodes against its by-hand floor at N (the head's ray
    start, then every worker's at once, over SSH, timed like `ray up`), so
    the lab's contention (8 nodes' Ray on 2 cores) cancels in the P2 ratio;
  - `ray up`: Ray's cluster launcher from PyPI (the same Ray as the nodes),
    on-prem `local` provider, empty setup commands, the same `ray start`
    arguments, autoscaler v1 (v2 refuses `available_node_types` on-prem);
    "all nodes alive" is the start of the first ray.nodes() poll on the head
    that saw every node alive (which favours `ray up` by up to one poll);
  - the provider's own CPU time and peak RSS: read from /proc while the
    provider process runs (VmHWM and utime+stime at the last sample);
  - SSH handshakes: sshd's "Accepted publickey" lines on every node;
  - connections left: established TCP connections from this machine to the
    lab's port 22 once the CLI has exited.
"""
import argparse
import glob
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, ".tools")
BENCH = os.path.join(ROOT, ".bench")
RAYUP_CLUSTER = "spark-bench"  # the cluster name ray up is given


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw).stdout


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Lab:
    def __init__(self, path):
        self.f = json.load(open(path))
        self.nodes = self.f["nodes"]

    def ssh(self, node, *argv):
        return ["ssh", "-q", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={self.f['known_hosts_file']}",
                "-i", self.f["private_key_file"], f"{self.f['ssh_user']}@{node['ssh_host']}", *argv]

    def accepted(self, nodes):
        return sum(int(sh(f"docker logs {n['container']} 2>&1 | grep -c 'Accepted publickey' || true").strip() or 0)
                   for n in nodes)

    def raylets(self, nodes):
        return {n["name"]: sh(["docker", "exec", n["container"], "sh", "-c", "pgrep -xo raylet || true"]).strip()
                for n in nodes}

    def stop_ray(self, nodes):
        for n in nodes:
            subprocess.run(["docker", "exec", n["container"], "sh", "-c",
                            f"{n['ray_command']} stop --force >/dev/null 2>&1; pkill -f ray_bootstrap >/dev/null 2>&1; true"],
                           check=False)

    def alive(self, head):
        """Alive nodes in Ray's table, asked on the head (one ray.nodes())."""
        q = ('import ray; ray.init(address="auto", logging_level="ERROR"); '
             'print(sum(1 for n in ray.nodes() if n["Alive"])); ray.shutdown()')
        r = subprocess.run(self.ssh(head, f"{head['python_command']} -c '{q}'"), text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            return int(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return 0


    def all_alive_after(self, t0, n, what):
        """Seconds from t0 to the start of the first ray.nodes() poll on the
        head that sees n nodes alive (bounded: 300 s)."""
        while True:
            p0 = time.monotonic()
            if self.alive(self.nodes[0]) >= n:
                return p0 - t0
            if p0 - t0 > 300:
                sys.exit(f"{what}: not all {n} nodes alive within 300 s")


class ProviderSampler:
    """Peak RSS and CPU time of the provider processes while a CLI runs."""

    def __init__(self):
        self.peak_kib = 0
        self.cpu = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        tick = os.sysconf("SC_CLK_TCK")
        while not self._stop.is_set():
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open(f"/proc/{pid}/comm") as f:
                        if not f.read().startswith("terraform-provi"):
                            continue
                    with open(f"/proc/{pid}/status") as f:
                        m = re.search(r"VmHWM:\s+(\d+)", f.read())
                    with open(f"/proc/{pid}/stat") as f:
                        st = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if m:
                    self.peak_kib = max(self.peak_kib, int(m.group(1)))
                self.cpu[pid] = (int(st[11]) + int(st[12])) / tick
            time.sleep(0.05)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()

    @property
    def cpu_s(self):
        return sum(self.cpu.values())


def ssh_connections_to_lab(subnet_prefix):
    out = sh(["ss", "-Htn", "state", "established", "( dport = :22 )"])
    return sum(1 for line in out.splitlines() if subnet_prefix in line)


class TF:
    def __init__(self, cli, workdir, rc):
        self.cli, self.dir = cli, workdir
        self.env = dict(os.environ, TF_CLI_CONFIG_FILE=rc, TF_IN_AUTOMATION="1")

    def argv(self, *args):
        return [self.cli, f"-chdir={self.dir}", *args]

    def run(self, *args):
        """Runs the CLI and returns its wall time; any exit but 0 ends the
        bench (a no-change plan runs with -detailed-exitcode: 2 is a change)."""
        t0 = time.monotonic()
        r = subprocess.run(self.argv(*args, "-input=false"), env=self.env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        dt = time.monotonic() - t0
        if r.returncode != 0:
            sys.exit(f"{' '.join(self.argv(*args))} exited {r.returncode}:\n{r.stdout[-3000:]}")
        return dt, r.stdout

    def apply(self, *args):
        return self.run("apply", "-auto-approve", *args)[0]

    def destroy(self, *args):
        self.run("destroy", "-auto-approve", *args)


def cluster_config(lab, n_max):
    """A cluster of the first node_count lab nodes, on the fabric, as the pair
    module builds it. Token auth off: `ray up` is given the same arguments."""
    nodes = lab.nodes[:n_max]
    return f'''
terraform {{
  required_providers {{
    spark = {{ source = "lab-infra/spark" }}
  }}
}}
variable "node_count" {{ type = number }}
locals {{
  nodes = {json.dumps([{k: n[k] for k in ("name", "ssh_host", "fabric_ip")} for n in nodes])}
}}
provider "spark" {{
  ssh = {{
    user             = "{lab.f['ssh_user']}"
    private_key_file = "{lab.f['private_key_file']}"
    known_hosts_file = "{lab.f['known_hosts_file']}"
  }}
}}
resource "spark_ray_cluster" "bench" {{
  head = {{ ssh_host = local.nodes[0].ssh_host, node_ip = local.nodes[0].fabric_ip, num_gpus = 1 }}
  workers = {{
    for n in slice(local.nodes, 1, var.node_count) : n.name => {{ ssh_host = n.ssh_host, node_ip = n.fabric_ip, num_gpus = 1 }}
  }}
  runtime        = {{ host = {{ ray_command = "{nodes[0]['ray_command']}" }} }}
  auth_mode      = "disabled"
  dashboard_host = "127.0.0.1"
}}
'''


def ray_start(lab, node, address=None):
    """The provider's `ray start` arguments (internal/ray StartCommand) for
    node: the head's without address, a worker's joining address."""
    ray, ip = lab.nodes[0]["ray_command"], node["fabric_ip"]
    if address is None:
        return (f"VLLM_HOST_IP={ip} {ray} start --head --port=6379 --node-ip-address={ip} --num-gpus=1 "
                "--dashboard-host=127.0.0.1")
    return f"VLLM_HOST_IP={ip} {ray} start --address={address} --node-ip-address={ip} --num-gpus=1"


def rayup_config(lab, path):
    head, worker = lab.nodes[0], lab.nodes[1]
    ray = head["ray_command"]
    # The provider's ray start arguments (internal/ray StartCommand), and
    # the v1 autoscaler the local provider needs in Ray 2.52.1.
    fabric_ip = "$(ip -4 -o addr show dev eth1 | awk '{print $4}' | cut -d/ -f1)"
    cfg = {
        "cluster_name": RAYUP_CLUSTER,
        "max_workers": 1,
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": 60,
        "provider": {"type": "local", "head_ip": head["ssh_host"], "worker_ips": [worker["ssh_host"]]},
        "auth": {"ssh_user": lab.f["ssh_user"], "ssh_private_key": lab.f["private_key_file"]},
        "file_mounts": {}, "cluster_synced_files": [], "file_mounts_sync_continuously": False,
        "rsync_exclude": [], "rsync_filter": [],
        "initialization_commands": [], "setup_commands": [], "head_setup_commands": [], "worker_setup_commands": [],
        "head_start_ray_commands": [
            f"{ray} stop",
            f"RAY_enable_autoscaler_v2=0 {ray_start(lab, head)} --autoscaling-config=~/ray_bootstrap_config.yaml",
        ],
        "worker_start_ray_commands": [
            f"{ray} stop",
            ray_start(lab, {"fabric_ip": fabric_ip}, f"{head['fabric_ip']}:6379"),
        ],
    }
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)  # YAML is a superset of JSON


def ensure_rayup(lab):
    venv = os.path.join(TOOLS, "rayup")
    ray_version = lab.f["ray_version"]
    stamp = os.path.join(venv, ".ray-" + ray_version)
    if not os.path.exists(stamp):
        log(f"installing Ray {ray_version} (the cluster launcher) into {venv}")
        sh([sys.executable, "-m", "venv", venv])
        sh([os.path.join(venv, "bin", "pip"), "install", "-q", f"ray=={ray_version}"])
        open(stamp, "w").close()
    if not shutil.which("rsync"):
        log("installing rsync (the cluster launcher syncs files with it)")
        sh("apt-get install -y -qq --no-install-recommends rsync >/dev/null || "
           "{ apt-get update -qq && apt-get install -y -qq --no-install-recommends rsync >/dev/null; }")
    return os.path.join(venv, "bin", "ray")


def script(name, body):
    path = os.path.join(BENCH, name)
    with open(path, "w") as f:
        f.write("set -e\n" + body)
    return path


def farm(a, b, runs, label):
    """farm-bench: script a against script b, alternating; returns the
    min/median/max rows it prints."""
    log(f"farm-bench: {label}")
    out = sh(["farm-bench", "-n", str(runs), "--warmup", "1", "--timeout", "1800", "--vs", f"sh {b}", "--", "sh", a])
    for side in ("A", "B"):
        if not re.search(rf"^{side} exit 0 \((\d+) of \1\)", out, re.M):
            sys.exit(f"{label}: a run of {side} failed (a no-change plan must exit 0):\n{out}")
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^(A|B|A/B) (wall s|cpu s|wall|cpu)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            rows[(m.group(1), m.group(2).split()[0])] = tuple(float(x) for x in m.groups()[2:])
    if ("A/B", "wall") not in rows:
        sys.exit(f"farm-bench printed no ratio for {label}:\n{out}")
    return rows


def summary(values):
    return (min(values), statistics.median(values), max(values))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7, help="plan pairs per farm-bench call")
    ap.add_argument("--apply-rounds", type=int, default=3, help="rounds of the apply figures")
    ap.add_argument("--cli", default=os.path.join(TOOLS, "bin", "terraform"))
    ap.add_argument("--no-rayup", action="store_true", help="leave out P3 (Ray's cluster launcher)")
    ap.add_argument("--p1-only", action="store_true", help="only the P1 rows (the plan against its floors)")
    a = ap.parse_args()

    lab = Lab(os.environ.get("LAB_FILE", os.path.join(ROOT, ".lab", "lab.json")))
    if len(lab.nodes) < 2:
        sys.exit("the bench needs a lab of 2 nodes or more: NODES=8 make lab-up")
    big = min(8, len(lab.nodes))
    subnet = lab.f["external_subnet"].rsplit(".", 1)[0] + "."
    head = lab.nodes[0]

    os.makedirs(BENCH, exist_ok=True)
    log("building the provider")
    rc = sh(["bash", os.path.join(ROOT, "scripts", "dev-provider.sh")]).strip()
    cli_version = sh([a.cli, "version"]).splitlines()[0]

    results = []  # (id, what, median, spread, ratio, target, ok, note)

    def row(pid, what, fig, ratio, target, note=""):
        results.append((pid, what, fig, ratio, target, ratio <= target, note))

    # --- P1: the whole demo, and the cluster alone, against the floor --------
    demo = TF(a.cli, os.path.join(ROOT, "examples", "demo"), rc)
    log("P1: applying the demo (cluster + real vLLM)")
    # The demo's API key file on the head, as scripts/demo.sh writes it.
    subprocess.run(["docker", "exec", "-i", head["container"], "sh", "-c",
                    'umask 077; cat > /etc/vllm-api-key && chown "$0" /etc/vllm-api-key', lab.f["ssh_user"]],
                   input=os.urandom(16).hex() + "\n", text=True, check=True)
    demo.apply()
    q = 'import ray; ray.init(address="auto", logging_level="ERROR"); ray.nodes(); ray.shutdown()'
    floor = script("floor.sh", f"""{shlex.join(lab.ssh(head, "true"))}
{shlex.join(lab.ssh(head, f'[ -s "$HOME/.ray/auth_token" ] && export RAY_AUTH_MODE=token; {head["python_command"]} -c {shlex.quote(q)}'))}
""")
    plan = f"export TF_CLI_CONFIG_FILE={shlex.quote(rc)} TF_IN_AUTOMATION=1\n" + \
        shlex.join(demo.argv("plan", "-input=false", "-detailed-exitcode", "-lock=false"))
    r = farm(script("plan-demo.sh", plan + " >/dev/null\n"), floor, a.rounds, "demo plan vs floor")
    row("P1", "no-change plan, whole demo / floor", r[("A", "wall")], r[("A/B", "wall")][1], 1.3,
        f"floor {r[('B', 'wall')][1]:.2f} s")
    r = farm(script("plan-cluster.sh", plan + " -target=spark_ray_cluster.lab >/dev/null\n"), floor,
             a.rounds, "cluster plan vs floor")
    row("P1", "no-change plan, cluster alone / floor", r[("A", "wall")], r[("A/B", "wall")][1], 0.8)
    # The CLI's own floor: a no-change plan of a configuration that holds
    # only terraform_data (no provider of ours), against the same floor.
    cli_dir = os.path.join(BENCH, "cli-floor")
    os.makedirs(cli_dir, exist_ok=True)
    with open(os.path.join(cli_dir, "main.tf"), "w") as f:
        f.write('resource "terraform_data" "x" {}\n')
    cli_only = TF(a.cli, cli_dir, rc)
    cli_only.run("init")
    cli_only.apply()
    r = farm(script("plan-cli.sh", f"export TF_IN_AUTOMATION=1\n" + shlex.join(cli_only.argv("plan", "-input=false", "-detailed-exitcode", "-lock=false")) + " >/dev/null\n"),
             floor, a.rounds, "CLI alone vs floor")
    row("P1", "  the CLI alone (terraform_data only) / floor", r[("A", "wall")], r[("A/B", "wall")][1], 0.8,
        "what no provider can go under")
    log("P1: destroying the demo")
    demo.destroy()
    if a.p1_only:
        print_table(results, lab, big, cli_version)
        return

    # --- P2, P3, P4 on a cluster of the lab's nodes ---------------------------
    cdir = os.path.join(BENCH, "cluster")
    os.makedirs(cdir, exist_ok=True)
    with open(os.path.join(cdir, "main.tf"), "w") as f:
        f.write(cluster_config(lab, big))
    c = TF(a.cli, cdir, rc)
    rayup = None
    if not a.no_rayup:
        rayup = ensure_rayup(lab)
        rayup_yaml = os.path.join(BENCH, "rayup.yaml")
        rayup_config(lab, rayup_yaml)

    def fresh():
        c.destroy("-var", "node_count=1")
        lab.stop_ray(lab.nodes[:big])

    apply2, applyN, join1, joinN, reapply, rayup_t, noop_t = [], [], [], [], [], [], []
    plan2, planN, cpuN, hsN, leftN, rssN, others_touched = [], [], [], [], [], [], []

    # The by-hand floor at n nodes: what the plan reads, done by a script
    # with no provider: one SSH session per node, all in parallel, reading
    # the node's hostname, addresses, routes and listeners, and on the head
    # one ray.nodes() (the operator's way to ask Ray). Taken beside each
    # plan at the same n, so the lab's contention (8 nodes on 2 cores) is in
    # both and cancels in the ratio.
    def floor_at(n):
        reads = "cat /proc/sys/kernel/hostname; ip -j addr show; ip -j -4 route get 8.8.8.8; ss -Hltnp"
        lines = [shlex.join(lab.ssh(node, reads)) + " >/dev/null &" for node in lab.nodes[1:n]]
        lines.append(shlex.join(lab.ssh(head, reads + f'; [ -s "$HOME/.ray/auth_token" ] && export RAY_AUTH_MODE=token; '
                                         f'{head["python_command"]} -c {shlex.quote(q)}')) + " >/dev/null")
        lines.append("wait")
        return script(f"floor-{n}.sh", "\n".join(lines) + "\n")

    floors = {2: floor_at(2), big: floor_at(big)}
    floor2, floorN = [], []

    # The by-hand floor of a create at n nodes: what an operator types, with
    # the provider's ray start arguments: the head's ray start, then every
    # worker's at once, each over its own SSH connection; timed, as `ray up`
    # is, to the start of the first ray.nodes() poll on the head that saw
    # every node alive.
    def create_floor_at(n):
        lines = [shlex.join(lab.ssh(head, ray_start(lab, head) + " >/dev/null 2>&1"))]
        for node in lab.nodes[1:n]:
            lines.append(shlex.join(lab.ssh(node, ray_start(lab, node, f"{head['fabric_ip']}:6379") + " >/dev/null 2>&1")) + " &")
        lines.append("wait")
        return script(f"create-floor-{n}.sh", "\n".join(lines) + "\n")

    create_floors = {2: create_floor_at(2), big: create_floor_at(big)}
    cfloor2, cfloorN = [], []

    def time_create_floor(n, into):
        t0 = time.monotonic()
        sh(["bash", create_floors[n]])
        into.append(lab.all_alive_after(t0, n, f"by-hand create of {n} nodes"))
        lab.stop_ray(lab.nodes[:n])

    def plans(n, into, measure=False):
        for _ in range(a.rounds):
            before = lab.accepted(lab.nodes[:n]) if measure else 0
            with ProviderSampler() as s:
                dt, _ = c.run("plan", "-detailed-exitcode", "-lock=false", "-var", f"node_count={n}")
            into.append(dt)
            if measure:
                hsN.append(lab.accepted(lab.nodes[:n]) - before)
                cpuN.append(s.cpu_s)
                rssN.append(s.peak_kib / 1024)
                leftN.append(ssh_connections_to_lab(subnet))
            # After the plan's own counts: the floor opens SSH sessions too.
            t0 = time.monotonic()
            sh(["bash", floors[n]])
            (floorN if n == big else floor2).append(time.monotonic() - t0)

    fresh()
    if rayup:
        # The launcher's first run on a cluster bootstraps it (its state
        # file, the head's copy of the config and key): not timed.
        # Its record of the nodes lives on this machine (the local provider's
        # /tmp/ray/cluster-<name>.state, Ray 2.52.1
        # autoscaler/_private/local/config.py get_state_path): after the lab
        # was re-created it still calls the new head "up-to-date" and skips
        # copying ray_bootstrap_config.yaml there, and the head's autoscaler
        # then never starts a worker. Forgotten, so this run sets the head up.
        for f in glob.glob(f"/tmp/ray/cluster-{RAYUP_CLUSTER}.*"):
            os.remove(f)
        log("ray up --no-restart once, untimed (the launcher's own first-run set-up)")
        sh([rayup, "up", "-y", "--no-restart", rayup_yaml])
        lab.stop_ray(lab.nodes[:big])  # a first launch starts Ray even with --no-restart
    for i in range(a.apply_rounds):
        log(f"round {i + 1}/{a.apply_rounds}: 2 nodes")
        apply2.append(c.apply("-var", "node_count=2"))
        if i == 0:
            plans(2, plan2)
        reapply.append(c.apply("-var", "node_count=2"))
        if rayup:
            t0 = time.monotonic()
            sh([rayup, "up", "-y", "--no-restart", rayup_yaml])
            noop_t.append(time.monotonic() - t0)
        fresh()
        if rayup:
            t0 = time.monotonic()
            sh([rayup, "up", "-y", rayup_yaml])
            rayup_t.append(lab.all_alive_after(t0, 2, "ray up"))
            lab.stop_ray(lab.nodes[:2])
        time_create_floor(2, cfloor2)
        log(f"round {i + 1}/{a.apply_rounds}: {big} nodes")
        applyN.append(c.apply("-var", f"node_count={big}"))
        if i == 0:
            plans(big, planN, measure=True)
        fresh()
        time_create_floor(big, cfloorN)
        c.apply("-var", "node_count=1")
        join1.append(c.apply("-var", "node_count=2"))
        fresh()
        c.apply("-var", f"node_count={big - 1}")
        before = lab.raylets(lab.nodes[:big - 1])
        joinN.append(c.apply("-var", f"node_count={big}"))
        if lab.raylets(lab.nodes[:big - 1]) != before:
            others_touched.append(i)
        fresh()

    med = statistics.median
    row("P2", f"no-change plan, {big} nodes / 2 nodes", summary(planN), med(planN) / med(plan2), 1.2,
        f"2 nodes {med(plan2):.2f} s; provider CPU {med(cpuN):.2f} s of {med(planN):.2f} s wall")
    row("P2", f"  the same, each over its by-hand floor at the same N", summary(planN),
        (med(planN) / med(floorN)) / (med(plan2) / med(floor2)), 1.2,
        f"floor {med(floor2):.2f} s at 2, {med(floorN):.2f} s at {big}; provider CPU per node {med(cpuN) / big * 1000:.0f} ms")
    row("P2", f"apply from nothing, {big} nodes / 2 nodes", summary(applyN), med(applyN) / med(apply2), 1.5,
        f"2 nodes {med(apply2):.2f} s")
    row("P2", f"  the same, each over its by-hand floor at the same N", summary(applyN),
        (med(applyN) / med(cfloorN)) / (med(apply2) / med(cfloor2)), 1.2,
        f"by-hand ray start, head then workers: {med(cfloor2):.2f} s at 2, {med(cfloorN):.2f} s at {big}")
    row("P2", f"add 1 worker to {big - 1} nodes / to a head alone", summary(joinN), med(joinN) / med(join1), 1.0,
        f"one join {med(join1):.2f} s; other nodes' raylets " + ("untouched" if not others_touched else
                                                                 f"RESTARTED in rounds {others_touched}"))
    if rayup:
        row("P3", "apply from nothing (2 nodes alive) / ray up (2 nodes alive)", summary(apply2),
            med(apply2) / med(rayup_t), 0.5, f"ray up {med(rayup_t):.2f} s ({min(rayup_t):.2f}..{max(rayup_t):.2f})")
        row("P3", "re-apply, no change / ray up --no-restart", summary(reapply), med(reapply) / med(noop_t), 1.0,
            f"ray up --no-restart {med(noop_t):.2f} s")
    row("P4", f"SSH handshakes per plan, {big} nodes (target: = hosts)", summary(hsN), med(hsN) / big, 1.0)
    row("P4", f"provider peak RSS MiB, {big}-node plan (target 80)", summary(rssN), med(rssN) / 80, 1.0)
    row("P4", "SSH connections left after the CLI exits", summary(leftN), float(max(leftN)), 0.0)

    print_table(results, lab, big, cli_version)


def print_table(results, lab, big, cli_version):
    print()
    print(f"make bench: {len(lab.nodes)}-node lab, clusters of 2 and {big}; {cli_version}; "
          f"{os.cpu_count()} cores; Ray {lab.f['ray_version']}, vLLM {lab.f.get('vllm_version', '?')}")
    print(f"{'':3} {'figure':58} {'median':>8} {'min..max':>15} {'ratio':>7} {'target':>7}  met")
    for pid, what, fig, ratio, target, ok, note in results:
        lo, mid, hi = fig
        print(f"{pid:3} {what:58} {mid:8.2f} {lo:7.2f}..{hi:<7.2f} {ratio:7.2f} {target:7.2f}  {'yes' if ok else 'NO'}"
              + (f"  ({note})" if note else ""))


if __name__ == "__main__":
    main()
