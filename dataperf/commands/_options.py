"""The options the commands share, written once: the loader's, the model step's and how a trial measures,
with every command's defaults in one table (DEFAULTS). Parsing only: _build.py turns the parsed values into a
LoaderConfig, a sweep Grid, TrialOptions and StepOptions; nothing here measures.

What a new option takes:
- a DataLoader knob: its declaration in `results/config.py` (`loader_knob`) and nothing here: its flag, help,
  place in --help, defaults per command, spec, sweep axis and its way into `make_config`/`make_grid` are read
  from it (KNOB, `_knob_row`, `_knob_spec`, `_placed`);
- a backend's own knob: its declaration (`own_knob`), likewise (OWN, `_own_row`, `_own_spec`);
- any other loader option: a row of ROWS, its name in LOADER, a spec in SPECS, and a field of `LoaderValues`
  and `GridValues` in _build.py (with what it sets in LoaderConfig and the Grid);
- a model option: a row of ROWS, its name in MODEL, its `click.option` in `model_options`, and a field of
  StepOptions (`make_step_options`);
- a trial option: its `click.option` in `trial_options` and a field of `TrialValues` in _build.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field
from pathlib import Path
from typing import Any, TypeVar

import click

from dataperf import watchdog
from dataperf.backends import REGISTRY
from dataperf.errors import UserError
from dataperf.results import loader_knobs, option_flag, own_knobs
from dataperf.watchdog import DEFAULT_STALL_S

F = TypeVar("F", bound=Callable[..., Any])
# measure.trial.DEFAULT_REPEAT_S, written here too: importing measure.trial would load torch for --help (a test
# keeps them equal)
DEFAULT_REPEAT_S = 5.0
BACKENDS = list(REGISTRY)  # every --backend value a loader command takes (beside auto)
# the optimizers of dataperf.measure.step.OPTIMIZERS (imported from there, it would load torch for --help); the last
# five run through DeepSpeed (dataperf[deepspeed])
OPTIMIZERS = ["adamw", "adam8bit", "adamw-cpu-offload", "zero", "zero2", "zero2-offload", "zero3", "zero3-offload",
              "zero2-adam8bit"]
TUNE_BACKENDS = ["auto", "files", "webdataset"]  # backends whose workers and prefetch tune can search
NO = object()  # the command has no such option
OWN: list[Field] = own_knobs()  # every backend's own knobs (results.config.own_knob)
# the DataLoader's knobs (results.config.loader_knob) by option name, in the order of their options
KNOB: dict[str, Field] = {k.name: k for k in loader_knobs()}
FLAG_AXIS = {"off": [False], "on": [True], "both": [False, True]}  # a sweep's off/on/both, as a Grid axis


def _own_row(k: Field) -> tuple[Any, ...]:
    """A backend's own knob's defaults, from its declaration: one value, or the sweep's axis; tune searches the
    DataLoader's knobs only, and step has no loader."""
    one, axis = k.metadata["single"], ",".join(map(str, k.metadata["axis"]))
    return (one, axis, NO, one, one, one, NO)


def _axis_text(k: Field) -> str | None:
    """A DataLoader knob's sweep default as the text click parses: off/on/both for a flag, else a comma list (None:
    the Grid's own default, as the worker ladder)."""
    axis = k.metadata["axis"]
    if k.metadata["kind"] == "flag":
        return next(t for t, v in FLAG_AXIS.items() if tuple(v) == axis)
    return None if axis in (None, (None,)) else ",".join(map(str, axis))


def _parsed_axis(k: Field) -> Any:
    """A DataLoader knob's sweep default as its option's callback leaves it (off/on/both stays text)."""
    text = _axis_text(k)
    return text if text is None or k.metadata["kind"] == "flag" else list(k.metadata["axis"])


def _knob_row(k: Field) -> tuple[Any, ...]:
    """A DataLoader knob's defaults, from its declaration: one run's (bench, tune unless tune searches it), the
    sweep's axis, `fed` in the commands that feed a model, and step's own batch (step has no loader)."""
    one, m = k.default, k.metadata
    fed = one if m["fed"] is MISSING else m["fed"]
    return (one, _axis_text(k), NO if m["searched"] else one, fed, fed, fed, NO if m["step"] is None else m["step"])


