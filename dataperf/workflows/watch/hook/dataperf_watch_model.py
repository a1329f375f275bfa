"""The model a torchvision job trains, found by the watch hook (once, outside the steps' timing), and the
torchvision builder that makes the same model, so `next:` can name it."""

from __future__ import annotations

import contextlib
import sys

from dataperf_watch_state import State, perf

WRAPPERS = ("DistributedDataParallel", "DataParallel", "FullyShardedDataParallel", "OptimizedModule")


def find_model(opt, s: State) -> None:
    """The outermost module holding the optimizer's first parameter (wrappers such as DDP taken off): its
    class and parameter shapes, kept in s.model and written once. A scan of every object, so only for jobs that imported
    torchvision.models (the only models watch can name) and only once, outside the steps' timing."""
    import gc

    import torch

    t0 = perf()
    first = next((p for g in opt.param_groups for p in g["params"]), None)
    if first is None:
        return
    best, best_n = None, -1
    module = torch.nn.Module
    for o in [o for o in gc.get_objects() if issubclass(type(o), module)]:  # type(): no __class__ property runs
        ps = list(o.parameters())
        if len(ps) > best_n and any(p is first for p in ps):
            best, best_n = o, len(ps)
    while best is not None and type(best).__name__ in WRAPPERS:
        best = getattr(best, "module", None) or getattr(best, "_orig_mod", None)
    if best is None:
        return
    s.model = {"type": f"{type(best).__module__}.{type(best).__qualname__}", "shapes": _shapes(best)}
    s.write({"t": "model", "type": s.model["type"], "params": sum(p.numel() for p in best.parameters()),
             "scan_ms": (perf() - t0) * 1000}, perf())


def _shapes(m) -> list:
    return [list(p.shape) for p in m.parameters()]


def builder(m: dict) -> str | None:
    """The torchvision.models builder (module:function, no arguments) that makes a model of the found one's class
    (m: find_model's type and shapes) with the same parameter shapes; each candidate of the class's module is
    built on the meta device (no memory, no weights). At exit, so the job's steps never pay for it."""
    import inspect
    import warnings

    import torch

    mod_name, _, cls_name = m["type"].rpartition(".")
    mod = sys.modules.get(mod_name)
    if mod is None or not mod_name.startswith("torchvision.models"):
        return None
    top = sys.modules.get("torchvision.models")
    for name, fn in sorted(vars(mod).items()):
        if name.startswith("_") or not name[:1].islower() or not inspect.isfunction(fn):
            continue
        if getattr(fn, "__module__", None) != mod_name:
            continue
        try:
            with warnings.catch_warnings(), torch.device("meta"), contextlib.redirect_stdout(None):
                warnings.simplefilter("ignore")
                built = fn()
        except Exception:
            continue
        if type(built).__qualname__ == cls_name and _shapes(built) == m["shapes"]:
            return f"torchvision.models:{name}" if getattr(top, name, None) is fn else f"{mod_name}:{name}"
    return None

