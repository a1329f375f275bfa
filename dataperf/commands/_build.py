"""The parsed option values turned into what the workflows take: a LoaderConfig (make_config), a sweep Grid
(make_grid), TrialOptions (make_trial_options), StepOptions (make_step_options), the resolved data; each refused
here, with one `error:` line, when it could only measure nothing. The click declarations are in _options.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import Field, dataclass, fields
from pathlib import Path
from typing import Any

from dataperf.commands import _render
from dataperf.commands._options import (
    DEFAULT_REPEAT_S,
    FLAG_AXIS,
    KNOB,
    OWN,
    _parsed_axis,
    split,
)
from dataperf.errors import UserError
from dataperf.results import WORKERS, LoaderConfig, option_flag, own_knobs, ranked
from dataperf.watchdog import DEFAULT_STALL_S


def _check_own(own: dict[str, Any]) -> None:
    """A keyword that names no backend's own knob is a caller's mistake, not an option to drop silently."""
    unknown = set(own) - {k.metadata["option"] for k in OWN}
    if unknown:
        raise TypeError(f"unknown loader option(s) {sorted(unknown)}")


# the most a trial may ask for: past them a command runs for days with no output (bench prints no plan line), which
# is a typo, not a measurement (5 repeats of 5 s settle a rate; compare pools runs for more)
MAX_REPEATS = 1000
MAX_REPEAT_S = 3600


@dataclass(frozen=True)
class TrialValues:
    """trial_options' values by their option names (raw_dir aside): what a user asked each trial to do."""

    repeats: int
    warmup_batches: int
    max_batches: int | None
    min_batches: int
    drop_caches: bool
    no_collect: bool
    ebpf: bool
    seed: int
    repeat_seconds: float | None = DEFAULT_REPEAT_S
    stall_timeout: float = DEFAULT_STALL_S

    def check(self) -> None:
        """Refuse values that could only measure nothing."""
        if self.repeats < 1:
            raise UserError(f"--repeats must be at least 1, got {self.repeats}")
        if self.repeats > MAX_REPEATS:
            raise UserError(f"--repeats {self.repeats} is past the limit of {MAX_REPEATS} (a trial would run for "
                            f"days, printing nothing); give at most {MAX_REPEATS}, or pool several runs in one file")
        if self.repeat_seconds is not None and self.repeat_seconds > MAX_REPEAT_S:
            raise UserError(f"--repeat-seconds {self.repeat_seconds:g} is past the limit of {MAX_REPEAT_S} (an hour "
                            f"a repeat); give at most {MAX_REPEAT_S}, or 0 for whole epochs")
        if self.warmup_batches < 0:
            raise UserError(f"--warmup-batches must be >= 0, got {self.warmup_batches}")
        if self.min_batches < 2:
            raise UserError(f"--min-batches must be at least 2, got {self.min_batches}: a repeat's rate is timed "
                            "from its second batch on, so one batch measures nothing")
        if self.repeat_seconds is not None and not self.repeat_seconds >= 0:
            raise UserError(f"--repeat-seconds must be 0 (whole epochs) or a positive number of seconds, got "
                            f"{self.repeat_seconds}")
        if self.max_batches is not None and self.max_batches < self.min_batches:
            raise UserError(f"--max-batches {self.max_batches} is below --min-batches {self.min_batches}; every "
                            "repeat would be refused. Raise --max-batches or lower --min-batches")


def _values(cls: type, given: dict[str, Any]) -> Any:
    """An instance of the values dataclass `cls` from the names it has, popped from `given`."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: given.pop(k) for k in list(given) if k in names})


def make_trial_options(raw_dir: Path | None = None, **kw: Any):
    """TrialOptions from trial_options' values (TrialValues), refused when they could only measure nothing; what
    else `kw` holds (a rank, a world size) are TrialOptions' own fields."""
    from dataperf.measure.trial import TrialOptions

    v = _values(TrialValues, kw)
    v.check()
    return TrialOptions(repeats=v.repeats, warmup_batches=v.warmup_batches, max_batches=v.max_batches,
                        repeat_seconds=v.repeat_seconds or None, min_batches=v.min_batches,
                        drop_caches=v.drop_caches, collect=not v.no_collect, ebpf=v.ebpf, raw_dir=raw_dir,
                        seed=v.seed, stall_s=v.stall_timeout, **kw)


