"""The axes of a sweep: the Grid, built from the command's options or from a TOML/YAML sweep file, and every
LoaderConfig it spans for a storage format."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from dataperf import backends
from dataperf.errors import UserError
from dataperf.measure.trial import worker_ladder
from dataperf.results import BUFFER_BACKENDS, WORKERS, LoaderConfig, loader_knobs, own_knobs

# the DataLoader's knobs (results.config.loader_knob) by the name of their Grid axis
KNOB_AXES = {k.metadata["grid"] or k.name: k for k in loader_knobs()}


def _axis(name: str) -> Any:
    """A DataLoader knob's axis, by default the values its declaration gives a sweep."""
    values = KNOB_AXES[name].metadata["axis"]
    return field(default_factory=lambda: list(values))


@dataclass
class Grid:
    """The axes of a sweep. Prefetch applies only with workers; a backend with knobs of its own (DALI) sweeps
    those instead of the DataLoader's; backends may say auto
    (the DataLoader backend of the data's storage format) or all (every installed backend that reads it).
    The list fields after `backends` are the axes of the product, outermost first; each DataLoader knob's is
    named by its declaration (`grid`) and takes its declared values when not given."""

    backends: list[str] = field(default_factory=lambda: ["auto"])
    batch_size: list[int] = _axis("batch_size")
    decode: list[bool] = field(default_factory=lambda: [False])
    cache: list[str] = field(default_factory=lambda: ["warm"])
    shuffle: list[bool] = _axis("shuffle")  # True: a seeded random order, as training reads
    num_workers: list[int] = field(default_factory=worker_ladder)
    pin_memory: list[bool] = _axis("pin_memory")
    worker_types: list[str | None] = _axis("worker_types")  # None = each backend's own kind
    prefetch_factor: list[int] = _axis("prefetch_factor")
    persistent_workers: list[bool] = _axis("persistent_workers")
    image_size: int = 224
    cap_tokens: int | None = None
    transform: str | None = None
    seq_len: int | None = None
    # the axes of the backends' own knobs (results.config.own_knob) by field name; a knob left out sweeps the
    # values its declaration gives (DALI: threads 1,2,4, queue 2, decode cpu)
    own: dict[str, list] = field(default_factory=dict)
    on_corrupt: str | None = None
    shuffle_buffer: int | None = None  # a buffered shuffle's size (BUFFER_BACKENDS); None = DEFAULT_SHUFFLE_BUFFER
    ray_cluster: str | None = None  # where the ray backend runs (LoaderConfig.ray_cluster); the others: not set

    def configs(self, data_format: str) -> Iterator[LoaderConfig]:
        """Every config per backend; a knob the backend cannot express keeps only its off value, a worker
        type it does not offer and worker counts below its minimum are left out (not run as duplicates)."""
        for name in backends.expand(self.backends, data_format):
            if name not in backends.REGISTRY:
                raise UserError(f"unknown backend {name!r} in the sweep; choose from auto, all, "
                                f"{', '.join(backends.REGISTRY)}")
            be = backends.REGISTRY[name]
            bad = [w for w in self.worker_types if w not in (None, "process", "thread")]
            if bad:
                raise UserError(f"unknown worker type {bad[0]!r}; choose process or thread")
            axes = [(KNOB_AXES[a].name if a in KNOB_AXES else a, self._values(a, be)) for a in PRODUCT]
            axes += [(k.name, self.own.get(k.name) or list(k.metadata["axis"])) for k in be.own]
            for point in _points(axes, {}):
                buffer = self.shuffle_buffer if point["shuffle"] and name in BUFFER_BACKENDS else None
                yield LoaderConfig(backend=name, image_size=self.image_size, cap_tokens=self.cap_tokens,
                                   on_corrupt=self.on_corrupt, transform=self.transform, seq_len=self.seq_len,
                                   shuffle_buffer=buffer, ray_cluster=self.ray_cluster if be.preflight else None,
                                   **point)

    def _values(self, axis: str, be: backends.Backend) -> list:
        """An axis's values for one backend: a knob it cannot express at its off value, the worker types it
        offers, the worker counts from its minimum."""
        values, k = getattr(self, axis), KNOB_AXES.get(axis)
        if k is None:
            return values
        if k.name in backends.KNOBS and k.name not in be.knobs:
            return [k.metadata["off"]]
        if axis == "worker_types":
            return [w for w in values if w is None or w in be.worker_types]
        if k.name == WORKERS:
            return [w for w in values if w >= be.min_workers]
        return values


