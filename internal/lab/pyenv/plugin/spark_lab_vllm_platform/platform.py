"""The lab's platform class (see __init__.py for why it exists)."""
from vllm.platforms.cpu import CpuPlatform


class LabCpuRayPlatform(CpuPlatform):
    ray_device_key: str = "GPU"
