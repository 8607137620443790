"""Torch devices named by the user (``cpu``, ``cuda``, ``cuda:1``, ``mps``)."""

from __future__ import annotations

import torch

from ..errors import KernelgapError
from ..run_values import device_problem


def resolve_device(device: str) -> torch.device:
    """A torch device a model can train on here, with a one-line error when its name is not
    one (:func:`kernelgap.run_values.device_problem`: ``meta``, a malformed name), its kind is
    not available (CUDA or MPS absent) or its index is past the devices present."""
    problem = device_problem(device) if isinstance(device, str) else f"{device!r:.60} is not a device name"
    if problem is not None:
        raise KernelgapError(problem)
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise KernelgapError(f"unknown device {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise KernelgapError("device 'cuda' requested but CUDA is not available")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        raise KernelgapError(f"device {device!r} requested but only {count} CUDA device{'s' * (count != 1)} present")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise KernelgapError("device 'mps' requested but MPS is not available")
    if dev.type == "mps" and dev.index not in (None, 0):
        raise KernelgapError(f"device {device!r} requested but only mps:0 is present")
    if dev.type == "cpu" and dev.index not in (None, 0):
        raise KernelgapError(f"device {device!r}: the CPU is cpu or cpu:0")
    return dev
