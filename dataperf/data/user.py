"""The user's own code, named MODULE:FACTORY: a Dataset factory (--dataset) or a transform factory
(--transform). Modules are found on PYTHONPATH and in the current directory, as `python -m` would."""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from torch.utils.data import Dataset, IterableDataset

from dataperf import stages, watchdog
from dataperf.data.spec import Data
from dataperf.errors import TrialError, UserError

Convert = Callable[[Any, str], Any]  # a sample and where it is -> what the loader hands on


def load_factory(spec: str, option: str) -> Callable[[], Any]:
    """The callable FACTORY of MODULE:FACTORY, or a UserError naming the option and what is wrong."""
    mod_name, sep, fn_name = spec.partition(":")
    if not sep or not mod_name or not fn_name:
        raise UserError(f"{option} {spec!r} is not MODULE:FACTORY (e.g. {option} mytrain.data:build_dataset)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:
        raise UserError(f"cannot import module {mod_name!r} for {option} {spec}: {type(e).__name__}: {e} "
                        "(is it on PYTHONPATH or in the current directory?)") from None
    fn = getattr(mod, fn_name, None)
    if fn is None or not callable(fn):
        raise UserError(f"module {mod_name!r} has no callable {fn_name!r} (for {option} {spec})")
    return fn


def check_factory(spec: str) -> int | None:
    """Build the user's Dataset once before measuring, so a broken factory is one error line, not a trial; its
    length when it is a map-style dataset that has one (an epoch's samples), else None."""
    from torch.utils.data import IterableDataset

    ds = build_dataset(spec)
    try:
        return None if isinstance(ds, IterableDataset) else len(ds)
    except TypeError:  # no __len__
        return None
    except Exception as e:  # the user's __len__ itself failed: theirs to fix, not a dataperf bug
        raise UserError(f"the Dataset of --dataset {spec}: its __len__ raised {type(e).__name__}: {e}; fix its "
                        "__len__ (a DataLoader reads it to know an epoch's samples), or drop it to make it "
                        "an IterableDataset") from None


def build_dataset(spec: str) -> Dataset:
    """The user's Dataset, wrapped so that a stall can name the sample it was fetching (SampleTracker). The
    factory's own wait is bounded too (dataperf.watchdog): a factory that blocks is one error line."""
    fn = load_factory(spec, "--dataset")
    try:
        with watchdog.bounded(f"the dataset factory {spec} has not returned (blocked: a lock, a download?)"):
            ds = fn()
    except (UserError, TrialError):
        raise
    except Exception as e:
        raise UserError(f"dataset factory {spec} failed: {type(e).__name__}: {e}") from None
    if not isinstance(ds, (Dataset, IterableDataset)):
        raise UserError(f"dataset factory {spec} returned {type(ds).__name__}, not a torch Dataset or "
                        "IterableDataset")
    return IterableTracker(ds, spec) if isinstance(ds, IterableDataset) else SampleTracker(ds, spec)


def reader_dataset(data: Data, batch_size: int, convert: Convert | None = None) -> Dataset:
    """Another loader's folder (LitData, MosaicML MDS) through that loader's own StreamingDataset, tracked as a
    user's Dataset is (a stall names the sample being fetched), each sample then convert-ed (its images made
    tensors: backends.dataloader.ReaderImages). Mosaic's must know the DataLoader's batch size (it partitions
    samples by batch over workers, and refuses to start without it)."""
    reader = data.options["reader"]
    try:
        if reader == "litdata":
            from litdata import StreamingDataset

            ds = StreamingDataset(input_dir=data.location)
        else:
            from streaming import StreamingDataset

            ds = StreamingDataset(local=data.location, batch_size=batch_size)
    except Exception as e:
        raise UserError(f"{reader} could not open {data.location}: {type(e).__name__}: {e}") from None
    spec = f"{reader} reader of {data.location}"
    return IterableTracker(ds, spec, convert) if isinstance(ds, IterableDataset) else SampleTracker(ds, spec, convert)


class _Tracked:
    """What both trackers share: the sample being fetched in this process (None between samples), named for the
    watchdog's message; every other attribute (collate_fn, ...) is the user's Dataset's own."""

    def __init__(self, ds: Any, spec: str, convert: Convert | None = None):
        self.ds, self.spec, self.current, self.convert = ds, spec, None, convert

    @property
    def fetching(self) -> str | None:
        return None if self.current is None else f"{self.current} of --dataset {self.spec}"

    def __getattr__(self, name: str) -> Any:
        if name in ("ds", "spec", "current", "convert"):  # not set yet: unpickling in a spawned worker
            raise AttributeError(name)
        attr = getattr(self.ds, name)
        if name == "__getitems__":  # torch fetches a whole batch through it when the Dataset has one
            def fetch(indices: list[int]) -> Any:
                self.current = f"samples {list(indices)}"
                t = time.perf_counter()
                out = attr(indices)
                stages.book("transform", t)
                self.current = None
                return out

            return fetch
        return attr


class SampleTracker(_Tracked, Dataset):
    """A user's map-style Dataset that remembers the index it is fetching. Its fetch is one stage, booked as
    transform: its reads, decodes and transforms are its own code, which dataperf cannot split."""

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i: Any) -> Any:
        self.current = f"sample {i}"
        t = time.perf_counter()
        out = self.ds[i]
        stages.book("transform", t)
        self.current = None
        return self.convert(out, f"sample {i}") if self.convert else out


