#!/usr/bin/env python3
"""`make release-install`: the provider as a user installs it, on both CLIs.

1. `goreleaser release --snapshot` with the project's release configuration
   builds the archives and the SHA256SUMS file into dist/ (signing skipped:
   no key here; the platforms narrowed to this machine's, linux_amd64, the
   lab's too: the other five builds are the same code cross-compiled, and
   `make release-check` validates the whole configuration).
2. For Terraform and for OpenTofu, each under its own registry host: the zip
   placed in a filesystem mirror (the packed layout), a CLI configuration that
   installs lab-infra/spark from that mirror only (no dev_overrides), then
   `init`, which writes the dependency lock file.
3. The lock file's hashes match the release: its `zh:` hash, where the CLI
   records one, is the zip's line in SHA256SUMS, and its `h1:` hash is the
   zip's contents hashed as the CLIs do (golang.org/x/mod/sumdb/dirhash
   Hash1), of the zip whose SHA-256 is that line.
4. `plan -detailed-exitcode` of a configuration on the lab (a spark_node data
   source and a spark_ray_cluster over the lab's nodes, on a GCS port of its
   own) with the installed provider: exit code 2 (the cluster to create),
   the node read through it, every plan rule run over SSH.

Needs `make tools` and `make lab-up`. Nothing is applied.
"""
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, ".tools", "bin")
CLIS = {"terraform": "registry.terraform.io", "tofu": "registry.opentofu.org"}