def resolve_data(data: str | tuple[str, ...] | None, dataset_factory: str | None):
    """DATA resolved once (data.Data) and passed down; --dataset stands in for DATA."""
    from dataperf.data import resolve, user_dataset

    given = [d for d in ((data,) if isinstance(data, str) else (data or ())) if d]
    if dataset_factory and given:
        raise UserError("give DATA or --dataset MODULE:FACTORY, not both")
    if dataset_factory:
        return [user_dataset(dataset_factory)]
    if not given:
        raise UserError("missing DATA: a folder, a file, a glob, a brace pattern or a URL "
                        "(or --dataset MODULE:FACTORY for your own Dataset)")
    return [resolve(d) for d in given]


def check_transform(transform: str | None) -> None:
    from dataperf.backends import transforms

    transforms.check(transform)


def default_decode(datas: list, model: str | None = None) -> bool:
    """--decode when not given: on for image data (raw JPEG bytes read about 5x faster than a model gets its
    images, so a raw rate misleads) and wherever a model eats the samples; off for token data."""
    return model is not None or any(d.kind == "image" for d in datas)





def _knobs(given: dict[str, Any], default: Callable[[Field], Any]) -> dict[str, Any]:
    """The DataLoader knobs' values, popped from `given` by name, `default(knob)` where not given."""
    return {name: given.pop(name) if name in given else default(k) for name, k in KNOB.items()}


@dataclass(frozen=True)
class LoaderValues:
    """One run's loader options beside the knobs (which come from their declarations), by their option names,
    with their defaults in one run."""

    backend: str = "auto"
    image_size: int = 224
    cap_tokens: int | None = None
    cache: str = "warm"
    decode: bool = True
    on_corrupt: str = "fail"
    transform: str | None = None
    seq_len: int | None = None
    dataset_factory: str | None = None
    shuffle_buffer: int | None = None
    ray_address: str | None = None
    ray_nodes: int | None = None
    ray_node_cpus: int | None = None


def _ray_cluster(backends_asked: list[str], address: str | None, nodes: int | None,
                 node_cpus: int | None) -> str | None:
    """The ray backend's cluster (LoaderConfig.ray_cluster) from its options, which apply to it alone."""
    from dataperf.backends import CLUSTERED
    from dataperf.backends.ray import cluster_spec

    spec = cluster_spec(address, nodes, node_cpus)
    if spec is not None and not set(backends_asked) & set(CLUSTERED):
        raise UserError("--ray-address, --ray-nodes and --ray-node-cpus set where the ray backend runs: add "
                        "--backend ray")
    return spec


def make_config(data, device: str = "cpu", **given: Any):
    """One LoaderConfig from the options (LoaderValues); `data` is the resolved data.Data (its storage format is
    what auto means); `given` also holds the DataLoader's knobs by name (num_workers, pin_memory: None = on with
    CUDA, ...), each its declared default when not given, and the backends' own knobs by option name
    (--dali-threads: dali_threads), each the declared value when not given. A backend with knobs of its own
    leaves the DataLoader's workers, and the knobs that need them, at their off values."""
    from dataperf.data.tokens import windowed

    v = _values(LoaderValues, given)
    knobs = _knobs(given, lambda k: k.default)
    own = given
    _check_own(own)
    check_transform(v.transform)
    shuffle = knobs["shuffle"]
    check_shuffle_buffer(v.shuffle_buffer, shuffle)
    backend = data.format if v.backend == "auto" else v.backend  # auto: the DataLoader of the storage format
    mine = own_knobs(backend)
    values = {k.name: own.get(k.metadata["option"], k.metadata["single"]) for k in mine}
    counts = [k for k in mine if not k.metadata["choices"]]
    if any(values[k.name] < 1 for k in counts):
        raise UserError(" and ".join(option_flag(k) for k in counts)
                        + " must be at least 1, got " + " and ".join(str(values[k.name]) for k in counts))
    if knobs["pin_memory"] is None:
        knobs["pin_memory"] = str(device).startswith("cuda")
    if mine:  # no DataLoader workers: the worker count and what needs workers off
        knobs.update({n: k.metadata["off"] for n, k in KNOB.items()
                      if k.metadata["optional"] and (n == WORKERS or k.metadata["with_workers"])})
    ray_cluster = _ray_cluster([backend], v.ray_address, v.ray_nodes, v.ray_node_cpus)
    return LoaderConfig(backend=backend, **knobs, decode=v.decode, cache=v.cache, ray_cluster=ray_cluster,
                        image_size=v.image_size, cap_tokens=v.cap_tokens, transform=v.transform,
                        seq_len=v.seq_len if windowed(data) else None, **values,
                        on_corrupt=None if v.on_corrupt == "fail" else v.on_corrupt,
                        shuffle_buffer=v.shuffle_buffer if shuffle else None)


