"""The DataLoader's knobs, each declared once (results.config.loader_knob), and every place that reads them: the
commands' options and defaults, the sweep's Grid, the backends' KNOBS/OFF, --budget's thinning, the cost order,
the answer and short(). The tables derived from the declarations are checked against the hand-written ones they
replaced (as at 8d28376), so the declaration changed no option, grid, key, label or answer."""

from __future__ import annotations

import itertools
from dataclasses import fields

import click
import pytest

from dataperf import backends
from dataperf.cli import cli
from dataperf.commands import _options
from dataperf.results import WORKERS, LoaderConfig, loader_knobs
from dataperf.verdict import rates
from dataperf.verdict.answer import dataloader_args
from dataperf.workflows import budget
from dataperf.workflows.sweep import grid as gr

KNOBS = loader_knobs()
NAMES = [k.name for k in KNOBS]


def params(command: str) -> dict:
    return {p.name: p for p in cli.commands[command].params}


def test_the_dataloader_knobs_are_declared_in_the_order_of_their_options():
    assert NAMES == ["batch_size", "num_workers", "worker_type", "prefetch_factor", "pin_memory",
                     "persistent_workers", "shuffle"]


@pytest.mark.parametrize("knob", KNOBS, ids=NAMES)
def test_a_dataloader_knob_is_declared_once(knob):
    """Each declared knob is an option of bench and sweep with its declared flag and defaults, a Grid axis with
    its declared values and file type, in KNOBS/OFF when a backend may lack it, and thinned, costed, answered and
    labelled as declared."""
    m, name = knob.metadata, knob.name
    grid_name = m["grid"] or name
    # the options: one run takes the declared flag and default, sweep the first name of a flag and the axis
    bench, sweep = params("bench")[name], params("sweep")[name]
    assert tuple(bench.opts + bench.secondary_opts) == tuple(m["flag"].split("/"))
    assert bench.default == knob.default
    assert sweep.opts == [m["flag"].split("/")[0]]
    assert name in _options.LOADER and _options.LOADER.index(name) == _options.LOADER.index(m["after"]) + 1
    if m["kind"] == "flag":
        assert sweep.default == {(False,): "off", (True,): "on"}[m["axis"]]
        assert list(sweep.type.choices) == list(m["values"] or ("off", "on", "both"))
    elif m["kind"] == "choice":
        assert list(bench.type.choices) == list(m["values"])
    for command, column in zip(_options.COMMANDS, _options.DEFAULTS[name], strict=True):
        if command in ("e2e", "profile", "diagnose") and column is not _options.NO:
            assert params(command)[name].default == column
    assert (_options.DEFAULTS[name][2] is _options.NO) == m["searched"]  # tune has none where it searches
    # the Grid: a field of the product, its declared values by default, the type a sweep file gives it
    assert grid_name in gr.PRODUCT and grid_name in gr.AXES
    if m["axis"] is not None:
        assert getattr(gr.Grid(), grid_name) == list(m["axis"])
    assert gr.AXIS_TYPES.get(grid_name, int) is {"int": int, "flag": bool, "choice": str}[m["kind"]]
    if m["with_workers"]:
        assert gr.PRODUCT.index(grid_name) > gr.PRODUCT.index(WORKERS)
    # a backend that cannot express it keeps its off value
    assert (name in backends.KNOBS) == m["optional"]
    if m["optional"]:
        assert backends.OFF[name] == m["off"]
    # --budget, the cost order, the answer, short()
    assert (name in budget.THINNING) == (m["thin"] is not None)
    assert (name in budget.ONE_VALUE) == m["one"]
    assert (knob in rates.COST) == (m["cost"] is not None)
    c = LoaderConfig(num_workers=4, worker_type="thread", prefetch_factor=6, pin_memory=True,
                     persistent_workers=True, batch_size=24)
    assert (f"{name}={getattr(c, name)}" in dataloader_args(c)) == (m["answer"] is not None)
    if m["label"]:
        assert m["label"][0].format(getattr(c, name)) in c.short().split()