class IterableTracker(_Tracked, IterableDataset):
    """A user's IterableDataset that counts what it yielded, so a stall names the sample it waits for; the time
    each sample takes to come is booked as transform (as SampleTracker's)."""

    def __len__(self) -> int:
        return len(self.ds)

    def __iter__(self) -> Iterator[Any]:
        samples = iter(self.ds)
        k = 0
        while True:
            self.current = f"sample {k} of its iteration"
            t = time.perf_counter()
            try:
                sample = next(samples)
            except StopIteration:
                self.current = None
                return
            stages.book("transform", t)
            self.current = None
            yield self.convert(sample, f"sample {k} of its iteration") if self.convert else sample
            k += 1


class UserCollate:
    """The user's collate_fn (or torch's default), then the fields the runner counts: n, nbytes, x, y.

    nbytes of a user's batch is the size of the tensors it produced (dataperf cannot see stored bytes)."""

    def __init__(self, fn: Callable[[list[Any]], Any] | None):
        from torch.utils.data import default_collate

        self.fn = fn or default_collate

    def __call__(self, samples: list[Any]) -> dict[str, Any]:
        import torch
        from torch.utils.data import get_worker_info

        t = time.perf_counter()
        b = self.fn(samples)
        tensors = _tensors(b)
        info = get_worker_info()  # collate runs in the worker that fetched the samples (-1: main process)
        out: dict[str, Any] = {"n": len(samples), "nbytes": sum(t.numel() * t.element_size() for t in tensors),
                               "worker": info.id if info is not None else -1, "user": b}
        if isinstance(b, torch.Tensor):
            x, y = b, None
        elif isinstance(b, dict):
            x = next((b[k] for k in ("x", "image", "input_ids", "pixel_values") if k in b), None)
            y = next((b[k] for k in ("y", "label", "labels", "target", "class", "cls") if k in b), None)
        elif isinstance(b, (list, tuple)) and b:
            x, y = b[0], (b[1] if len(b) > 1 else None)
        else:
            x = y = None
        if isinstance(x, torch.Tensor):
            out["x"] = x
            out["y"] = y if isinstance(y, torch.Tensor) else torch.zeros(len(samples), dtype=torch.long)
        return stages.stamp(out, t)


def _tensors(b: Any) -> list[Any]:
    import torch

    if isinstance(b, torch.Tensor):
        return [b]
    if isinstance(b, dict):
        return [t for v in b.values() for t in _tensors(v)]
    if isinstance(b, (list, tuple)):
        return [t for v in b for t in _tensors(v)]
    return []
