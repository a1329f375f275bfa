"""Training edge cases: a NaN/inf guard that checkpoints and names the parameter, and deterministic seeds."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import torch
from torch import nn


class NonFiniteError(RuntimeError):
    """Raised on the first non-finite parameter or gradient; says which, at which step, and where the
    checkpoint taken at that moment is."""

    def __init__(self, param: str, what: str, step: int, checkpoint: Path):
        self.param, self.what, self.step, self.checkpoint = param, what, step, checkpoint
        super().__init__(f"non-finite {what} in parameter {param!r} at step {step}; "
                         f"checkpoint saved to {checkpoint}")


class NanGuard:
    """Check parameters and gradients after backward; usable as a context manager in any training loop:

        with NanGuard(model, "ckpt/") as guard:
            for step, batch in enumerate(loader):
                loss.backward(); guard.check(step); optimizer.step()
    """

    def __init__(self, model: nn.Module, checkpoint_dir: str | os.PathLike,
                 optimizer: torch.optim.Optimizer | None = None):
        self.model = model
        self.optimizer = optimizer
        self.dir = Path(checkpoint_dir)

    def __enter__(self) -> NanGuard:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def first_bad(self) -> tuple[str, str] | None:
        """Values before gradients: a NaN weight poisons every gradient upstream of it, so the weight is the
        cause to name."""
        params = list(self.model.named_parameters())
        for name, p in params:
            if not torch.isfinite(p.detach()).all():
                return name, "value"
        for name, p in params:
            if p.grad is not None and not torch.isfinite(p.grad.detach()).all():
                return name, "gradient"
        return None

    def check(self, step: int) -> None:
        bad = self.first_bad()
        if bad is None:
            return
        name, what = bad
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"nonfinite-step{step}.pt"
        state = {"step": step, "param": name, "what": what, "model": self.model.state_dict()}
        if self.optimizer is not None:
            state["optimizer"] = self.optimizer.state_dict()
        torch.save(state, path)
        raise NonFiniteError(name, what, step, path)


def seed_everything(seed: int, deterministic: bool = False) -> None:
    """Seed Python, NumPy and torch; with deterministic, also force deterministic kernels."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS needs it to be deterministic
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
