# One rank of tests/device/nccl_rendezvous: joins the process group from the environment alone
# (env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE as sky's torch plugin sets them; the
# backend from SKY_DISTRIBUTED_BACKEND), then all-reduces rank + 1 and checks the sum.
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

backend = os.environ["SKY_DISTRIBUTED_BACKEND"]
dist.init_process_group(backend=backend, timeout=timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
ok = rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
if backend == "nccl":
    # sky gives each worker process one device (CUDA_VISIBLE_DEVICES): it is cuda:0 there.
    pinned = "CUDA_VISIBLE_DEVICES" in os.environ
    device = torch.device("cuda", 0 if pinned else int(os.environ["LOCAL_RANK"]))
else:
    device = torch.device("cpu")
t = torch.tensor([rank + 1.0], device=device)
dist.all_reduce(t)
expected = world * (world + 1) / 2
ok = ok and t.item() == expected
where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
nccl = ".".join(map(str, torch.cuda.nccl.version())) if backend == "nccl" else "-"
print(f"rank {rank} of {world}: backend {backend} (NCCL {nccl}) on {where}, "
      f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}, "
      f"all_reduce gave {t.item()}, expected {expected}: {'ok' if ok else 'WRONG'}", flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