def _placed(names: tuple[str, ...]) -> tuple[str, ...]:
    """Option names with each DataLoader knob right after the option it follows (loader_knob's `after`)."""
    out: list[str] = []

    def put(name: str) -> None:
        out.append(name)
        for k in KNOB.values():
            if k.metadata["after"] == name:
                put(k.name)

    for name in names:
        put(name)
    return tuple(out)


# One row per option, one column per command: its default there, or NO. sweep's loader options are comma
# lists (its axes), given as the text click parses; e2e, profile and diagnose feed the model (decode implied);
# step has no loader, so its batch shape comes with the model options. The DataLoader's knobs' rows come from
# their declarations (_knob_row), the backends' own knobs' from theirs (_own_row).
COMMANDS = ("bench", "sweep", "tune", "e2e", "profile", "diagnose", "step")
ROWS: dict[str, tuple[Any, ...]] = {
    # option             bench    sweep    tune     e2e      profile  diagnose step
    "dataset_factory":   (None,   None,    None,    None,    None,    None,    NO),
    "transform":         (None,   None,    None,    None,    None,    None,    NO),
    "backend":           ("auto", "auto",  "auto",  "auto",  "auto",  "auto",  NO),
    "decode":            (None,   None,    True,    NO,      NO,      NO,      NO),
    "image_size":        (224,    224,     224,     224,     224,     224,     224),
    "cap_tokens":        (None,   None,    None,    None,    None,    None,    NO),
    "seq_len":           (None,   512,     512,     512,     512,     512,     512),
    "cache":             ("warm", "warm",  "cold",  "warm",  "warm",  "warm",  NO),
    **{k.metadata["option"]: _own_row(k) for k in OWN},
    "ray_address":       (None,   None,    NO,      None,    None,    None,    NO),
    "ray_nodes":         (None,   None,    NO,      None,    None,    None,    NO),
    "ray_node_cpus":     (None,   None,    NO,      None,    None,    None,    NO),
    "on_corrupt":        ("fail", "fail",  "fail",  "fail",  "fail",  "fail",  NO),
    "no_shuffle":        (NO,     False,   NO,      NO,      NO,      NO,      NO),
    "shuffle_buffer":    (None,   None,    None,    None,    None,    None,    NO),
    "model":             (NO,     None,    None,    "gpt-small", "gpt-small", "gpt-small", "gpt-small"),
    "device":            (NO,     "cpu",   "cpu",   "cpu",   "cpu",   "cpu",   "cpu"),
    "optimizer":         (NO,     "adamw", "adamw", "adamw", "adamw", "adamw", "adamw"),
    "amp":               (NO,     None,    None,    None,    None,    None,    None),
    "input_kind":        (NO,     None,    None,    None,    None,    None,    None),
    "deterministic":     (NO,     False,   False,   False,   False,   False,   False),
}
RAY_CLUSTER = ("ray_address", "ray_nodes", "ray_node_cpus")  # where --backend ray runs (backends.ray.cluster_spec)
# the loader options in --help order, each DataLoader knob placed after the option its declaration names
LOADER = _placed(("dataset_factory", "transform", "backend", "decode", "image_size", "cap_tokens", "seq_len", "cache",
                  *(k.metadata["option"] for k in OWN), *RAY_CLUSTER, "on_corrupt", "no_shuffle", "shuffle_buffer"))
MODEL = ("model", "device", "optimizer", "amp", "input_kind", "deterministic")
DEFAULTS: dict[str, tuple[Any, ...]] = {n: _knob_row(KNOB[n]) if n in KNOB else ROWS[n] for n in (*LOADER, *MODEL)}
MODELS_HELP = "gpt-small | gpt-tiny | cnn-small | MODULE:FACTORY"
MODEL_HELP = {
    "sweep": f"also measure this model's step and give the verdict: {MODELS_HELP}",
    "tune": f"target = this model's step rate x --headroom: {MODELS_HELP}",
}