def log(msg):
    print(f"[release-install {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def fail(msg):
    print(f"release-install: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def run(cmd, cwd=ROOT, env=None, ok=(0,)):
    p = subprocess.run(cmd, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode not in ok:
        fail(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}")
    return p


def snapshot(work):
    """goreleaser's snapshot release for this platform; (version, zip, its SHA256SUMS line)."""
    cfg = open(os.path.join(ROOT, ".goreleaser.yml")).read()
    narrowed, n = re.subn(r"(?m)^(\s+)goos: \[.*\]\n\1goarch: \[.*\]$", r"\1goos: [linux]\n\1goarch: [amd64]", cfg)
    if n != 1:
        fail(".goreleaser.yml: no goos/goarch lists to narrow to linux_amd64")
    path = os.path.join(work, "goreleaser.yml")
    open(path, "w").write(narrowed)
    t0 = time.time()
    run([os.path.join(TOOLS, "goreleaser"), "release", "--snapshot", "--clean", "--skip=sign", "-f", path])
    meta = json.load(open(os.path.join(ROOT, "dist", "metadata.json")))
    version = meta["version"]
    name = f"terraform-provider-spark_{version}_linux_amd64.zip"
    sums = {}
    for line in open(os.path.join(ROOT, "dist", f"terraform-provider-spark_{version}_SHA256SUMS")):
        digest, fname = line.split()
        sums[fname] = digest
    if name not in sums:
        fail(f"SHA256SUMS has no line for {name}: {sorted(sums)}")
    archive = os.path.join(ROOT, "dist", name)
    if hashlib.sha256(open(archive, "rb").read()).hexdigest() != sums[name]:
        fail(f"{name} does not hash to its SHA256SUMS line")
    log(f"goreleaser: {name} ({os.path.getsize(archive)} bytes) in {time.time() - t0:.0f}s, version {version}")
    return version, archive, sums[name]


def h1(archive):
    """The CLIs' h1: hash of a provider package: dirhash Hash1 of the zip's files."""
    with zipfile.ZipFile(archive) as z:
        lines = "".join(f"{hashlib.sha256(z.read(n)).hexdigest()}  {n}\n"
                        for n in sorted(z.namelist()) if not n.endswith("/"))
    return "h1:" + base64.b64encode(hashlib.sha256(lines.encode()).digest()).decode()


def configuration(lab, version):
    head = lab["nodes"][0]
    workers = "\n".join(f'    {n["name"]} = {{ ssh_host = "{n["ssh_host"]}" }}' for n in lab["nodes"][1:])
    return f'''terraform {{
  required_providers {{
    spark = {{
      source  = "lab-infra/spark"
      version = "{version}"
    }}
  }}
}}

provider "spark" {{
  ssh = {{
    user             = "{lab["ssh_user"]}"
    private_key_file = "{lab["private_key_file"]}"
    known_hosts_file = "{lab["known_hosts_file"]}"
  }}
}}

data "spark_node" "head" {{
  ssh_host    = "{head["ssh_host"]}"
  ray_command = "{head["ray_command"]}"
}}

resource "spark_ray_cluster" "lab" {{
  head = {{ ssh_host = "{head["ssh_host"]}" }}
  workers = {{
{workers}
  }}
  runtime = {{ host = {{ ray_command = "{head["ray_command"]}" }} }}
  # A port of its own: the plan is clean beside the demo's cluster too.
  gcs_port = 6395
}}

output "head_hostname" {{
  value = data.spark_node.head.hostname
}}
'''


def install_and_plan(cli, host, work, lab, version, archive, zip_sha):
    base = os.path.join(work, cli)
    mirror = os.path.join(base, "mirror", host, "lab-infra", "spark")
    os.makedirs(mirror)
    shutil.copy(archive, mirror)
    rc = os.path.join(base, "cli.tfrc")
    open(rc, "w").write(f'''provider_installation {{
  filesystem_mirror {{
    path    = "{os.path.join(base, "mirror")}"
    include = ["{host}/lab-infra/spark"]
  }}
  direct {{
    exclude = ["{host}/lab-infra/spark"]
  }}
}}
''')
    cfg = os.path.join(base, "config")
    os.makedirs(cfg)
    open(os.path.join(cfg, "main.tf"), "w").write(configuration(lab, version))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    env.update(TF_CLI_CONFIG_FILE=rc, TF_IN_AUTOMATION="1", HOME=base)
    exe = os.path.join(TOOLS, cli)
    init = run([exe, "init", "-input=false", "-no-color"], cwd=cfg, env=env)
    if f"Installed lab-infra/spark v{version}" not in init.stdout:
        fail(f"{cli}: init did not install lab-infra/spark {version} from the mirror:\n{init.stdout}")
    lock = open(os.path.join(cfg, ".terraform.lock.hcl")).read()
    block = re.search(r'provider "' + re.escape(host) + r'/lab-infra/spark" \{(.*?)\n\}', lock, re.S)
    if not block:
        fail(f"{cli}: the lock file names no {host}/lab-infra/spark:\n{lock}")
    hashes = re.findall(r'"((?:h1|zh):[^"]+)"', block.group(1))
    locked_version = re.search(r'version\s*=\s*"([^"]+)"', block.group(1)).group(1)
    if locked_version != version:
        fail(f"{cli}: the lock file has version {locked_version}, the release {version}")
    want_h1 = h1(archive)
    if want_h1 not in hashes:
        fail(f"{cli}: the lock file's hashes {hashes} lack the release zip's {want_h1}")
    zh = [h for h in hashes if h.startswith("zh:")]
    if zh and zh != ["zh:" + zip_sha]:
        fail(f"{cli}: the lock file's zh: hashes {zh} are not the SHA256SUMS line zh:{zip_sha}")
    p = run([exe, "plan", "-input=false", "-no-color", "-detailed-exitcode"], cwd=cfg, env=env, ok=(2,))
    if "spark_ray_cluster.lab will be created" not in p.stdout or "head_hostname" not in p.stdout:
        fail(f"{cli}: the plan does not create the cluster or read the node:\n{p.stdout}")
    log(f"{cli}: installed {version} from the mirror; lock {', '.join(h.split(':')[0] + ':…' for h in hashes)} match the release; "
        f"plan exit 2 (the cluster to create)")


def main():
    lab = json.load(open(os.environ.get("LAB_FILE") or os.path.join(ROOT, ".lab", "lab.json")))
    work = tempfile.mkdtemp(prefix="spark-release-")
    try:
        version, archive, zip_sha = snapshot(work)
        for cli, host in CLIS.items():
            install_and_plan(cli, host, work, lab, version, archive, zip_sha)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log("passed on both CLIs")


if __name__ == "__main__":
    main()
