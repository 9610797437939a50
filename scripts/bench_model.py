#!/usr/bin/env python3
"""`make bench-model` (and the last rows of `make bench`): issue 17's copy
targets, side by side in one run, between the lab's first two nodes over the
fabric.

  - the copy: a synthetic model (GiB given, in 256 MiB files) on node 1,
    applied as a spark_model to node 2 by the CLI; its time is the receive
    phase the target's end of the copy reports (the provider's debug log,
    "model copy": receive_ms), so the manifest read at the source and the
    CLI's start are not in it;
  - the floor: a plain socket copy of the same files between the same two
    nodes over the same address, right before each copy (Python's sendfile
    on one end, recv_into and write on the other: no token, no hash);
  - verification: the same copy's verify phase (every file hashed on the
    target before it takes its name: verify_ms) beside `sha256sum` of the
    same files on that node;
  - whole: the provider's step "receive the model's files" (connect, token,
    receive, verify) beside the plain copy plus sha256sum, for the record.
Each round alternates the two sides of a ratio; medians and spreads.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC, DST, RAW = "/tmp/spark-bench-model/src", "/tmp/spark-bench-model/dst", "/tmp/spark-bench-model/raw"

RAW_RECV = r"""
import os, socket, sys
addr, port, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(dst, exist_ok=True)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((addr, port)); s.listen(1)
print("listening", flush=True)
c, _ = s.accept()
buf = bytearray(1 << 22); view = memoryview(buf)
f = None
while True:
    head = b""
    while not head.endswith(b"\n"):
        b = c.recv(1)
        if not b:
            sys.exit(0)
        head += b
    name, size = head.decode().split()
    left = int(size)
    with open(os.path.join(dst, name), "wb") as f:
        while left:
            n = c.recv_into(view, min(left, len(buf)))
            f.write(view[:n]); left -= n
"""

RAW_SEND = r"""
import os, socket, sys, time
addr, port, src = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for _ in range(100):
    try:
        c = socket.create_connection((addr, port)); break
    except OSError:
        time.sleep(0.1)
for name in sorted(os.listdir(src)):
    p = os.path.join(src, name)
    c.sendall(("%s %d\n" % (name, os.path.getsize(p))).encode())
    with open(p, "rb") as f:
        c.sendfile(f)
c.close()
"""


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw).stdout


def log(msg):
    print(f"[bench-model {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Lab:
    def __init__(self, path):
        self.f = json.load(open(path))

    def ssh(self, node, *argv):
        return ["ssh", "-q", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={self.f['known_hosts_file']}",
                "-i", self.f["private_key_file"], f"{self.f['ssh_user']}@{node['ssh_host']}", *argv]

    def on(self, node, script, *args):
        return run(self.ssh(node, "sh", "-c", shq(script), "sh", *[shq(a) for a in args]))


def shq(s):
    return "'" + s.replace("'", "'\\''") + "'"


def raw_copy(lab, src, dst, port):
    """Seconds for a plain socket copy of SRC on src to RAW on dst."""
    lab.on(dst, 'rm -rf "$1"', RAW)
    recv = subprocess.Popen(lab.ssh(dst, "python3", "-c", shq(RAW_RECV), dst["fabric_ip"], str(port), RAW),
                            stdout=subprocess.PIPE, text=True)
    recv.stdout.readline()
    t0 = time.monotonic()
    run(lab.ssh(src, "python3", "-c", shq(RAW_SEND), dst["fabric_ip"], str(port), SRC))
    recv.wait()
    took = time.monotonic() - t0
    lab.on(dst, 'rm -rf "$1"', RAW)
    return took


def copy_phases(log_path):
    """(receive s, verify s) of the last "model copy" line of a debug log."""
    found = None
    for line in open(log_path, errors="replace"):
        if "model copy" in line:
            r, v = re.search(r"receive_ms=(\d+)", line), re.search(r"verify_ms=(\d+)", line)
            if r and v:
                found = (int(r.group(1)) / 1000, int(v.group(1)) / 1000)
    if found is None:
        sys.exit(f"no model copy timings in {log_path}")
    return found


def steps(log_path, step):
    """Durations (s) of the provider's remote steps named step in a debug log."""
    out = []
    for line in open(log_path, errors="replace"):
        if "remote step" in line and f'step="{step}"' in line:
            m = re.search(r"duration_ms=(\d+)", line)
            if m:
                out.append(int(m.group(1)) / 1000)
    return out


