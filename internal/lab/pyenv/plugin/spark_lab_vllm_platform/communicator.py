"""The lab's tensor-parallel communicator: vLLM's CPU one, kept off shared
memory when the ranks are on different hosts.

vLLM 0.32.0's CpuCommunicator (vllm/distributed/device_communicators/
cpu_communicator.py) carries a TP or PP group through a shared-memory segment
whenever every rank agrees on the group's name, and the name comes from
VLLM_DIST_IDENT, the port of the init method (vllm/v1/worker/cpu_worker.py,
init_device): the same on every rank, wherever it runs. Ranks on two lab
nodes then each open the other's segment in their own /dev/shm and fail with
"open shm in SHMManager failed. errno: 2". vLLM's CPU build is a stand-in for
a GPU here; across hosts a GPU group goes through NCCL, so this group goes
through torch.distributed (gloo), which vLLM's own class uses when the check
below says no. On one host, vLLM's own check decides.

vLLM 0.10.x-0.11.x (the lab's second environment, 0.11.0) decide the same
inside CpuCommunicator.__init__, with no check method to override: there the
class overrides __init__ instead, and across hosts sets up the plain
torch.distributed path that vLLM's own __init__ takes when it does not pick
shared memory.
"""
import socket

import torch.distributed
from vllm.distributed.device_communicators.base_device_communicator import DeviceCommunicatorBase
from vllm.distributed.device_communicators.cpu_communicator import CpuCommunicator


def _hosts(group) -> set:
    hosts = [""] * torch.distributed.get_world_size(group)
    torch.distributed.all_gather_object(hosts, socket.gethostname(), group=group)
    return set(hosts)


class LabCpuCommunicator(CpuCommunicator):
    if not hasattr(CpuCommunicator, "_all_group_ranks_share_shm_group_name"):
        # vLLM 0.10.x-0.11.x
        def __init__(self, cpu_group, device=None, device_group=None, unique_name=""):
            if len(_hosts(cpu_group)) > 1:
                DeviceCommunicatorBase.__init__(self, cpu_group, device, device_group, unique_name)
                self.dist_module = torch.distributed
                return
            super().__init__(cpu_group, device, device_group, unique_name)

    def _all_group_ranks_share_shm_group_name(self) -> bool:
        hosts = [""] * self.world_size
        torch.distributed.all_gather_object(hosts, socket.gethostname(), group=self.device_group)
        if len(set(hosts)) > 1:
            return False
        return super()._all_group_ranks_share_shm_group_name()
