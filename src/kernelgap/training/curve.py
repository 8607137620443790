"""Training curves: each member's max error and loss (its phase's objective) every
:data:`CURVE_EVERY` steps, kept on the device until a record is written.  The record also
carries the loss of the final errors at the last phase's power (``final``), the number a
probe compares with the query-blind optimum (docs/theory.md, "The query-blind floor").
"""

from __future__ import annotations

import math

import torch

CURVE_EVERY = 50


def final_power(max_steps: int, power: float) -> float:
    """The power of the trainer's last phase: ``power``, or 2 with no max-error phase."""
    return float(power) if max_steps > 0 else 2.0


def power_mean(err: torch.Tensor, power: float) -> float | None:
    """``(mean |e|^p)^(1/p)`` of one member's errors in float64 (None when not finite)."""
    a = err.detach().to(torch.float64).abs()
    if a.numel() == 0:
        return 0.0
    top = float(a.max())
    if not math.isfinite(top):
        return None
    if top == 0.0:
        return 0.0
    value = top * float((a / top).pow(power).mean()) ** (1.0 / power)
    return value if math.isfinite(value) else None


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


class Curve:
    """Each member's ``(step, max error, loss)`` every ``every`` steps of one stack."""

    def __init__(self, mse_steps: int, max_steps: int, power: float, every: int = CURVE_EVERY) -> None:
        self.every, self.mse_steps = every, mse_steps
        self.power = final_power(max_steps, power)
        self.steps: list[int] = []
        self.pending: list[torch.Tensor] = []  # [2, E] per point, on the device
        self.read: list[list[list[float]]] = []  # points read to the host: [max errors, losses]

    def observe(self, step: int, err: torch.Tensor, losses: torch.Tensor) -> None:
        """At every ``every``-th step: every member's max error and loss (before the update)."""
        if step % self.every:
            return
        with torch.no_grad():
            point = torch.stack([err.detach().abs().amax(dim=(1, 2)), losses.detach()]).to(torch.float64)
        self.steps.append(step)
        self.pending.append(point)

    def latest(self) -> tuple[int, torch.Tensor | list[list[float]]] | None:
        """The latest point's step and ``[max errors, losses]`` (a tensor while on the device), or
        None; reads nothing."""
        if not self.steps:
            return None
        return self.steps[-1], self.pending[-1] if self.pending else self.read[-1]

    def of(self, member: int, step: int, final_err: torch.Tensor) -> dict:
        """The curve of ``member`` up to its last step, with ``final``: its step, max error and
        the power-mean loss of ``final_err``."""
        if self.pending:
            self.read += torch.stack(self.pending).tolist()
            self.pending = []
        points = [(s, p) for s, p in zip(self.steps, self.read) if s <= step]
        top = float(final_err.detach().abs().max()) if final_err.numel() else 0.0
        return {
            "every": self.every,
            "mse_steps": self.mse_steps,
            "step": [s for s, _ in points],
            "max_error": [_finite(p[0][member]) for _, p in points],
            "loss": [_finite(p[1][member]) for _, p in points],
            "final": {
                "step": step,
                "max_error": _finite(top),
                "power": self.power,
                "loss": power_mean(final_err, self.power),
            },
        }
