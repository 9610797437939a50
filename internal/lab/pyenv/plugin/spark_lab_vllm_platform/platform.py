"""The lab's platform class (see __init__.py for why it exists)."""
from vllm.platforms.cpu import CpuPlatform


class LabCpuRayPlatform(CpuPlatform):
    ray_device_key: str = "GPU"

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        # Tensor parallel across lab nodes (see communicator.py).
        return "spark_lab_vllm_platform.communicator.LabCpuCommunicator"
