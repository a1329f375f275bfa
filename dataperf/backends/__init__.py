"""Every loader backend behind one factory: what it reads, which knobs and worker types it expresses.

The runner asks `get(cfg.backend)` for a Backend, `prepare`s it (a converted store for the streaming
formats, cached) and `build`s an iterable of batch dicts ("n", "nbytes", and with decode "x"/"y"), so every
backend runs under the same timer, collectors, cache control and verdict.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from dataperf.data import SOURCE_FORMATS, Data
from dataperf.errors import TrialError
from dataperf.results import WORKERS, LoaderConfig, loader_knobs, option_flag, own_knobs

TITLES = {"dali": "DALI", "spdl": "SPDL", "litdata": "LitData", "streaming": "Mosaic Streaming", "ray": "Ray Data"}
# knobs of LoaderConfig a backend may or may not express (decode/batch_size/cache every backend has), and the value
# a backend that cannot keeps: from their declarations (results.config.loader_knob: optional, off)
KNOBS = tuple(f.name for f in fields(LoaderConfig) if f.metadata.get("optional"))
OFF = {k.name: k.metadata["off"] for k in loader_knobs() if k.name in KNOBS}
# formats the torch DataLoader backend reads: dataperf's own two, and what dataperf.data resolves
# (token files, a user's Dataset); every other backend reads local image files or shards only
DATALOADER = ("files", "webdataset", *SOURCE_FORMATS)
TEXT = ("jsonl", "parquet")
NO_SHUFFLE = tuple(k for k in KNOBS if k != "shuffle")


@dataclass
class Prepared:
    """What a backend reads (the runner warms or evicts exactly these) and what preparing it cost; knobs that
    turned out not to apply once the loader was built (a user's IterableDataset cannot be shuffled), and why."""

    paths: list[Path]
    info: dict[str, Any] = field(default_factory=dict)
    state: Any = None
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Backend:
    name: str
    package: str  # importable module that must be installed ("" = always there)
    install: str  # how to install it, for the "not installed" message
    reads: str  # which dataset formats / store it reads
    worker_types: tuple[str, ...]  # first = what it uses when --worker-type is not given
    knobs: tuple[str, ...]
    min_workers: int
    build: Callable[[Data, LoaderConfig, Any, Prepared], Iterable[dict[str, Any]]]
    prepare: Callable[[Data, LoaderConfig], Prepared] | None = None
    # its batches come out of one stream (worker -1): no per-worker ids, so no active-worker count, and a model on
    # a GPU pays no per-worker pinned copy
    one_stream: bool = False
    # its own pipeline, not torch's DataLoader: it pins and moves batches itself and hands them over on the device
    # (no torch pinning note, no DataLoader harness overhead, no host-to-device copy in the fed model's rate)
    own_pipeline: bool = False
    # the LoaderConfig fields that count its parallel workers and the batches it holds ahead (one queue for the
    # whole pipeline, or one per worker), and the (knob, value) with which it decodes on the GPU
    workers_knob: str = WORKERS
    prefetch_knob: str = "prefetch_factor"
    prefetch_per_worker: bool = True
    gpu_decode_setting: tuple[str, str] | None = None
    # where its pipeline keeps no stage books: a probe timing its stages apart ({stage: ms a sample}, how; or
    # ({}, why not)), run once after a trial
    stages: Callable[[Data, LoaderConfig], tuple[dict[str, float], str]] | None = None
    # the config in the backend's own API, where `args`' "TITLE pipeline: knob=value" is not how its users write it
    answer: Callable[[LoaderConfig], str] | None = None
    # checked once before any trial (preflight): installed, its cluster answers. A backend with one runs on the
    # cluster LoaderConfig.ray_cluster names (CLUSTERED)
    preflight: Callable[[LoaderConfig], None] | None = None

    @property
    def title(self) -> str:
        return TITLES.get(self.name, self.name)

    @property
    def own(self) -> list[Field]:
        """Its own knobs (results.config.own_knob): when it has any, a config of it is described by them alone."""
        return own_knobs(self.name)

    def workers(self, c: dict[str, Any]) -> int:
        """Its parallel workers in a config (given as a dict: records carry configs so)."""
        return c.get(self.workers_knob) or 0

    def prefetch(self, c: dict[str, Any]) -> int:
        return c.get(self.prefetch_knob) or 0

    def counted(self, c: dict[str, Any], knob: str) -> Any:
        """A DataLoader knob's value in a config (a dict) as this backend counts it: the workers and prefetch as
        its own knobs have them (DALI: threads, queue); any other as it is (its off value where missing, 0 for a
        knob every backend has)."""
        if knob == WORKERS:
            return self.workers(c)
        if knob == "prefetch_factor":  # the DataLoader's prefetch, whatever field this backend holds it in
            return self.prefetch(c)
        return c.get(knob, OFF.get(knob, 0))

    def in_flight(self, cfg: LoaderConfig) -> int:
        """Samples it may already hold when a repeat starts: its prefetched batches, per worker or in all."""
        c = cfg.__dict__
        held = self.prefetch(c) * (self.workers(c) if self.prefetch_per_worker else 1)
        return cfg.batch_size * held

    def decodes_on_gpu(self, c: dict[str, Any]) -> bool:
        return self.gpu_decode_setting is not None and c.get(self.gpu_decode_setting[0]) == self.gpu_decode_setting[1]

    def args(self, cfg: LoaderConfig) -> str:
        """A config as the user writes it in their script, for a backend with knobs of its own (the DataLoader's
        arguments are verdict.answer's)."""
        if self.answer is not None:
            return self.answer(cfg)
        own = ", ".join(k.metadata["answer"].format(getattr(cfg, k.name)) for k in self.own)
        return f"{self.title} pipeline: batch_size={cfg.batch_size}, {own}"

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
        return [k for k in KNOBS if k not in self.knobs and getattr(cfg, k) != OFF[k]]

    def check(self, data: Data, cfg: LoaderConfig) -> None:
        if not self.installed():
            raise TrialError(f"{self.title} is not installed (backend {self.name}): "
                             f"{self.install}")
        self.worker_type(cfg)
        if cfg.num_workers < self.min_workers:
            raise TrialError(f"{self.name} needs num_workers >= {self.min_workers} (its pipeline always runs "
                             f"in background workers); got {cfg.num_workers}")
        if self.name in ("files", "webdataset") and data.format != self.name:
            raise TrialError(f"backend {self.name} asked for, but {data.spec} holds {data.format}; "
                             f"use --backend {data.format}")
        if self.name in SOURCE_FORMATS and data.format != self.name:
            raise TrialError(f"backend {self.name} asked for, but {data.spec} holds {data.format}; "
                             f"use --backend {data.format}")
        if self.name not in DATALOADER and (data.manifest is None or data.remote):
            raise TrialError(f"{self.name} reads local image files or shards ({self.reads}); {data.spec} is "
                             f"{data.describe()}: use --backend {data.format}")

    def make(self, data: Data, cfg: LoaderConfig, opts: Any) -> tuple[Iterable[dict[str, Any]], Prepared]:
        cfg = cfg.explicit()  # every backend sees the defaults that apply (prefetch, shuffle buffer) written out
        self.check(data, cfg)
        if self.prepare:
            prep = self.prepare(data, cfg)
        else:
            prep = Prepared(data.local_paths())
        prep.info.update(backend=self.name, worker_type=self.worker_type(cfg))
        prep.notes.extend(data.notes)
        return self.build(data, cfg, opts, prep), prep


def _dataloader(data, cfg, opts, prep):
    from torch.utils.data import IterableDataset

    from dataperf.backends.dataloader import make_loader

    loader = make_loader(data, cfg, opts)
    if cfg.shuffle and data.format == "user-dataset" and isinstance(loader.dataset, IterableDataset):
        prep.ignored.append("shuffle")
        prep.notes.append("a user's IterableDataset yields its samples in its own order, from its start in every "
                          "repeat: dataperf cannot shuffle it, so shuffle is not applied")
    return loader


def _dali(data, cfg, opts, prep):
    from dataperf.backends.dali import DaliLoader

    return DaliLoader(data.root, data.manifest, cfg, rank=opts.rank, world_size=opts.world_size, seed=opts.seed)


def _dali_stages(data, cfg):
    from dataperf.backends.dali import DaliLoader

    # storage order: the probe's cuts read the same samples
    return DaliLoader(data.root, data.manifest, replace(cfg, shuffle=False)).stage_ms()


def _lazy(module: str, fn: str) -> Callable[..., Any]:
    """A backend module's build(root, manifest, cfg, opts, prep) / prepare(root, manifest, cfg), called with
    the resolved Data's folder and manifest (check() made sure it has one)."""
    def call(data, *a):
        return getattr(importlib.import_module(module), fn)(data.root, data.manifest, *a)

    return call


def _lazy_cfg(module: str, fn: str) -> Callable[[LoaderConfig], Any]:
    """A backend module's function of a config alone, imported when called (its package may not be installed)."""
    def call(cfg: LoaderConfig) -> Any:
        return getattr(importlib.import_module(module), fn)(cfg)

    return call


REGISTRY: dict[str, Backend] = {b.name: b for b in [
    Backend("files", "", "", "files", ("process",), KNOBS, 0, _dataloader),
    Backend("webdataset", "webdataset", "pip install webdataset", "webdataset", ("process",), KNOBS, 0, _dataloader),
    # text files are an IterableDataset read front to back: no shuffle
    *[Backend(f, "", "", f, ("process",), KNOBS if f not in TEXT else NO_SHUFFLE, 0, _dataloader)
      for f in SOURCE_FORMATS],
    Backend("dali", "nvidia.dali", "pip install 'dataperf[dali]' (nvidia-dali-cuda120)", "files, webdataset",
            ("thread",), ("shuffle",), 0, _dali, one_stream=True, own_pipeline=True,
            workers_knob="dali_num_threads", prefetch_knob="dali_prefetch_queue_depth", prefetch_per_worker=False,
            gpu_decode_setting=("dali_decode_device", "mixed"), stages=_dali_stages),
    Backend("torchdata", "torchdata", "pip install 'dataperf[torchdata]'", "files, webdataset (in place)",
            ("thread", "process"), ("num_workers", "prefetch_factor", "pin_memory", "shuffle"), 0,
            _lazy("dataperf.backends.torchdata", "build"), one_stream=True),
    Backend("spdl", "spdl", "pip install 'dataperf[spdl]'", "files, webdataset (in place)",
            ("thread", "process"), ("num_workers", "prefetch_factor", "shuffle"), 1,
            _lazy("dataperf.backends.spdl", "build"), one_stream=True),
    Backend("ray", "ray", "pip install 'dataperf[ray]' (ray[data]==2.60.0)",
            "files, webdataset (in place), on a local, simulated or joined Ray cluster", ("process",), ("shuffle",),
            0, _lazy("dataperf.backends.ray", "build"), _lazy("dataperf.backends.ray", "prepare"), one_stream=True,
            workers_knob="ray_concurrency", prefetch_knob="ray_prefetch_batches", prefetch_per_worker=False,
            answer=_lazy_cfg("dataperf.backends.ray", "args"), preflight=_lazy_cfg("dataperf.backends.ray", "check")),
    Backend("litdata", "litdata", "bash scripts/install_backends.sh litdata", "litdata chunks (converted once)",
            ("process",), KNOBS, 0, _lazy("dataperf.backends.litdata", "build"),
            _lazy("dataperf.backends.litdata", "prepare")),
    Backend("streaming", "streaming", "mosaicml-streaming 0.11-0.13 pin numpy<2.2 and every release imports "
            "torchvision and transformers<5, so it cannot share dataperf's environment; run in its own, built by "
            "`bash scripts/streaming_env.sh` (docs/backends.md)", "MDS shards (converted once)",
            ("process",), KNOBS, 0, _lazy("dataperf.backends.streaming", "build"),
            _lazy("dataperf.backends.streaming", "prepare")),
]}

ONE_STREAM = tuple(b.name for b in REGISTRY.values() if b.one_stream)
CLUSTERED = tuple(b.name for b in REGISTRY.values() if b.preflight)  # run where LoaderConfig.ray_cluster says


def of(c: dict[str, Any] | LoaderConfig) -> Backend:
    """The backend of a config or a record's config dict; one this version does not know (an old record) is
    judged as the DataLoader reading files."""
    name = (c if isinstance(c, dict) else c.__dict__).get("backend")
    return REGISTRY.get(name) or REGISTRY["files"]


def gpu_decode_hint() -> tuple[str, str]:
    """The backend that decodes on the GPU and the options that ask for it: ("DALI", "--backend dali
    --dali-decode mixed")."""
    be = next(b for b in REGISTRY.values() if b.gpu_decode_setting)
    knob, value = be.gpu_decode_setting
    flag = next(option_flag(k) for k in be.own if k.name == knob)
    return be.title, f"--backend {be.name} {flag} {value}"


def get(name: str) -> Backend:
    if name not in REGISTRY:
        raise TrialError(f"unknown backend {name!r}; choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]


def expand(names: list[str], data_format: str) -> list[str]:
    """Backend names as asked: auto = the DataLoader backend of the data's own storage format; all = it plus
    every other installed backend that can read it (only local image files and shards have other backends)."""
    out: list[str] = []
    for f in names:
        if f == "auto":
            out.append(data_format)
        elif f == "all":
            out += [data_format] + [b.name for b in REGISTRY.values()
                                    if b.name not in DATALOADER and b.installed()
                                    and data_format in ("files", "webdataset")]
        else:
            out.append(f)
    return list(dict.fromkeys(out))
