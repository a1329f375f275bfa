"""What the watch hook reads off a DataLoader and its batches, from the objects alone: the loader's settings, the
data its dataset reads, the dataset's transform ops, and a batch's shape."""

from __future__ import annotations

import glob
import os

PATH_ATTRS = ("root", "path", "data_path", "data_dir", "root_dir", "directory", "folder", "urls")


def loader_settings(loader) -> dict:
    """The DataLoader's settings and its dataset's type, length, data path and transform, at its first iter()."""
    ds = loader.dataset
    bs = loader.batch_size
    if bs is None and getattr(loader, "batch_sampler", None) is not None:
        bs = getattr(loader.batch_sampler, "batch_size", None)
    import torch.utils.data as tud

    try:
        n = len(ds)
    except Exception:
        n = None
    return {"batch_size": bs, "num_workers": loader.num_workers, "prefetch_factor": loader.prefetch_factor,
            "pin_memory": bool(loader.pin_memory), "persistent_workers": bool(loader.persistent_workers),
            "drop_last": bool(loader.drop_last),
            "dataset_type": f"{type(ds).__module__}.{type(ds).__qualname__}",
            "iterable": isinstance(ds, tud.IterableDataset), "dataset_len": n,
            "sampler_type": type(loader.sampler).__qualname__ if loader.sampler is not None else None,
            "data_path": _data_path(ds), "transform": _transform(ds)}


def _data_path(ds, depth: int = 0):
    """The folder or file a dataset reads, from the attributes datasets commonly keep it in (a WebDataset
    pipeline keeps its shard list in its first stage)."""
    for a in PATH_ATTRS:
        v = getattr(ds, a, None)
        if isinstance(v, list | tuple) and v:
            return _one_path(list(v))
        if isinstance(v, str | os.PathLike):
            return _abs(v)
    stages = getattr(ds, "pipeline", None)
    for inner in ([getattr(ds, "dataset", None)] + (stages[:1] if isinstance(stages, list) else [])):
        if inner is not None and inner is not ds and depth < 3:
            found = _data_path(inner, depth + 1)
            if found:
                return found
    return None


def _abs(v) -> str:
    v = os.fspath(v)
    return v if "://" in v else os.path.abspath(v)


def _one_path(items: list):
    """One path for a list of files: the file itself, or a glob of one folder that matches exactly these files
    (shards train-0000.tar ... train-0009.tar -> train-*.tar); None when no such glob exists."""
    if not all(isinstance(v, str | os.PathLike) for v in items):
        return None
    paths = [_abs(v) for v in items]
    if len(paths) == 1 or "://" in paths[0]:
        return paths[0]
    folder = os.path.dirname(paths[0])
    names = [os.path.basename(p) for p in paths]
    if any(os.path.dirname(p) != folder for p in paths) or any(c in n for n in names for c in "*?[{"):
        return None
    head = os.path.commonprefix(names)
    tail = os.path.commonprefix([n[len(head):][::-1] for n in names])[::-1]
    pattern = os.path.join(folder, f"{head}*{tail}")
    return pattern if set(glob.glob(pattern)) == set(paths) else None


def _transform(ds, depth: int = 0):
    """The dataset's `transform` (torchvision datasets keep it there), as its ops in order, each with the
    output side it sets (a crop's or resize's size, when square), and a short repr."""
    t = getattr(ds, "transform", None)
    if t is None:
        inner = getattr(ds, "dataset", None)
        return _transform(inner, depth + 1) if inner is not None and inner is not ds and depth < 3 else None
    ops: list = []
    _ops(t, ops, 0)
    return {"ops": ops, "repr": " ".join(repr(t).split())[:300]}  # one line, whatever its own repr


def _ops(t, out: list, depth: int) -> None:
    inner = getattr(t, "transforms", None)
    if isinstance(inner, list | tuple) and depth < 4:
        for x in inner:
            _ops(x, out, depth + 1)
        return
    size = getattr(t, "size", None)
    if isinstance(size, list | tuple) and len(size) == 2 and size[0] == size[1]:
        size = size[0]
    name = type(t).__name__ if not hasattr(t, "__code__") else getattr(t, "__qualname__", "function")
    out.append([name, size if isinstance(size, int) else None])


def batch_shape(batch):
    """The shape of a batch's first tensor (shallow: tensor, sequence or dict); its leading dimension is the
    batch's samples."""
    x = batch
    for _ in range(3):
        shape = getattr(x, "shape", None)
        if shape is not None:
            return shape if len(shape) else None
        if isinstance(x, dict):
            x = next(iter(x.values()), None)
        elif isinstance(x, list | tuple):
            x = x[0] if x else None
        else:
            return None
    return None

