"""Where and in which precision a model runs: ``training.device`` and ``training.precision``."""

from __future__ import annotations

import logging

import torch

from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)

def resolve_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except RuntimeError as error:
        raise UserError(f"training.device: {requested!r} is not a device name ({error})") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"training.device: {requested!r} was requested but CUDA is not available")
    return device


def resolve_precision(requested: str, device: torch.device) -> str:
    """``auto``: bf16 on CUDA GPUs that support it, fp16 (with GradScaler) on older GPUs, fp32 on
    CPUs (most CPUs have no native bf16 and run bf16 matmuls far slower than fp32). ``requested``
    is one of ``training.precision``'s choices (``TrainingConfig`` refuses any other)."""
    if device.type == "cuda":
        bf16 = torch.cuda.is_bf16_supported()
        if requested == "auto":
            return "bf16" if bf16 else "fp16"
        if requested == "bf16" and not bf16:
            raise UserError("training.precision: bf16 was requested but this GPU does not support it; use fp16 or auto")
        return requested
    if requested == "auto":
        return "fp32"  # the run's plan states it, once
    if requested != "fp32" and requested not in _WARNED:  # said once, not at every trial
        _WARNED.add(requested)
        logger.warning("training.precision=%s on CPU uses CPU autocast; it is usually slower than fp32", requested)
    return requested


_WARNED: set[str] = set()


def autocast_dtype(precision: str) -> torch.dtype | None:
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)


def autocast(device: torch.device, amp_dtype: torch.dtype | None) -> torch.autocast:
    """Mixed precision at ``amp_dtype`` on ``device``, or a disabled context (fp32) where it is None."""
    return torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None)