def test_the_derived_tables_are_the_hand_written_ones_they_replaced():
    assert backends.KNOBS == ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers", "shuffle")
    assert backends.OFF == {"num_workers": 0, "prefetch_factor": None, "pin_memory": False,
                            "persistent_workers": False, "shuffle": False}
    assert budget.THINNING == ("prefetch_factor", "pin_memory", "persistent_workers", "dali_prefetch_queue_depth",
                               "ray_prefetch_batches", "batch_size", "dali_num_threads", "ray_concurrency",
                               "num_workers")
    assert budget.ONE_VALUE == ("prefetch_factor", "pin_memory", "persistent_workers", "dali_prefetch_queue_depth",
                                "ray_prefetch_batches")
    assert gr.AXIS_TYPES == {"backends": str, "worker_types": str, "pin_memory": bool, "persistent_workers": bool,
                             "shuffle": bool, "decode": bool, "cache": str}
    assert [k.name for k in rates.COST] == ["num_workers", "prefetch_factor", "batch_size", "pin_memory",
                                            "persistent_workers"]
    assert _options.LOADER == (
        "dataset_factory", "transform", "backend", "batch_size", "num_workers", "worker_type", "prefetch_factor",
        "pin_memory", "persistent_workers", "decode", "image_size", "cap_tokens", "seq_len", "cache",
        "dali_threads", "dali_queue", "dali_decode", "ray_concurrency", "ray_cpus", "ray_map_batch", "ray_prefetch",
        "ray_object_store", "ray_address", "ray_nodes", "ray_node_cpus", "on_corrupt", "shuffle", "no_shuffle",
        "shuffle_buffer")
    no = _options.NO
    rows = {  # option: bench, sweep, tune, e2e, profile, diagnose, step
        "batch_size": (32, "32", 32, 32, 32, 32, 8),
        "num_workers": (0, None, no, 2, 2, 2, no),
        "worker_type": (None, None, None, None, None, None, no),
        "prefetch_factor": (None, "2,4,8", no, None, None, None, no),
        "pin_memory": (False, "off", False, None, None, None, no),
        "persistent_workers": (False, "off", False, False, False, False, no),
        "shuffle": (True, "on", True, True, True, True, no),
    }
    assert {n: _options.DEFAULTS[n] for n in rows} == rows
    assert list(_options.DEFAULTS) == [*_options.LOADER, *_options.MODEL]
    specs = {  # option: (declaration, one run's click settings, sweep's)
        "batch_size": ("--batch-size", {"type": int, "help": "samples a batch"},
                       {"callback": _options.int_list, "help": "samples a batch, a comma list"}),
        "num_workers": ("--num-workers", {"type": int,
                                          "help": "DataLoader worker processes (0: load in the training process)"},
                        {"callback": _options.int_list, "help": "worker processes, a comma list [0,1,2,3,4,6,8,12,"
                                                                ".. up to the cores, as many as the data can give 3 "
                                                                "batches each]"}),
        "worker_type": ("--worker-type", {"type": ("process", "thread"),
                                          "help": "where the backend offers both [its own kind]"},
                        {"callback": _options.str_list, "help": "comma list: process,thread (each backend runs "
                                                                "those it offers) [each backend's own kind]"}),
        "prefetch_factor": ("--prefetch-factor", {"type": int, "help": "batches each worker keeps ready [2]"},
                            {"callback": _options.int_list, "help": "batches each worker keeps ready, a comma list"}),
        "pin_memory": ("--pin-memory/--no-pin-memory",
                       {"help": "page-locked batches, copied to a GPU faster [e2e, profile, diagnose: on with CUDA]"},
                       {"decl": "--pin-memory", "type": ("off", "on", "both"),
                        "help": "page-locked batches: off, on, or both ways"}),
        "persistent_workers": ("--persistent-workers/--no-persistent-workers",
                               {"help": "keep the workers alive from one epoch to the next (else each epoch starts "
                                        "them again)"},
                               {"decl": "--persistent-workers", "type": ("off", "on", "both"),
                                "help": "keep the workers between epochs: off, on, or both ways"}),
        "shuffle": ("--shuffle/--no-shuffle", {"help": "read in a seeded random order, as training does; "
                                                       "--no-shuffle: storage order"},
                    {"decl": "--shuffle", "type": ("on", "off", "both"),
                     "help": "on: a seeded random order, as training reads; off: storage order; both: each config "
                             "both ways"}),
    }

    def plain(settings: dict) -> dict:
        return {k: tuple(v.choices) if isinstance(v, click.Choice) else v for k, v in settings.items()}

    assert {n: (d, plain(one), plain(many)) for n, (d, one, many) in
            ((n, _options.LOADER_SPECS[n]) for n in specs)} == specs


