"""What a loader trial reads with: `LoaderConfig` (an input, keyed once for resume and comparison) and the loader
policy defaults it writes out."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import Field, asdict, dataclass, field, fields
from typing import Any

TORCH_PREFETCH_FACTOR = 2  # what torch's DataLoader prefetches per worker when prefetch_factor is not given
# samples in each webdataset worker's shuffle buffer (webdataset's own `.shuffle(1000)`), and DALI's initial_fill
DEFAULT_SHUFFLE_BUFFER = 1000
BUFFER_BACKENDS = ("webdataset", "dali")  # backends whose sample shuffle is a buffer (the rest: a full permutation)


def own_knob(backend: str, option: str, label: str, single: Any, axis: tuple[Any, ...], answer: str,
             choices: tuple[str, ...] = ()) -> Any:
    """A knob only one backend reads, declared once, here, with everything the layers above derive from it: the
    backend (`backends.Backend.own`), its command-line option (`dali_threads` is `--dali-threads`), its label in
    `short()`, its value in one run and its values as a sweep axis (the commands' defaults and
    `workflows.sweep.Grid`), how the answer writes it (`answer.format(value)`), and the values it takes when not
    any integer."""
    return field(default=None, metadata={"owner": backend, "option": option, "label": label, "single": single,
                                         "axis": axis, "answer": answer, "choices": choices})


@dataclass
class LoaderConfig:
    """One point of the sweep grid: everything that changes how samples reach the model."""

    backend: str = "files"  # the loader that reads (dataperf.backends): files | webdataset | dali | spdl | ...
    batch_size: int = 32
    num_workers: int = 0
    prefetch_factor: int | None = None
    pin_memory: bool = False
    persistent_workers: bool = False
    decode: bool = False
    cache: str = "warm"  # warm | cold
    image_size: int = 224
    cap_tokens: int | None = None
    dali_num_threads: int | None = own_knob("dali", "dali_threads", "threads", 2, (1, 2, 4), "num_threads={}")
    dali_prefetch_queue_depth: int | None = own_knob("dali", "dali_queue", "queue", 2, (2,),
                                                     "prefetch_queue_depth={}")
    dali_decode_device: str | None = own_knob("dali", "dali_decode", "decode", "cpu", ("cpu",), "decode on {}",
                                              ("cpu", "mixed"))
    on_corrupt: str | None = None  # None (= fail: the trial fails naming the sample) | skip (counted)
    worker_type: str | None = None  # process | thread; None = the backend's own kind
    transform: str | None = None  # None/resize = square resize; imagenet-train | imagenet-val | MODULE:FACTORY
    seq_len: int | None = None  # tokens per window cut from a flat token stream (.bin / 1-d .npy)
    shuffle: bool = True  # read in a seeded random order, as training does; False = storage order
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

    def access(self) -> str:
        """The access pattern in a table cell: 'shuffled', 'shuffled buf=N' (a buffer), or 'sequential'."""
        if not self.shuffle:
            return "sequential"
        return f"shuffled buf={self.shuffle_buffer}" if self.shuffle_buffer else "shuffled"

    def key(self) -> str:
        """Stable identity of a config, used to resume sweeps and to match base and head in compare."""
        d = {k: v for k, v in asdict(self).items() if v is not None}
        return json.dumps(d, sort_keys=True)

    def short(self) -> str:
        own = own_knobs(self.backend)
        if own:  # a backend with knobs of its own is described by them alone
            parts = [f"{self.backend} bs={self.batch_size}"] + [f"{k.metadata['label']}={getattr(self, k.name)}"
                                                                for k in own]
            return " ".join(parts) + f" {self.access()} {self.cache}"
        s = f"{self.backend} bs={self.batch_size} w={self.num_workers}"
        if self.worker_type:
            s += f" {self.worker_type}"
        if self.num_workers:
            s += f" pf={self.explicit().prefetch_factor}"  # torch's default written out where none was given
        if self.pin_memory:
            s += " pin"
        if self.persistent_workers:
            s += " persist"
        if self.decode:
            s += " decode"
        elif self.backend != "user-dataset":  # a user's Dataset returns what its own code makes
            s += " raw"
        return s + f" {self.access()} {self.cache}"



def own_knobs(backend: str | None = None) -> list[Field]:
    """The LoaderConfig fields that only `backend` reads (declared with own_knob), in declaration order; None:
    every backend's."""
    return [f for f in fields(LoaderConfig) if "owner" in f.metadata and backend in (None, f.metadata["owner"])]


def option_flag(knob: Field) -> str:
    """A backend's own knob's command-line flag: dali_threads is --dali-threads."""
    return "--" + knob.metadata["option"].replace("_", "-")
