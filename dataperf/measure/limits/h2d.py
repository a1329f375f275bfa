"""The h2d ceiling: pinned host-to-device copy bandwidth, in samples/s of the decoded batch's tensor bytes."""

from __future__ import annotations

import time
from typing import Any

import torch

from dataperf.measure.limits.ceiling import MIB, NAN, Ceiling
from dataperf.measure.limits.replay import batch_tensor_bytes
from dataperf.results import LoaderConfig


def h2d_samples_per_s(bytes_per_s: float, batch_bytes: int, batch_size: int) -> float:
    """Samples/s a copy bandwidth carries when each batch of batch_size samples moves batch_bytes."""
    if batch_bytes <= 0 or batch_size <= 0:
        return NAN
    return bytes_per_s / (batch_bytes / batch_size)


def pinned_copy_bytes_per_s(nbytes: int, device: str, copies: int = 10) -> float:
    """Host-to-device bandwidth of a pinned buffer of nbytes (non_blocking copies, timed to a sync)."""
    dev = torch.device(device)
    host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    for _ in range(2):  # first copies pay for mapping and the context
        dst.copy_(host, non_blocking=True)
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    for _ in range(copies):
        dst.copy_(host, non_blocking=True)
    torch.cuda.synchronize(dev)
    return nbytes * copies / (time.perf_counter() - t0)


def h2d_ceiling(template: dict[str, Any] | None, device: str, cfg: LoaderConfig) -> Ceiling:
    """Pinned host-to-device copy bandwidth, in samples/s of the decoded batch's tensor bytes; CUDA only."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return Ceiling("h2d", how="n/a (no CUDA)")
    if template is None:
        return Ceiling("h2d", how="not measured: no decoded batch to size the copy")
    if not isinstance(template.get("x"), torch.Tensor):
        return Ceiling("h2d", how="n/a: the batch holds no input tensor (decode off: stored bytes stay on the host)")
    nbytes = batch_tensor_bytes(template)
    bps = pinned_copy_bytes_per_s(nbytes, device)
    how = f"pinned copies of {nbytes / MIB:.2f} MiB per batch to {device}: {bps / 2**30:.1f} GiB/s"
    if not cfg.pin_memory:
        how += "; this config does not pin, so its copies are pageable and slower"
    return Ceiling("h2d", h2d_samples_per_s(bps, nbytes, template["n"]), how)
