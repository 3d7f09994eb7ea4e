"""Worker functions for the launcher's tests, in a module of their own: a worker imports its function's module
after the fork, and this one imports torch only (the test module's imports cost each worker seconds more)."""

from __future__ import annotations

import torch

from bert_mlm.core.model.distributed import Rank


def failing_on_rank_one(rank: Rank) -> int:
    if rank.rank == 1:
        raise RuntimeError("worker 1 broke")
    torch.distributed.barrier()  # would hang forever without the launcher's failure handling
    return 0