def _points(axes: list[tuple[str, list]], point: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every point of the product of `axes` (LoaderConfig field, values), the first outermost; without workers, a
    knob that needs them (loader_knob's `with_workers`) takes its off value only."""
    if not axes:
        yield point
        return
    (name, values), rest = axes[0], axes[1:]
    knob = LoaderConfig.__dataclass_fields__[name].metadata
    if knob.get("with_workers") and not point[WORKERS]:
        values = [knob["off"]]
    for v in values:
        yield from _points(rest, {**point, name: v})


# the Grid's axes in the order of its product (its list fields after `backends`), outermost first
PRODUCT = tuple(f.name for f in fields(Grid) if f.name != "backends" and str(f.type).startswith("list"))


OWN_AXES = {f.name: f for f in own_knobs()}  # the backends' own knobs: a grid file names them as they are
AXES = {f.name for f in fields(Grid)} - {"own"} | set(OWN_AXES)


TRIAL_KEYS = {"repeats", "max_batches", "warmup_batches", "min_batches", "repeat_seconds"}  # a file's trial options
# a file written before the backend had its own name says format/formats
ALIASES = {"backend": "backends", "format": "backends", "formats": "backends", "worker_type": "worker_types"}


def load_grid_file(path: Path) -> tuple[Grid, dict[str, Any]]:
    """A TOML or YAML sweep file: grid axes as lists, plus optional trial options (repeats, max_batches,
    repeat_seconds, ...)."""
    d = {ALIASES.get(k, k): v for k, v in _read_table(path).items()}
    unknown = set(d) - AXES - TRIAL_KEYS
    if unknown:
        raise UserError(f"{path}: unknown keys {sorted(unknown)}; known: {sorted(AXES | TRIAL_KEYS)}")
    grid_kw = {}
    for k, v in d.items():
        if k in TRIAL_KEYS:
            _check_trial_key(path, k, v)
        else:
            grid_kw[k] = _axis_value(path, k, v)
    own = {k: grid_kw.pop(k) for k in list(grid_kw) if k in OWN_AXES}
    return Grid(**grid_kw, own=own), {k: d[k] for k in TRIAL_KEYS if k in d}


def _read_table(path: Path) -> dict[str, Any]:
    """The file's top-level table, parsed by its suffix; any parse failure is the user's file, named."""
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
    return d


def _check_trial_key(path: Path, k: str, v: Any) -> None:
    if k == "repeat_seconds":
        if not (_is(int, v) or _is(float, v)) or v < 0:
            raise UserError(f"{path}: repeat_seconds must be a number of seconds (0: whole epochs), got {v!r}")
    elif not _is(int, v):
        raise UserError(f"{path}: {k} must be an integer, got {v!r}")


def _axis_value(path: Path, k: str, v: Any) -> Any:
    """One axis of the file as the Grid takes it: a scalar setting as it is, an axis as a checked list."""
    scalar = k in SCALAR_AXES
    if k == "on_corrupt":
        if v not in ("skip", "fail"):
            raise UserError(f"{path}: on_corrupt must be skip or fail, got {v!r}")
        return None if v == "fail" else v
    if k == "ray_cluster":  # where the ray backend runs: one setting (backends.ray.Cluster), not an axis
        if not (v is None or _is(str, v)):
            raise UserError(f"{path}: ray_cluster takes one of auto, HOST:PORT, ray://HOST:PORT or simulated:NxC, "
                            f"got {v!r}")
        return v
    if k == "transform":
        if not (v is None or _is(str, v)):
            raise UserError(f"{path}: transform takes one preset name or MODULE:FACTORY (it is not a sweep "
                            f"axis), got {v!r}")
    elif scalar and not (_is(int, v) or (k in ("cap_tokens", "seq_len", "shuffle_buffer") and v is None)):
        raise UserError(f"{path}: {k} takes one integer (it is not a sweep axis), got {v!r}")
    if scalar:
        return v
    values = v if isinstance(v, list) else [v]
    want = str if k in OWN_AXES and OWN_AXES[k].metadata["choices"] else AXIS_TYPES.get(k, int)
    if not values:
        raise UserError(f"{path}: {k} is an empty list; give at least one value")
    bad = [x for x in values if not _is(want, x)]
    if bad:
        raise UserError(f"{path}: {k} must be a list of {want.__name__} values, got {bad[0]!r}")
    return values


SCALAR_AXES = ("image_size", "cap_tokens", "transform", "seq_len", "shuffle_buffer")
# a file's axis types: the DataLoader knobs' from their declarations (a flag: bool, a choice: str); the rest: int
AXIS_TYPES: dict[str, type] = {"backends": str, "decode": bool, "cache": str,
                               **{a: {"flag": bool, "choice": str}[k.metadata["kind"]] for a, k in KNOB_AXES.items()
                                  if k.metadata["kind"] != "int"}}


def _is(t: type, v: Any) -> bool:
    """A TOML/YAML value of type t (a bool is not an int here, nor an int a bool)."""
    return isinstance(v, t) and (t is bool or not isinstance(v, bool))
