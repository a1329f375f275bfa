"""Every loader backend behind one factory: what it reads, which knobs and worker types it expresses.

The runner asks `get(cfg.format)` for a Backend, `prepare`s it (a converted store for the streaming
formats, cached) and `build`s an iterable of batch dicts ("n", "nbytes", and with decode "x"/"y"), so every
backend runs under the same timer, collectors, cache control and verdict.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataperf.errors import TrialError
from dataperf.records import LoaderConfig
from dataperf.sources import SOURCE_FORMATS, Data

# knobs of LoaderConfig a backend may or may not express (decode/batch_size/cache every backend has)
TITLES = {"dali": "DALI", "spdl": "SPDL", "litdata": "LitData", "streaming": "Mosaic Streaming"}
KNOBS = ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers")
# formats the torch DataLoader backend reads: dataperf's own two, and what dataperf.sources resolves
# (token files, a user's Dataset); every other backend reads local image files or shards only
DATALOADER = ("files", "webdataset", *SOURCE_FORMATS)


@dataclass
class Prepared:
    """What a backend reads (the runner warms or evicts exactly these) and what preparing it cost."""

    paths: list[Path]
    info: dict[str, Any] = field(default_factory=dict)
    state: Any = None


@dataclass(frozen=True)
class Backend:
    name: str
    package: str  # importable module that must be installed ("" = always there)
    install: str  # how to install it, for the "not installed" message
    reads: str  # which dataset formats / store it reads
    worker_types: tuple[str, ...]  # first = what it uses when --worker-type is not given
    knobs: tuple[str, ...]
    gpu_decode: bool
    min_workers: int
    build: Callable[[Data, LoaderConfig, Any, Prepared], Iterable[dict[str, Any]]]
    prepare: Callable[[Data, LoaderConfig], Prepared] | None = None

    def installed(self) -> bool:
        return not self.package or importlib.util.find_spec(self.package.split(".")[0]) is not None

    def worker_type(self, cfg: LoaderConfig) -> str:
        wt = cfg.worker_type or self.worker_types[0]
        if wt not in self.worker_types:
            raise TrialError(f"{self.name} offers {'/'.join(self.worker_types)} workers, not {wt}; "
                             f"use --worker-type {self.worker_types[0]}")
        return wt

    def knobs_ignored(self, cfg: LoaderConfig) -> list[str]:
        """Knobs set in cfg (away from their off/None state) that this backend has no way to express."""
        defaults = {"num_workers": 0, "prefetch_factor": None, "pin_memory": False, "persistent_workers": False}
        return [k for k in KNOBS if k not in self.knobs and getattr(cfg, k) != defaults[k]]

    def check(self, data: Data, cfg: LoaderConfig) -> None:
        if not self.installed():
            raise TrialError(f"{TITLES.get(self.name, self.name)} is not installed (backend {self.name}): "
                             f"{self.install}")
        self.worker_type(cfg)
        if cfg.num_workers < self.min_workers:
            raise TrialError(f"{self.name} needs num_workers >= {self.min_workers} (its pipeline always runs "
                             f"in background workers); got {cfg.num_workers}")
        if self.name in ("files", "webdataset") and data.format != self.name:
            raise TrialError(f"format {self.name} asked for, but {data.spec} holds {data.format}; "
                             f"use --format {data.format}")
        if self.name in SOURCE_FORMATS and data.format != self.name:
            raise TrialError(f"format {self.name} asked for, but {data.spec} holds {data.format}; "
                             f"use --format {data.format}")
        if self.name not in DATALOADER and (data.manifest is None or data.remote):
            raise TrialError(f"{self.name} reads local image files or shards ({self.reads}); {data.spec} is "
                             f"{data.describe()}: use --format {data.format}")

    def make(self, data: Data, cfg: LoaderConfig, opts: Any) -> tuple[Iterable[dict[str, Any]], Prepared]:
        self.check(data, cfg)
        if self.prepare:
            prep = self.prepare(data, cfg)
        else:
            prep = Prepared(data.local_paths())
        prep.info.update(backend=self.name, worker_type=self.worker_type(cfg))
        return self.build(data, cfg, opts, prep), prep


def _dataloader(data, cfg, opts, prep):
    from dataperf.formats.loaders import make_loader

    return make_loader(data, cfg, opts.throttle_mib_s, opts.rank, opts.world_size, opts.seed,
                       opts.sample_cost_s)


def _dali(data, cfg, opts, prep):
    from dataperf.formats.dali import DaliLoader

    return DaliLoader(data.root, data.manifest, cfg, rank=opts.rank, world_size=opts.world_size, seed=opts.seed)


def _lazy(module: str, fn: str) -> Callable[..., Any]:
    """A backend module's build(root, manifest, cfg, opts, prep) / prepare(root, manifest, cfg), called with
    the resolved Data's folder and manifest (check() made sure it has one)."""
    def call(data, *a):
        return getattr(importlib.import_module(module), fn)(data.root, data.manifest, *a)

    return call


REGISTRY: dict[str, Backend] = {b.name: b for b in [
    Backend("files", "", "", "files", ("process",), KNOBS, False, 0, _dataloader),
    Backend("webdataset", "webdataset", "pip install webdataset", "webdataset", ("process",), KNOBS, False, 0,
            _dataloader),
    *[Backend(f, "", "", f, ("process",), KNOBS, False, 0, _dataloader) for f in SOURCE_FORMATS],
    Backend("dali", "nvidia.dali", "pip install 'dataperf[dali]' (nvidia-dali-cuda120)", "files, webdataset",
            ("thread",), (), True, 0, _dali),
    Backend("torchdata", "torchdata", "pip install 'dataperf[torchdata]'", "files, webdataset (in place)",
            ("thread", "process"), ("num_workers", "prefetch_factor", "pin_memory"), False, 0,
            _lazy("dataperf.formats.torchdata_backend", "build")),
    Backend("spdl", "spdl", "pip install 'dataperf[spdl]'", "files, webdataset (in place)",
            ("thread", "process"), ("num_workers", "prefetch_factor"), False, 1,
            _lazy("dataperf.formats.spdl_backend", "build")),
    Backend("litdata", "litdata", "bash scripts/install_backends.sh litdata", "litdata chunks (converted once)",
            ("process",), KNOBS, False, 0, _lazy("dataperf.formats.litdata_backend", "build"),
            _lazy("dataperf.formats.litdata_backend", "prepare")),
    Backend("streaming", "streaming", "mosaicml-streaming 0.11-0.13 pin numpy<2.2 and every release imports "
            "torchvision and transformers<5, so it cannot share dataperf's environment; run in its own, built by "
            "`bash scripts/streaming_env.sh` (README, backends)", "MDS shards (converted once)",
            ("process",), KNOBS, False, 0, _lazy("dataperf.formats.streaming_backend", "build"),
            _lazy("dataperf.formats.streaming_backend", "prepare")),
]}


def get(name: str) -> Backend:
    if name not in REGISTRY:
        raise TrialError(f"unknown format {name!r}; choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]


def expand(formats: list[str], data_format: str) -> list[str]:
    """auto = the dataset's own format; all = it plus every other installed backend that can read it (only
    local image files and shards have other backends)."""
    out: list[str] = []
    for f in formats:
        if f == "auto":
            out.append(data_format)
        elif f == "all":
            out += [data_format] + [b.name for b in REGISTRY.values()
                                    if b.name not in DATALOADER and b.installed()
                                    and data_format in ("files", "webdataset")]
        else:
            out.append(f)
    return list(dict.fromkeys(out))
