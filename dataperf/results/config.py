"""What a loader trial reads with: `LoaderConfig` (an input, keyed once for resume and comparison) and the loader
policy defaults it writes out."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import Field, asdict, dataclass, field, fields
from typing import Any

TORCH_PREFETCH_FACTOR = 2  # what torch's DataLoader prefetches per worker when prefetch_factor is not given
# samples in each webdataset worker's shuffle buffer (webdataset's own `.shuffle(1000)`), and DALI's initial_fill
DEFAULT_SHUFFLE_BUFFER = 1000
BUFFER_BACKENDS = ("webdataset", "dali")  # backends whose sample shuffle is a buffer (the rest: a full permutation)


WORKERS = "num_workers"  # the DataLoader's worker count: a knob declared `with_workers` applies only when it is > 0


def loader_knob(default: Any, flag: str, after: str, *, kind: str = "int", help: str = "", sweep_help: str = "",
                values: tuple[str, ...] = (), off: Any = None, optional: bool = True, axis: tuple[Any, ...] | None,
                grid: str = "", with_workers: bool = False, fed: Any = dataclasses.MISSING, searched: bool = False,
                step: Any = None, label: tuple[str, str] | None = None, thin: int | None = None, one: bool = False,
                keep: Any = None, cost: int | None = None, answer: tuple[int, str] | None = None) -> Any:
    """A DataLoader knob, declared once, here, with everything the layers above derive from it (plain data: the
    commands build the click options, the sweep its axis):

    - its option: `flag` (the click declaration of one run: "--num-workers", "--pin-memory/--no-pin-memory"),
      placed in --help (and in `short()`) `after` that loader option; `kind`: "int", "flag" (on/off; a sweep
      takes off/on/both, in the order of `values` when given) or "choice" (one of `values`); `help` and
      `sweep_help` (sweep's comma list);
    - its defaults: `default` in one run (bench, and where not said otherwise), `fed` where a model eats the
      batches (e2e, profile, diagnose; "None" of pin_memory: on with CUDA), none where tune `searched` it, `step`
      in step's synthetic batch (None: step has no such option), `axis` in a sweep (None: the Grid's own default);
    - what a backend that cannot express it keeps: `off` (`optional`: a backend may lack it, `backends.KNOBS`/
      `OFF`; `off` is also its value without workers when `with_workers`);
    - its sweep axis: the `workflows.sweep.Grid` field `grid` (default: the knob's name) and, in a sweep file, its
      type from `kind`;
    - `label` in `short()`: (format, "set": written when not None/False | "workers": with workers only);
    - under --budget (`workflows.budget.THINNING`): `thin`, its rank (lowest thinned first), `one` (thinned to one
      value: `keep` where planned, else the smallest) or every other value from the largest;
    - `cost`: its rank in `verdict.rates.cost_key` (cheapest first: fewer, smaller, off);
    - `answer`: (rank, "always" | "workers") as a keyword argument of the DataLoader in the answer."""
    return field(default=default, metadata={
        "loader": True, "flag": flag, "after": after, "kind": kind, "help": help, "sweep_help": sweep_help,
        "values": values, "off": off, "optional": optional, "axis": axis, "grid": grid, "with_workers": with_workers,
        "fed": fed, "searched": searched, "step": step, "label": label, "thin": thin, "one": one, "keep": keep,
        "cost": cost, "answer": answer})


def own_knob(backend: str, option: str, label: str, single: Any, axis: tuple[Any, ...], answer: str,
             choices: tuple[str, ...] = (), help: str = "") -> Any:
    """A knob only one backend reads, declared once, here, with everything the layers above derive from it: the
    backend (`backends.Backend.own`), its command-line option (`dali_threads` is `--dali-threads`), its label in
    `short()`, its value in one run and its values as a sweep axis (the commands' defaults and
    `workflows.sweep.Grid`), how the answer writes it (`answer.format(value)`), and the values it takes when not
    any integer; `help`: what it sets, in its option's --help."""
    return field(default=None, metadata={"owner": backend, "option": option, "label": label, "single": single,
                                         "axis": axis, "answer": answer, "choices": choices, "help": help})


@dataclass
class LoaderConfig:
    """One point of the sweep grid: everything that changes how samples reach the model."""

    backend: str = "files"  # the loader that reads (dataperf.backends): files | webdataset | dali | spdl | ray | ...
    batch_size: int = loader_knob(32, "--batch-size", "backend", optional=False, help="samples a batch",
                                  sweep_help="samples a batch, a comma list",
                                  axis=(32,), step=8, label=("bs={}", "set"), thin=5, cost=3, answer=(1, "always"))
    num_workers: int = loader_knob(0, "--num-workers", "batch_size", off=0, fed=2, searched=True, axis=None,
                                   help="DataLoader worker processes (0: load in the training process)",
                                   sweep_help="worker processes, a comma list [0,1,2,3,4,6,8,12,.. up to the cores, "
                                              "as many as the data can give 3 batches each]",
                                   label=("w={}", "set"), thin=7, cost=1, answer=(2, "always"))
    prefetch_factor: int | None = loader_knob(None, "--prefetch-factor", "worker_type", off=None, with_workers=True,
                                              help="batches each worker keeps ready [2]",
                                              sweep_help="batches each worker keeps ready, a comma list",
                                              searched=True, axis=(2, 4, 8), label=("pf={}", "workers"), thin=1,
                                              one=True, keep=TORCH_PREFETCH_FACTOR, cost=2, answer=(3, "workers"))
    pin_memory: bool = loader_knob(False, "--pin-memory/--no-pin-memory", "prefetch_factor", kind="flag", off=False,
                                   help="page-locked batches, copied to a GPU faster [e2e, profile, diagnose: on "
                                        "with CUDA]", sweep_help="page-locked batches: off, on, or both ways",
                                   fed=None,
                                   axis=(False,), label=("pin", "set"), thin=2, one=True, cost=4,
                                   answer=(5, "always"))
    persistent_workers: bool = loader_knob(False, "--persistent-workers/--no-persistent-workers", "pin_memory",
                                           kind="flag", off=False, with_workers=True, axis=(False,),
                                           help="keep the workers alive from one epoch to the next (else each "
                                                "epoch starts them again)",
                                           sweep_help="keep the workers between epochs: off, on, or both ways",
                                           label=("persist", "set"), thin=3, one=True, cost=5, answer=(4, "workers"))
    decode: bool = False
    cache: str = "warm"  # warm | cold
    image_size: int = 224
    cap_tokens: int | None = None
    dali_num_threads: int | None = own_knob("dali", "dali_threads", "threads", 2, (1, 2, 4), "num_threads={}",
                                            help="DALI's CPU threads")
    dali_prefetch_queue_depth: int | None = own_knob("dali", "dali_queue", "queue", 2, (2,),
                                                     "prefetch_queue_depth={}", help="batches DALI keeps ready")
    dali_decode_device: str | None = own_knob("dali", "dali_decode", "decode", "cpu", ("cpu",), "decode on {}",
                                              ("cpu", "mixed"), help="where DALI decodes: cpu, or mixed (the GPU)")
    ray_concurrency: int | None = own_knob("ray", "ray_concurrency", "conc", 2, (1, 2, 4),
                                           "compute=TaskPoolStrategy(size={})",
                                           help="Ray Data map tasks decoding at once (map_batches' concurrency)")
    ray_num_cpus: int | None = own_knob("ray", "ray_cpus", "cpus", 1, (1,), "num_cpus={}",
                                        help="CPUs Ray reserves for each map task")
    ray_map_batch: int | None = own_knob("ray", "ray_map_batch", "map_bs", 64, (64,), "batch_size={}",
                                         help="samples one map_batches task reads and decodes")
    ray_prefetch_batches: int | None = own_knob("ray", "ray_prefetch", "pf", 2, (2,), "prefetch_batches={}",
                                                help="batches iter_torch_batches keeps ready")
    ray_object_store_mib: int | None = own_knob("ray", "ray_object_store", "store", 512, (512,),
                                                "object_store_memory={} MiB",
                                                help="MiB of object store on each node of a Ray dataperf starts "
                                                     "(a joined cluster keeps its own)")
    # where Ray runs: None = a local Ray dataperf starts on this machine; "simulated:NxC" = N CPU-only nodes of C
    # CPUs simulated here; "auto" | "HOST:PORT" | "ray://HOST:PORT" = the user's cluster, joined (backends.ray)
    ray_cluster: str | None = None
    on_corrupt: str | None = None  # None (= fail: the trial fails naming the sample) | skip (counted)
    # process | thread; None = the backend's own kind (a backend runs those of its `worker_types`)
    worker_type: str | None = loader_knob(None, "--worker-type", "num_workers", kind="choice",
                                          values=("process", "thread"), optional=False, with_workers=True,
                                          help="where the backend offers both [its own kind]",
                                          sweep_help="comma list: process,thread (each backend runs those it "
                                                     "offers) [each backend's own kind]",
                                          axis=(None,), grid="worker_types", label=("{}", "set"))
    transform: str | None = None  # None/resize = square resize; imagenet-train | imagenet-val | MODULE:FACTORY
    seq_len: int | None = None  # tokens per window cut from a flat token stream (.bin / 1-d .npy)
    # read in a seeded random order, as training does; False = storage order (`access()` writes it in `short()`)
    shuffle: bool = loader_knob(True, "--shuffle/--no-shuffle", "on_corrupt", kind="flag", values=("on", "off", "both"),
                                off=False, help="read in a seeded random order, as training does; --no-shuffle: "
                                                "storage order",
                                sweep_help="on: a seeded random order, as training reads; off: storage order; both: "
                                           "each config both ways", axis=(True,))
    shuffle_buffer: int | None = None  # webdataset: samples per worker's shuffle buffer; dali: initial_fill

    def explicit(self) -> LoaderConfig:
        """Defaults written out where they apply, so records say what ran and a config given with or without
        them is the same config: torch's prefetch_factor (2) when workers are used, and the shuffle buffer
        (DEFAULT_SHUFFLE_BUFFER) of a shuffled webdataset or DALI reader; no buffer elsewhere."""
        out = self
        if self.num_workers > 0 and self.prefetch_factor is None:
            out = dataclasses.replace(out, prefetch_factor=TORCH_PREFETCH_FACTOR)
        buffered = self.shuffle and self.backend in BUFFER_BACKENDS
        buffer = (self.shuffle_buffer or DEFAULT_SHUFFLE_BUFFER) if buffered else None
        return dataclasses.replace(out, shuffle_buffer=buffer) if buffer != self.shuffle_buffer else out

    def access(self, ignored: Sequence[str] = ()) -> str:
        """The access pattern in a table cell: 'shuffled', 'shuffled buf=N' (a buffer), 'sequential', or 'own
        order' where the backend could not apply the shuffle asked for (`ignored`: the record's knobs_ignored)."""
        if not self.shuffle:
            return "sequential"
        if "shuffle" in ignored:
            return "own order"
        return f"shuffled buf={self.shuffle_buffer}" if self.shuffle_buffer else "shuffled"

    def key(self) -> str:
        """Stable identity of a config, used to resume sweeps and to match base and head in compare."""
        d = {k: v for k, v in asdict(self).items() if v is not None}
        return json.dumps(d, sort_keys=True)

    def short(self, ignored: Sequence[str] = ()) -> str:
        """The config in a table cell: backend, knobs, decode and transform, access, cache; `ignored` (a record's
        knobs_ignored): what the backend could not apply is not written as applied."""
        own = own_knobs(self.backend)
        if own:  # a backend with knobs of its own is described by them alone
            parts = [f"{self.backend} bs={self.batch_size}"] + [f"{k.metadata['label']}={getattr(self, k.name)}"
                                                                for k in own]
            where = f" on {self.ray_cluster}" if self.ray_cluster else ""
            return " ".join(parts) + f"{self._transform()} {self.access(ignored)} {self.cache}{where}"
        s, written = self.backend, self.explicit()  # torch's default prefetch written out where none was given
        for k in loader_knobs():  # each knob's label (loader_knob), in the order of the options
            fmt, when = k.metadata["label"] or ("", "")
            value = getattr(written, k.name)
            if fmt and value is not None and value is not False and (when != "workers" or getattr(self, WORKERS)):
                s += " " + fmt.format(value)
        if self.decode:
            s += " decode"
        elif self.backend != "user-dataset":  # a user's Dataset returns what its own code makes
            s += " raw"
        return s + f"{self._transform()} {self.access(ignored)} {self.cache}"

    def _transform(self) -> str:
        """' tf=imagenet-train' where a transform other than the plain resize runs on decoded images."""
        return f" tf={self.transform}" if self.decode and self.transform not in (None, "resize") else ""


def loader_knobs() -> list[Field]:
    """The DataLoader's knobs (the LoaderConfig fields declared with loader_knob) in the order of their options:
    each right after the option it follows (`after`), a chain from an option that is not a knob."""
    knobs = [f for f in fields(LoaderConfig) if "loader" in f.metadata]
    names, out = {k.name for k in knobs}, []

    def chain(anchor: str) -> None:
        for k in knobs:
            if k.metadata["after"] == anchor:
                out.append(k)
                chain(k.name)

    for k in knobs:
        if k.metadata["after"] not in names:
            out.append(k)
            chain(k.name)
    return out


def ranked(use: str) -> list[Field]:
    """The DataLoader knobs that take part in `use` ("thin", "cost", "answer"), in the order of their rank."""
    def rank(k: Field) -> int:
        r = k.metadata[use]
        return r[0] if isinstance(r, tuple) else r

    return sorted((k for k in loader_knobs() if k.metadata[use] is not None), key=rank)


def own_knobs(backend: str | None = None) -> list[Field]:
    """The LoaderConfig fields that only `backend` reads (declared with own_knob), in declaration order; None:
    every backend's."""
    return [f for f in fields(LoaderConfig) if "owner" in f.metadata and backend in (None, f.metadata["owner"])]


def option_flag(knob: Field) -> str:
    """A backend's own knob's command-line flag: dali_threads is --dali-threads."""
    return "--" + knob.metadata["option"].replace("_", "-")