def check_shuffle_buffer(shuffle_buffer: int | None, shuffle: bool) -> None:
    if shuffle_buffer is None:
        return
    if shuffle_buffer < 1:
        raise UserError(f"--shuffle-buffer must be at least 1 sample, got {shuffle_buffer}")
    if not shuffle:
        raise UserError("--shuffle-buffer sizes the shuffle, and --no-shuffle turns it off; pass one of the two")


@dataclass(frozen=True)
class GridValues:
    """sweep's loader options beside the knobs, by their option names, as its options parse them (comma lists;
    warm/cold/both)."""

    backend: list[str]
    decode: bool
    image_size: int
    cap_tokens: int | None
    seq_len: int
    cache: str
    on_corrupt: str
    transform: str | None
    dataset_factory: str | None = None
    no_shuffle: bool = False
    shuffle_buffer: int | None = None
    ray_address: str | None = None
    ray_nodes: int | None = None
    ray_node_cpus: int | None = None


def make_grid(datas: list, **given: Any):
    """The sweep's Grid from sweep's loader options (GridValues); `given` also holds the DataLoader's knobs by
    name (a flag as off/on/both; each the sweep's declared default when not given) and the backends' own knobs'
    lists by option name (--dali-threads: dali_threads)."""
    from dataperf.data.tokens import windowed
    from dataperf.workflows import sweep as sw

    v = _values(GridValues, given)
    knobs = _knobs(given, _parsed_axis)
    own = given
    _check_own(own)
    mine = {k.name: own.get(k.metadata["option"]) for k in OWN}
    _check_axes(v, knobs, mine)
    if v.no_shuffle:
        knobs["shuffle"] = "off"
    check_shuffle_buffer(v.shuffle_buffer, knobs["shuffle"] != "off")
    # each knob's axis under its Grid field's name; one left empty (workers, worker types) is the Grid's default
    axes = {k.metadata["grid"] or n: FLAG_AXIS[knobs[n]] if k.metadata["kind"] == "flag" else knobs[n]
            for n, k in KNOB.items()}
    return sw.Grid(backends=v.backend, **{a: x for a, x in axes.items() if x}, decode=[v.decode],
                   cache=["warm", "cold"] if v.cache == "both" else [v.cache], image_size=v.image_size,
                   cap_tokens=v.cap_tokens, transform=v.transform,
                   seq_len=v.seq_len if any(windowed(d) for d in datas) else None,
                   own={k: x for k, x in mine.items() if x is not None},
                   on_corrupt=None if v.on_corrupt == "fail" else v.on_corrupt, shuffle_buffer=v.shuffle_buffer,
                   ray_cluster=_ray_cluster(v.backend, v.ray_address, v.ray_nodes, v.ray_node_cpus))


def _check_axes(v: GridValues, knobs: dict[str, Any], mine: dict[str, Any]) -> None:
    """No axis given empty, no negative worker count, a transform that exists, --no-shuffle not against
    --shuffle."""
    from dataperf.measure import preflight

    counts = [k for k in ranked("cost") if k.metadata["kind"] == "int"]  # in cost order, as the options were
    for name, axis_ in (*((k.metadata["flag"], knobs[k.name]) for k in counts), ("--backend", v.backend),
                        *((option_flag(k), mine[k.name]) for k in OWN)):
        if axis_ is not None and not axis_:
            raise UserError(f"{name} got no values; give a comma list such as 0,1,2, or leave it out")
    for w in knobs[WORKERS] or []:  # the grid would leave a negative count out, and then say it is empty
        preflight.check_workers(w)
    check_transform(v.transform)
    if v.no_shuffle and knobs["shuffle"] != "on":
        raise UserError(f"--no-shuffle and --shuffle {knobs['shuffle']} disagree; pass one of the two")


def make_step_options(model: str, device: str = "cpu", optimizer: str = "adamw", amp: str | None = None,
                      input_kind: str | None = None, deterministic: bool = False, **kw):
    """StepOptions from model_options' values plus what the command adds (batch shape, repeats, outputs)."""
    from dataperf.measure.step import StepOptions

    return StepOptions(model=model, device=device, optimizer=optimizer, amp=amp, input=input_kind,
                       deterministic=deterministic, **kw)


def fed_config(command: str, data, kw: dict):
    """e2e, profile, diagnose: the loader config, its data and the step's options, checked before measuring.
    `kw` keeps what belongs to the command alone."""
    from dataperf.measure import preflight

    loader, model, _ = split(kw, command, "model")
    data = resolve_data(data, loader["dataset_factory"])[0]
    cfg = make_config(data, device=model["device"], **loader)
    preflight.check_fed(data, cfg, model["model"], model["input_kind"])
    _render.print_data([data], cfg.decode)
    return data, cfg, model, loader["seq_len"]
