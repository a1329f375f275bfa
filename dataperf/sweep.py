"""Many trials: build the grid (options or a TOML/YAML file), run each, append its record at once, resume."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from dataperf import records
from dataperf.errors import UserError
from dataperf.records import LoaderConfig, LoaderResult
from dataperf.runner import TrialOptions, run_trial
from dataperf.sources import Data, as_data


def default_workers(cores: int | None = None) -> list[int]:
    """0, 1, 2, 4, ... up to twice the cores (past that, workers only contend)."""
    cores = cores or os.cpu_count() or 1
    out, w = [0], 1
    while w <= cores * 2:
        out.append(w)
        w *= 2
    return out


@dataclass
class Grid:
    """The axes of a sweep. Prefetch applies only with workers; DALI has its own axes."""

    formats: list[str] = field(default_factory=lambda: ["auto"])
    num_workers: list[int] = field(default_factory=default_workers)
    prefetch_factor: list[int] = field(default_factory=lambda: [2, 4, 8])
    batch_size: list[int] = field(default_factory=lambda: [32])
    pin_memory: list[bool] = field(default_factory=lambda: [False])
    persistent_workers: list[bool] = field(default_factory=lambda: [False])
    decode: list[bool] = field(default_factory=lambda: [False])
    cache: list[str] = field(default_factory=lambda: ["warm"])
    image_size: int = 224
    cap_tokens: int | None = None
    transform: str | None = None
    seq_len: int | None = None
    dali_num_threads: list[int] = field(default_factory=lambda: [1, 2, 4])
    dali_prefetch_queue_depth: list[int] = field(default_factory=lambda: [2])
    dali_decode_device: list[str] = field(default_factory=lambda: ["cpu"])

    def configs(self, data_format: str) -> Iterator[LoaderConfig]:
        fmts = [data_format if f == "auto" else f for f in self.formats]
        for fmt in dict.fromkeys(fmts):
            for bs, dec, cache in itertools.product(self.batch_size, self.decode, self.cache):
                common = dict(format=fmt, batch_size=bs, decode=dec, cache=cache, image_size=self.image_size,
                              cap_tokens=self.cap_tokens, transform=self.transform, seq_len=self.seq_len)
                if fmt == "dali":
                    for t, q, dev in itertools.product(self.dali_num_threads, self.dali_prefetch_queue_depth,
                                                       self.dali_decode_device):
                        yield LoaderConfig(**common, dali_num_threads=t, dali_prefetch_queue_depth=q,
                                           dali_decode_device=dev)
                    continue
                for w, pin in itertools.product(self.num_workers, self.pin_memory):
                    if w == 0:
                        yield LoaderConfig(**common, num_workers=0, pin_memory=pin)
                        continue
                    for pf, pers in itertools.product(self.prefetch_factor, self.persistent_workers):
                        yield LoaderConfig(**common, num_workers=w, prefetch_factor=pf, pin_memory=pin,
                                           persistent_workers=pers)


AXES = {f.name for f in fields(Grid)}


def load_grid_file(path: Path) -> tuple[Grid, dict[str, Any]]:
    """A TOML or YAML sweep file: grid axes as lists, plus optional trial options (repeats, max_batches)."""
    if not path.is_file():
        raise UserError(f"sweep config not found: {path}")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".toml":
            import tomllib

            d = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            d = yaml.safe_load(text) or {}
        else:
            raise UserError(f"sweep config must be .toml, .yaml or .yml, got {path.name}")
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"cannot parse {path}: {e}") from None
    if not isinstance(d, dict):
        raise UserError(f"{path} must hold a table of sweep axes")
    d = {("formats" if k == "format" else k): v for k, v in d.items()}
    trial_keys = {"repeats", "max_batches", "warmup_batches", "min_batches"}
    unknown = set(d) - AXES - trial_keys
    if unknown:
        raise UserError(f"{path}: unknown keys {sorted(unknown)}; known: {sorted(AXES | trial_keys)}")
    grid_kw = {}
    for k, v in d.items():
        if k in trial_keys:
            continue
        scalar = k in ("image_size", "cap_tokens", "transform", "seq_len")
        grid_kw[k] = v if scalar or isinstance(v, list) else [v]
    return Grid(**grid_kw), {k: d[k] for k in trial_keys if k in d}


def data_id(spec: str) -> str:
    """A URL as given; a local path made absolute, so a resumed sweep matches however the path was written."""
    return spec if "://" in spec or ":" in spec.split("/")[0] else str(Path(spec).resolve())


def trial_id(data: Data | Path, cfg: LoaderConfig) -> str:
    return f"{data_id(data.spec if isinstance(data, Data) else str(data))}|{cfg.key()}"


def finished_ids(out: Path) -> set[str]:
    """Trials already recorded as ok in a results file (failed ones are retried on resume)."""
    if not out.exists():
        return set()
    done = set()
    for r in records.load(out):
        if isinstance(r, LoaderResult) and r.status == "ok":
            done.add(f"{data_id(r.data)}|{r.config_key}")
    return done


def plan(datas: list[Data | Path], grid: Grid) -> list[tuple[Data, LoaderConfig]]:
    out = []
    for d in map(as_data, datas):
        out += [(d, c) for c in grid.configs(d.format)]
    if not out:
        raise UserError("the sweep grid is empty; give at least one value for every axis")
    return out


def prepare_out(out: Path, resume: bool, overwrite: bool) -> None:
    if out.exists() and out.stat().st_size > 0 and not (resume or overwrite):
        raise UserError(f"{out} already holds results; pass --resume to skip finished trials, "
                        "--overwrite to start over, or choose another --out")
    if overwrite and out.exists():
        out.unlink()


def run_sweep(
    trials: list[tuple[Data, LoaderConfig]],
    opts: TrialOptions,
    out: Path | None,
    skip: set[str] | None = None,
    on_result: Callable[[LoaderResult | None], None] | None = None,
) -> list[LoaderResult]:
    """Run every trial not in skip; each record is appended to out the moment it is finished."""
    results = []
    for data, cfg in trials:
        if skip and trial_id(data, cfg) in skip:
            if on_result:
                on_result(None)
            continue
        r = run_trial(data, cfg, opts)
        if out is not None and opts.rank == 0:
            records.append(out, r)
        results.append(r)
        if on_result:
            on_result(r)
    return results
