"""A vLLM platform plugin for the lab: vLLM's own CPU platform, with Ray's "GPU"
as its Ray device key.

vLLM 0.32.0's CpuPlatform (vllm/platforms/cpu.py) has no ray_device_key, so
`--distributed-executor-backend ray` stops at "current platform cpu does not
support ray." (vllm/v1/executor/ray_utils.py, initialize_ray_cluster). The lab's
nodes run `ray start --num-gpus 1` in place of a GB10; with this key vLLM's real
Ray code requests and places one "GPU" bundle per worker on them. Everything
else is vLLM's own code. vLLM prefers an out-of-tree platform plugin to its
built-in ones (vllm/platforms/__init__.py, resolve_current_platform_cls_qualname).
"""


def register():
    # Entry point of group vllm.platform_plugins: the qualified name of the class.
    return "spark_lab_vllm_platform.platform.LabCpuRayPlatform"