def config(lab, src, dst):
    f = lab.f
    return f"""
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
resource "spark_model" "bench" {{
  source  = {{ ssh_host = "{src['ssh_host']}", path = "{SRC}" }}
  targets = {{ {dst['name']} = {{ ssh_host = "{dst['ssh_host']}", address = "{dst['fabric_ip']}", path = "{DST}" }} }}
}}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0, help="size of the synthetic model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cli", default=os.path.join(ROOT, ".tools", "bin", "terraform"))
    a = ap.parse_args()
    lab = Lab(os.environ.get("LAB_FILE", os.path.join(ROOT, ".lab", "lab.json")))
    src, dst = lab.f["nodes"][0], lab.f["nodes"][1]
    rc = run(["bash", os.path.join(ROOT, "scripts", "dev-provider.sh")]).strip()
    files = max(1, int(a.gib * 4))
    log(f"making a {a.gib} GiB model on {src['name']} ({files} files of 256 MiB)")
    lab.on(src, 'rm -rf "$1" && mkdir -p "$1" && i=0; while [ $i -lt "$2" ]; do '
                'head -c 268435456 /dev/urandom > "$1/model-$i.safetensors"; i=$((i+1)); done; '
                'echo "{}" > "$1/config.json"', SRC, str(files))
    size = files * 268435456 + 3
    work = tempfile.mkdtemp(prefix="bench-model-")
    open(os.path.join(work, "main.tf"), "w").write(config(lab, src, dst))
    env = dict(os.environ, TF_CLI_CONFIG_FILE=rc, TF_LOG_PROVIDER="DEBUG", TF_IN_AUTOMATION="1")
    raw, ours, ver, sha, whole = [], [], [], [], []
    for i in range(a.rounds):
        lab.on(dst, 'rm -rf "$1"', DST)
        log(f"round {i + 1}/{a.rounds}: plain socket copy")
        raw.append(raw_copy(lab, src, dst, 42990))
        log(f"round {i + 1}/{a.rounds}: spark_model apply")
        logp = os.path.join(work, f"apply-{i}.log")
        run([a.cli, "apply", "-auto-approve", "-input=false"], cwd=work, env=dict(env, TF_LOG_PATH=logp))
        receive, verify = copy_phases(logp)
        ours.append(receive)
        ver.append(verify)
        whole.append(steps(logp, "receive the model's files")[-1])
        t0 = time.monotonic()
        lab.on(dst, 'cd "$1" && sha256sum -- * >/dev/null', DST)
        sha.append(time.monotonic() - t0)
        run([a.cli, "destroy", "-auto-approve", "-input=false"], cwd=work, env=dict(env, TF_LOG_PATH=os.devnull))
    lab.on(src, 'rm -rf "$1"', os.path.dirname(SRC))
    lab.on(dst, 'rm -rf "$1"', os.path.dirname(SRC))
    med = statistics.median
    mib = size / (1 << 20)
    print()
    print(f"make bench-model: {a.gib} GiB in {files + 1} files, {src['name']} -> {dst['name']} over the fabric "
          f"({dst['fabric_ip']}), {a.rounds} rounds; {os.cpu_count()} cores")
    print(f"    {'figure':52} {'median':>8} {'min..max':>15} {'ratio':>7} {'target':>7}  met")

    def row(what, xs, ratio, target, cmp):
        ok = ratio >= target if cmp == ">=" else ratio <= target
        print(f"P5  {what:52} {med(xs):8.2f} {min(xs):7.2f}..{max(xs):<7.2f} {ratio:7.2f} {target:7.2f}  "
              f"{'yes' if ok else 'NO'}")
    thr = [mib / s for s in ours]
    raw_thr = [mib / s for s in raw]
    print(f"P5  {'plain socket copy, MiB/s (the floor)':52} {med(raw_thr):8.0f} {min(raw_thr):7.0f}..{max(raw_thr):<7.0f}")
    row("spark_model copy, MiB/s / the plain socket copy's", thr, med(thr) / med(raw_thr), 0.8, ">=")
    print(f"P5  {'sha256sum of the copy on the target, s':52} {med(sha):8.2f} {min(sha):7.2f}..{max(sha):<7.2f}")
    row("spark_model verification, s / sha256sum's", ver, med(ver) / med(sha), 1.0, "<=")
    floor = [r + h for r, h in zip(raw, sha)]
    print(f"P5  {'whole copy step, s (plain copy + sha256sum: ' + f'{med(floor):.2f} s)':52} {med(whole):8.2f} "
          f"{min(whole):7.2f}..{max(whole):<7.2f} {med(whole) / med(floor):7.2f}")


if __name__ == "__main__":
    main()
