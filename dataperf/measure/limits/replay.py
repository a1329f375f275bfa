"""The main-process ceiling: real decoded batches replayed by workers whose samples cost nothing but a copy, so
what limits the rate is the main process (receive, unpickle, pin)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from dataperf.backends.dataloader import ends_with_parent
from dataperf.errors import describe_failure
from dataperf.measure.limits.ceiling import MIB, Ceiling, LimitsOptions
from dataperf.measure.limits.probe import _identity
from dataperf.measure.trial import time_repeat
from dataperf.results import LoaderConfig


def _fresh(v: Any, memo: dict[int, Any]) -> Any:
    """A copy of a batch whose tensors are new shared-memory tensors (as torch's own collate makes them in a
    worker), so the main process receives fresh storage each time; other values are passed on as they are."""
    if isinstance(v, torch.Tensor):
        if id(v) not in memo:
            storage = v._typed_storage()._new_shared(v.numel(), device=v.device)
            memo[id(v)] = v.new(storage).resize_(v.shape).copy_(v)
        return memo[id(v)]
    if isinstance(v, dict):
        return {k: _fresh(x, memo) for k, x in v.items()}
    if isinstance(v, list | tuple) and not hasattr(v, "_fields"):
        return type(v)(_fresh(x, memo) for x in v)
    return v


class _Replay(IterableDataset):
    """Each worker hands the main process copies of one real decoded batch for max_s seconds: samples that cost
    nothing but a copy, so what limits the rate is the main process (receive, unpickle, pin)."""

    def __init__(self, template: dict[str, Any], max_s: float):
        self.template, self.max_s = template, max_s

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        t0 = time.perf_counter()
        while True:
            w0 = time.perf_counter()
            b = _fresh(self.template, {})
            b["worker"] = info.id if info is not None else -1
            b["replay_s"] = time.perf_counter() - w0
            yield b
            if time.perf_counter() - t0 > self.max_s:
                return


def batch_tensor_bytes(v: Any) -> int:
    """Bytes of every tensor in a batch (a tensor seen twice counted once): what crosses to the main process
    in shared memory and, on CUDA, to the device."""
    seen: dict[int, int] = {}

    def walk(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            seen[id(x)] = x.numel() * x.element_size()
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)
        elif isinstance(x, list | tuple):
            for y in x:
                walk(y)

    walk(v)
    return sum(seen.values())


def main_process_ceiling(template: dict[str, Any] | None, cfg: LoaderConfig, cores: int, lopts: LimitsOptions,
                         why_not: str | None = None) -> Ceiling:
    """The rate at which the main process takes in batches of the real decoded shape and dtype (receive,
    unpickle, pin when the config pins on CUDA) from enough workers whose batches cost only a copy: what no
    number of workers can exceed. The replay workers' own time is checked, so a figure they held is named."""
    if template is None:
        return Ceiling("main_process", how=f"not measured: {why_not or 'no decoded batch'}")
    n = template["n"]
    nbytes = batch_tensor_bytes(template)
    inflight = max(1, int(lopts.main_probe_inflight_mib * MIB // max(2 * nbytes, 1)))
    workers = max(1, min(max(2, cores), inflight))
    pin = cfg.pin_memory and torch.cuda.is_available()
    dl = DataLoader(_Replay(template, lopts.main_probe_s), batch_size=None, collate_fn=_identity,
                    num_workers=workers, prefetch_factor=2, pin_memory=pin, worker_init_fn=ends_with_parent())
    replay: list[float] = []

    def tap() -> Iterator[dict[str, Any]]:
        for b in dl:
            replay.append(b.pop("replay_s"))
            yield b

    try:
        rep = time_repeat(tap(), None)
    except KeyboardInterrupt:
        raise
    except Exception as e:
        return Ceiling("main_process", how=f"not measured: {describe_failure(e)}")
    rate = rep.samples_per_s
    how = (f"{workers} workers replaying one decoded batch ({n} samples, {nbytes / MIB:.2f} MiB of tensors"
           f"{', pinned' if pin else ''}) for {lopts.main_probe_s:g} s: {rep.batches} batches received")
    capacity = workers * n / (sum(replay) / len(replay)) if replay and sum(replay) > 0 else math.inf
    if rate >= 0.8 * capacity:
        how += (f"; the replay workers were near their own limit ({capacity:.0f} samples/s), so the main process "
                "may take more than this")
    return Ceiling("main_process", rate, how)
