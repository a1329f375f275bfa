"""Ground truth that is not dataperf (issue 49, Build 5): a plain torch DataLoader feeding the model, as a user's
training loop does, with no dataperf import in this process, so that a fault shared by dataperf's fed loop and
its decisions cannot hide.

    python benchmarks/plain_loop.py --dataset MOD:FN --model MOD:FN --configs JSON [--seconds S] [--warmup K]

JSON: a list of DataLoader configs, each {"key", "batch_size", "num_workers", "prefetch_factor",
"persistent_workers", "pin_memory", "steps", "whole"}; each is run in turn and one JSON line printed for it.
The Dataset comes from its factory (its own collate_fn attribute, if any, batches it), shuffled with a fixed seed;
the model from its factory, trained with SGD on cross-entropy (a mean of the output where that does not apply).

What is timed: "whole" (the epoch is short): the first epoch is the warm-up, untimed; then whole epochs, each
from iter() to its last step, until --seconds have passed (at least one), so epoch starts are paid as often as
training pays them. Else: --warmup steps untimed, then `steps` steps, crossing an epoch end where one comes
(both rounded up to whole rounds of the workers).
Within the timed wall, the wait in next() for an epoch's first batch is the epoch start; the other waits are the
steady (mid-epoch) data wait. Printed: samples_per_s (timed samples / timed wall), wait_share (all waits / wall),
steady_wait_share (steady waits / the wall less epoch starts), epoch_start_s (the mean timed epoch start; in
window mode, the first epoch's, worker start-up included: what every epoch pays without persistent workers).
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import sys
import time
from typing import Any

import torch
from torch.utils.data import DataLoader


def build(spec: str) -> Any:
    """MOD:FN called with no arguments (a scenario's dataset or model factory)."""
    mod, _, fn = spec.partition(":")
    return getattr(importlib.import_module(mod), fn)()


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, batch: Any) -> None:
    x, y = batch[0], batch[1]
    out = model(x)
    if out.ndim == 2 and y.dtype == torch.long and len(y) == len(out):
        loss = torch.nn.functional.cross_entropy(out, y)
    else:
        loss = out.float().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def run(ds: Any, model: torch.nn.Module, c: dict[str, Any], seconds: float, warmup: int) -> dict[str, Any]:
    """One config's timed loop; see the module docstring for what is timed."""
    w = c["num_workers"]
    loader = DataLoader(ds, batch_size=c["batch_size"], shuffle=True, num_workers=w,
                        prefetch_factor=c.get("prefetch_factor") if w else None,
                        persistent_workers=bool(c.get("persistent_workers")) and w > 0,
                        pin_memory=bool(c.get("pin_memory")), collate_fn=getattr(ds, "collate_fn", None),
                        generator=torch.Generator().manual_seed(0))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    whole = bool(c["whole"])
    # batches arrive in rounds of W (each worker delivers one in turn): a window of whole rounds, else a window
    # that starts mid-round reads up to a batch too many (2 workers, 25 steps: +4%)
    steps, warmup = (-(-int(n) // max(w, 1)) * max(w, 1) for n in (c["steps"], warmup))
    timed = samples = done_steps = epoch = starts = 0
    start_wait = steady_wait = 0.0
    first_start: float | None = None
    t_begin: float | None = None  # when the timed part began
    while True:
        t_iter = time.perf_counter()
        it = iter(loader)
        if whole and epoch == 1:
            t_begin = t_iter
        for k in itertools.count():
            t0 = time.perf_counter()
            batch = next(it, None)
            if batch is None:
                break
            waited = time.perf_counter() - (t_iter if k == 0 else t0)  # a first wait includes iter(): worker start
            first_start = waited if first_start is None else first_start
            if not whole and t_begin is None and done_steps == warmup:
                t_begin = t_iter if k == 0 else t0
            if t_begin is not None:
                if k == 0:
                    start_wait, starts = start_wait + waited, starts + 1
                else:
                    steady_wait += waited
            train_step(model, opt, batch)
            done_steps += 1
            if t_begin is not None:
                timed, samples = timed + 1, samples + len(batch[1])
                if not whole and timed >= steps:
                    return _row(c, samples, time.perf_counter() - t_begin, timed, 0, start_wait, steady_wait,
                                starts, first_start)
        epoch += 1
        if whole and epoch >= 2 and time.perf_counter() - t_begin >= seconds:
            return _row(c, samples, time.perf_counter() - t_begin, timed, epoch - 1, start_wait, steady_wait,
                        starts, first_start)


def _row(c: dict[str, Any], samples: int, wall: float, steps: int, epochs: int, start_wait: float,
         steady_wait: float, starts: int, first_start: float | None) -> dict[str, Any]:
    return {"key": c["key"], "samples": samples, "wall_s": wall, "steps": steps, "whole_epochs": epochs,
            "mode": "whole epochs" if epochs else "window", "samples_per_s": samples / wall,
            "wait_s": start_wait + steady_wait, "wait_share": (start_wait + steady_wait) / wall,
            "steady_wait_share": steady_wait / (wall - start_wait), "epoch_starts_timed": starts,
            "epoch_start_wait_s": start_wait, "epoch_start_s": start_wait / starts if starts else first_start,
            "first_epoch_start_s": first_start}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--configs", required=True, help="a JSON list of configs (see the module docstring)")
    ap.add_argument("--seconds", type=float, default=3.0, help="whole-epoch mode: time epochs until this passed")
    ap.add_argument("--warmup", type=int, default=3, help="window mode: untimed steps first")
    a = ap.parse_args()
    assert "dataperf" not in sys.modules, "the plain truth must not import dataperf"
    ds = build(a.dataset)
    for c in json.loads(a.configs):
        model = build(a.model)
        model.train()
        try:
            row = run(ds, model, c, a.seconds, a.warmup)
        except Exception as e:  # a config that fails is a failed row, not a failed truth
            row = {"key": c["key"], "error": f"{type(e).__name__}: {e}"}
        row["dataperf_imported"] = "dataperf" in sys.modules
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
