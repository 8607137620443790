"""Torch devices named by the user (``cpu``, ``cuda``, ``cuda:1``)."""

from __future__ import annotations

import torch

from ..errors import KernelgapError


def resolve_device(device: str) -> torch.device:
    """A torch device, with a one-line error when it is unknown or unavailable."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise KernelgapError(f"unknown device {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise KernelgapError("device 'cuda' requested but CUDA is not available")
    return dev