def old_configs(g: gr.Grid, data_format: str):
    """Grid.configs as it was written by hand before the declaration (8d28376), the reference the derived product
    must match config for config, in order."""
    for name in backends.expand(g.backends, data_format):
        be = backends.REGISTRY[name]
        wts = [w for w in g.worker_types if w is None or w in be.worker_types]
        can = set(be.knobs)
        pins = g.pin_memory if "pin_memory" in can else [False]
        pfs = g.prefetch_factor if "prefetch_factor" in can else [None]
        perss = g.persistent_workers if "persistent_workers" in can else [False]
        shufs = g.shuffle if "shuffle" in can else [False]
        for bs, dec, cache, shuf in itertools.product(g.batch_size, g.decode, g.cache, shufs):
            buffer = g.shuffle_buffer if shuf and name in ("webdataset", "dali") else None
            common = dict(backend=name, batch_size=bs, decode=dec, cache=cache, image_size=g.image_size,
                          cap_tokens=g.cap_tokens, on_corrupt=g.on_corrupt, transform=g.transform,
                          seq_len=g.seq_len, shuffle=shuf, shuffle_buffer=buffer)
            if be.own:
                names = [k.name for k in be.own]
                axes = [g.own.get(k.name) or list(k.metadata["axis"]) for k in be.own]
                for values in itertools.product(*axes):
                    yield LoaderConfig(**common, **dict(zip(names, values, strict=True)))
                continue
            for w, pin in itertools.product(g.num_workers, pins):
                if w < be.min_workers:
                    continue
                if w == 0:
                    yield LoaderConfig(**common, num_workers=0, pin_memory=pin)
                    continue
                for wt, pf, pers in itertools.product(wts, pfs, perss):
                    yield LoaderConfig(**common, num_workers=w, prefetch_factor=pf, pin_memory=pin,
                                       persistent_workers=pers, worker_type=wt)


@pytest.mark.parametrize("axes", [
    {},
    dict(num_workers=[0, 2], pin_memory=[False, True], cache=["warm", "cold"], decode=[True]),
    dict(backends=["files", "dali", "spdl", "torchdata", "litdata"], num_workers=[0, 1, 4],
         worker_types=["thread", "process"], prefetch_factor=[2, 8], persistent_workers=[False, True],
         batch_size=[16, 32], shuffle=[False, True], shuffle_buffer=50,
         own={"dali_num_threads": [1, 2], "dali_decode_device": ["cpu", "mixed"]}),
    dict(backends=["webdataset", "dali", "streaming"], worker_types=["thread"], num_workers=[0, 3],
         pin_memory=[True], shuffle=[True, False]),
])
@pytest.mark.parametrize("data_format", ["files", "webdataset", "jsonl"])
def test_the_grid_spans_the_configs_it_did_in_the_same_order(axes, data_format):
    g = gr.Grid(**axes)
    got = [(c.key(), c.short()) for c in g.configs(data_format)]
    assert got == [(c.key(), c.short()) for c in old_configs(g, data_format)] and got


@pytest.mark.parametrize("kw, short, answer", [
    ({}, "files bs=32 w=0 raw shuffled warm", "DataLoader(dataset, batch_size=32, num_workers=0, pin_memory=False)"),
    (dict(num_workers=4), "files bs=32 w=4 pf=2 raw shuffled warm",
     "DataLoader(dataset, batch_size=32, num_workers=4, prefetch_factor=None, persistent_workers=False, "
     "pin_memory=False)"),
    (dict(backend="webdataset", num_workers=2, worker_type="thread", prefetch_factor=4, pin_memory=True,
          persistent_workers=True, decode=True, shuffle=False),
     "webdataset bs=32 w=2 thread pf=4 pin persist decode sequential warm",
     "DataLoader(dataset, batch_size=32, num_workers=2, prefetch_factor=4, persistent_workers=True, "
     "pin_memory=True)  (webdataset backend)"),
    (dict(num_workers=0, worker_type="process", prefetch_factor=3, persistent_workers=True),
     "files bs=32 w=0 process persist raw shuffled warm",
     "DataLoader(dataset, batch_size=32, num_workers=0, pin_memory=False)"),
])
def test_short_key_and_answer_read_as_before(kw, short, answer):
    c = LoaderConfig(**kw)
    assert c.short() == short and dataloader_args(c) == answer
    assert c.key() == LoaderConfig(**kw).key() and '"num_workers"' in c.key()


def test_the_cost_order_is_workers_prefetch_batch_pin_persistent():
    c = LoaderConfig(num_workers=2, prefetch_factor=4, batch_size=64, pin_memory=True, persistent_workers=True)
    assert rates.cost_key(c) == (2, 4, 64, True, True)
    assert rates.cost_key(LoaderConfig(backend="dali", dali_num_threads=3, dali_prefetch_queue_depth=2)) == \
        (3, 2, 32, False, False)
    assert rates.cost_key(LoaderConfig()) == (0, 0, 32, False, False)


def test_the_product_holds_every_list_field_of_the_grid_once():
    lists = [f.name for f in fields(gr.Grid) if str(f.type).startswith("list")]
    assert lists == ["backends", *gr.PRODUCT]
    assert gr.PRODUCT == ("batch_size", "decode", "cache", "shuffle", "num_workers", "pin_memory", "worker_types",
                          "prefetch_factor", "persistent_workers")