def defaults(command: str) -> dict[str, Any]:
    """The options `command` takes, with their defaults."""
    i = COMMANDS.index(command)
    return {k: v[i] for k, v in DEFAULTS.items() if v[i] is not NO}


def split(values: dict[str, Any], command: str, *groups: str) -> tuple[dict[str, Any], ...]:
    """A command's parsed values cut into option groups: (its loader options, then each of `groups` ("model"),
    then what is left: the command's own). Values are popped, so `values` keeps only what is left."""
    names = {"loader": [n for n in LOADER if n in defaults(command)], "model": list(MODEL)}
    cut = [{k: values.pop(k) for k in names[g] if k in values} for g in ("loader", *groups)]
    return (*cut, values)


def int_list(ctx, param, value):
    """Parse '0,1,2' into [0, 1, 2] with an error that names the option."""
    if value is None:
        return None
    try:
        return [int(x) for x in str(value).split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None


def str_list(ctx, param, value):
    return None if value is None else [x.strip() for x in str(value).split(",") if x.strip()]


def _headroom(ctx, param, value: float) -> float:
    if not value > 0:
        raise UserError(f"--headroom must be positive (1.2 = the loader 20% faster than the step), got {value}")
    return value


HEADROOM = click.option("--headroom", type=float, default=1.2, show_default=True, callback=_headroom,
                        help="how much faster than the step a loader must be to feed it")


EPOCH_SAMPLES = click.option("--epoch-samples", type=click.IntRange(min=1), default=None,
                              help="samples in one of your training epochs, which the epoch start's share is "
                                   "of [the data's own count]")


OUT = click.option("--out", type=click.Path(path_type=Path), default=None, help="append the record to this .jsonl")


def _apply(fn: F, opts: list) -> F:
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _same(**settings: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    return settings, settings


def _own_spec(k: Field) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A backend's own knob as an option: --dali-threads sets dali_num_threads; a knob with named values takes
    those."""
    flag, choices, what = option_flag(k), k.metadata["choices"], k.metadata["help"]
    if choices:
        return flag, {"type": click.Choice(list(choices)), "help": what}, \
            {"callback": str_list, "help": f"{what}, a comma list of {','.join(choices)}"}
    return flag, {"type": int, "help": what}, {"callback": int_list, "help": f"{what}, a comma list"}


def _knob_spec(k: Field) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A DataLoader knob as an option, from its declaration: an integer (sweep: a comma list), one of its values
    (sweep: a comma list of them), or a flag (sweep: off/on/both, under the flag's first name)."""
    m = k.metadata
    one = {"help": m["help"]} if m["help"] else {}
    many = {"help": m["sweep_help"]} if m["sweep_help"] else {}
    if m["kind"] == "flag":
        return m["flag"], one, {"decl": m["flag"].split("/")[0],
                                "type": click.Choice(list(m["values"] or FLAG_AXIS)), **many}
    if m["kind"] == "choice":
        return m["flag"], {"type": click.Choice(list(m["values"])), **one}, {"callback": str_list, **many}
    return m["flag"], {"type": int, **one}, {"callback": int_list, **many}


CACHE_HELP = ("warm: the data read once before measuring, so reads come from RAM (data that fits in the page "
              "cache); cold: evicted before each repeat, so reads come from storage (data larger than RAM, or a "
              "first epoch)")
# tune's default is cold: the pick must hold whatever the machine's RAM, and a warm cache hides a storage ceiling
TUNE_CACHE_HELP = (f"{CACHE_HELP}. tune defaults to cold, unlike bench and sweep: the config it picks must feed "
                   "from storage, where a warm cache would hide the storage ceiling; --cache warm for data that "
                   "fits in RAM")

# option -> (declaration, click settings for one value, for sweep's comma lists); defaults come from DEFAULTS;
# "unset": the value an option without a default (None) takes, said in its help
SPECS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "dataset_factory": ("--dataset", *_same(metavar="MODULE:FACTORY",
                                            help="your own torch Dataset/IterableDataset (DATA is then left out)")),
    "transform": ("--transform", *_same(metavar="PRESET|MODULE:FACTORY",
                                        help="resize (default) | imagenet-train | imagenet-val | MODULE:FACTORY")),
    "backend": ("--backend", {"type": click.Choice(["auto", *BACKENDS]), "metavar": "NAME",
                              "help": "the loader that reads the data: auto (the DataLoader reading the data's "
                                      f"own storage format), {', '.join(BACKENDS)}"},
                {"callback": str_list, "help": "comma list of backends: auto (the DataLoader reading the data's "
                                               "own storage format), all (it and every installed backend that "
                                               f"reads it), {', '.join(BACKENDS)}"}),
    "decode": ("--decode/--no-decode", {"help": "decode samples (else move raw bytes)"},
               {"help": "decode samples (else move raw bytes) [on for image data or with --model, else off]"}),
    "image_size": ("--image-size", *_same(type=int, help="side of a decoded image, in pixels")),
    "cap_tokens": ("--cap", *_same(type=int, help="truncate token sequences to this many tokens [no cap]")),
    "seq_len": ("--seq-len", *_same(type=int, help="tokens per window of a .bin/.npy token stream, and the "
                                                   "model's sequence length", unset="512")),
    "cache": ("--cache", {"type": click.Choice(["warm", "cold"]), "help": CACHE_HELP},
              {"type": click.Choice(["warm", "cold", "both"]), "help": f"{CACHE_HELP}; both: each config both ways"}),
    **{k.metadata["option"]: _own_spec(k) for k in OWN},
    "ray_address": ("--ray-address", *_same(metavar="auto|HOST:PORT|ray://HOST:PORT",
                                            help="ray backend: join this Ray cluster [a local Ray dataperf starts, "
                                                 "sized to this machine]")),
    "ray_nodes": ("--ray-nodes", *_same(type=int, metavar="N",
                                        help="ray backend: simulate N CPU-only nodes on this machine (with "
                                             "--ray-node-cpus)")),
    "ray_node_cpus": ("--ray-node-cpus", *_same(type=int, metavar="C",
                                                help="ray backend: CPUs of each simulated node")),
    "on_corrupt": ("--on-corrupt", *_same(type=click.Choice(["fail", "skip"]),
                                          help="a sample that does not decode fails the trial (naming it), or is "
                                               "skipped and counted (corrupt_samples)")),
    # sweep's --shuffle is an axis (on/off/both); --no-shuffle is its short form of off, as in every command
    "no_shuffle": ("--no-shuffle", {}, {"is_flag": True, "help": "storage order (the same as --shuffle off)"}),
    "shuffle_buffer": ("--shuffle-buffer", *_same(type=int, metavar="N",
                                                  help="webdataset: samples in each worker's shuffle buffer; "
                                                       "dali: the reader's initial fill [1000]")),
}
LOADER_SPECS = {n: _knob_spec(KNOB[n]) if n in KNOB else SPECS[n] for n in LOADER}


class HiddenAlias(click.Option):
    """An option that also answers to an old name, which --help and error messages leave out: old command lines
    keep working while the help shows one name for one thing (--format, the backend's name before --backend)."""

    def __init__(self, *args: Any, aliases: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.aliases = aliases

    def _shown(self) -> list[str]:
        return [o for o in self.opts if o not in self.aliases]

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        opts = self.opts
        self.opts = self._shown()
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = opts

    def get_error_hint(self, ctx: click.Context) -> str:
        return " / ".join(f"'{o}'" for o in self._shown())


ALIASES = {"backend": ("--format",)}  # old option names still accepted, not shown


def loader_options(command: str) -> Callable[[F], F]:
    """The loader options of `command`, defaults from DEFAULTS; sweep's knobs are comma lists (grid axes)."""
    d = defaults(command)
    opts = []
    for name in LOADER:
        if name not in d:
            continue
        decl, single, many = LOADER_SPECS[name]
        settings = dict(many if command == "sweep" else single)
        if command == "tune" and name == "backend":
            settings["type"] = click.Choice(TUNE_BACKENDS)
        if command == "tune" and name == "batch_size":
            settings["help"] = "starting batch size"
        if command == "bench" and name == "decode":
            settings["help"] = "decode samples (else move raw bytes) [on for image data, else off]"
        if command == "tune" and name == "cache":
            settings["help"] = TUNE_CACHE_HELP
        default = d[name]
        if (unset := settings.pop("unset", None)) is not None and default is None:
            settings["help"] += f" [{unset}]"
        if name in ALIASES:
            settings.update(cls=HiddenAlias, aliases=ALIASES[name])
        opts.append(click.option(settings.pop("decl", decl), *ALIASES.get(name, ()), name, default=default,
                                 show_default=default is not None and default is not False, **settings))
    return lambda fn: _apply(fn, opts)


def model_options(command: str) -> Callable[[F], F]:
    """How the model trains, the same names and meaning in every command that measures a step."""
    d = defaults(command)
    opts = [click.option("--model", default=d["model"], show_default=d["model"] is not None,
                         help=MODEL_HELP.get(command, MODELS_HELP))]
    if command == "step":  # no loader: the synthetic batch's shape comes with the model
        opts += [click.option("--batch-size", type=int, default=d["batch_size"], show_default=True,
                              help="samples a synthetic batch"),
                 click.option("--image-size", type=int, default=d["image_size"], show_default=True,
                              help="side of a synthetic image, in pixels"),
                 click.option("--seq-len", type=int, default=d["seq_len"], show_default=True,
                              help="tokens a synthetic sequence")]
    opts += [
        click.option("--device", default=d["device"], show_default=True, help="cpu | cuda | cuda:N"),
        click.option("--optimizer", type=click.Choice(OPTIMIZERS), default=d["optimizer"], show_default=True,
                     metavar="NAME", help=f"the step's optimizer: {', '.join(OPTIMIZERS)}"),
        click.option("--amp", type=click.Choice(["bf16"]), default=d["amp"], help="autocast dtype"),
        click.option("--input", "input_kind", type=click.Choice(["tokens", "image"]), default=d["input_kind"],
                     help="input of a MODULE:FACTORY model [tokens]"),
        click.option("--deterministic", is_flag=True, default=d["deterministic"],
                     help="seed everything and torch.use_deterministic_algorithms(True)"),
    ]
    return lambda fn: _apply(fn, opts)


def trial_options(fn: F) -> F:
    """How a trial measures, shared by bench, sweep, tune and diagnose."""
    return _apply(fn, [
        click.option("--repeats", type=int, default=5, show_default=True,
                     help="measured repeats (>= 5 for compare's interval to mean something)"),
        click.option("--warmup-batches", type=int, default=2, show_default=True,
                     help="batches read, not timed, before a trial's repeats (workers started, caches filled)"),
        click.option("--repeat-seconds", type=float, default=DEFAULT_REPEAT_S, show_default=True,
                     help="each repeat reads a fresh random part of the dataset for about this long (longer "
                          "while a worker has delivered fewer than 3 batches, or its first batch is less than "
                          "half of it behind); 0: whole epochs"),
        click.option("--max-batches", type=int, default=None, help="batches per repeat [up to one epoch]"),
        click.option("--min-batches", type=int, default=5, show_default=True,
                     help="refuse to report a repeat with fewer batches"),
        click.option("--drop-caches", is_flag=True, help="cold cache: also write /proc/sys/vm/drop_caches (root)"),
        click.option("--no-collect", is_flag=True, help="skip system collectors"),
        click.option("--ebpf", is_flag=True, help="count read syscalls per process with eBPF (bcc)"),
        click.option("--seed", type=int, default=0, show_default=True,
                     help="seed of the shuffle order (the same seed reads the same samples)"),
        click.option("--stall-timeout", type=float, default=DEFAULT_STALL_S, show_default=True, metavar="SECONDS",
                     callback=_stall_timeout,
                     help="a trial (or a --dataset factory) with no new batch for this long fails, naming the "
                          "worker or sample it waits for"),
    ])


def _stall_timeout(ctx, param, value: float) -> float:
    """Checked, and kept as this process's stall time: the --dataset factory is first built (and bounded) while
    DATA is resolved, before the trial options exist."""
    if not value > 0:
        raise UserError(f"--stall-timeout must be a positive number of seconds, got {value}")
    watchdog.stall_s_default = value
    return value
