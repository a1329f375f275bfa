"""What several commands print: the console, progress bars, figure tables, notes, histograms, the loader table
and its warnings, the recommendation (fed runs and limits table included) and the collectors; the pictures are
commands/_plots.py's; the answer sweep and report print, composed of these, is commands/_answer.py's. Each
command's own record is rendered in its module (commands/e2e.py ...). Takes records and the verdict over them
(a Recommendation: each row's TrialFit, the findings; the limits rows from dataperf.verdict); never measures
nor judges (stage_line asks verdict.attack for the stage to attack), and imports nothing of dataperf.measure."""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
from collections.abc import Callable, Iterator
from dataclasses import fields
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from dataperf import verdict
from dataperf.data.spec import Data
from dataperf.results import (
    HIGH_SPREAD_PCT,
    E2EResult,
    LimitsResult,
    LoaderConfig,
    LoaderResult,
    Record,
    WatchResult,
    fmt,
)
from dataperf.verdict import observed, ok_loaders, rank_rate, sorted_by_rate
from dataperf.verdict.limits import limit_rows  # the limits table's rows (tests import it from here too)

PIPE_WIDTH = 240  # logs and pipes without COLUMNS: wide enough that tables stay one line per trial


def piped_width() -> int:
    """The width output to a pipe or a log is sized to: COLUMNS where the user set it (a CI log, `| tee`, `| less`
    read in a window of that size), else PIPE_WIDTH."""
    try:
        return max(int(os.environ.get("COLUMNS", "")), 40)
    except ValueError:
        return PIPE_WIDTH


console = Console()
if not console.is_terminal:
    console = Console(width=piped_width())


@contextlib.contextmanager
def to_stderr() -> Iterator[None]:
    """Print on stderr for a while: `dataperf watch` leaves the job's stdout exactly as the job wrote it. It swaps
    this module's console, so the command modules print through `_render.console`, looked up at each call."""
    global console
    saved = console
    console = Console(stderr=True)
    if not console.is_terminal:
        console = Console(stderr=True, width=piped_width())
    try:
        yield
    finally:
        console = saved


@contextlib.contextmanager
def progress_bar(label: str, total: int | None, enabled: bool = True,
                 eta: bool = False) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr; yields advance(n). Off on non-zero ranks and when stderr is no terminal
    (CI logs get the results, not redraw noise). eta: also the time left, at the pace of the finished steps."""
    err = Console(stderr=True)
    if not enabled or not err.is_terminal:
        yield lambda n=1: None
        return
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    if eta:
        columns += [TextColumn("eta"), TimeRemainingColumn()]
    prog = Progress(*columns, console=err, transient=True)
    with prog:
        task = prog.add_task(label, total=total)
        yield lambda n=1: prog.advance(task, n)


def figure_table(title: str, rows: list[tuple[str, str]]) -> Table:
    """A two-column table of named figures."""
    t = Table(title=title)
    t.add_column("figure")
    t.add_column("value", justify="right")
    for row in rows:
        t.add_row(*row)
    return t


def print_data(datas: list[Data], decode: bool | None = None) -> None:
    """One line a DATA on what is read and what is left out (other splits, stray files), once (rank 0); decode
    (--decode's value) says whether byte columns are decoded."""
    if os.environ.get("RANK", "0") != "0":
        return
    for d in datas:
        say(f"data: {d.summary(decode)}")


def say(text: str, shell: bool = False, markup: bool = True) -> None:
    """One line of prose (a note, a verdict) fitted to the console's width: wrapped at spaces with the
    continuation indented, so the first line still starts with its `note:` (logs grep by it) and a 100-column
    log holds every word; shell: a command to paste, each break ending in ` \\` so the pasted lines run as
    one command; markup: rich's [style] tags in text are styles (as console.print reads them)."""
    import textwrap

    from rich.text import Text

    plain = Text.from_markup(text).plain if markup else text
    if not shell:
        lines = textwrap.wrap(plain, width=console.width, subsequent_indent="  ", break_long_words=False,
                              break_on_hyphens=False) or [""]
        console.print("\n".join(lines), soft_wrap=True, markup=False, highlight=False)
        return
    lines = [""]
    for word in shell_words(plain):  # broken between words only: a quoted path stays whole
        if lines[-1] and len(lines[-1]) + 1 + len(word) > console.width - 2:
            lines.append("  ")
        lines[-1] += (" " if lines[-1].strip() else "") + word
    console.print(" \\\n".join(lines), soft_wrap=True, markup=False, highlight=False)


def shell_words(text: str) -> list[str]:
    """text's shell words as written, quotes kept ('a b' stays one word); split at spaces where it does not
    parse."""
    import shlex

    lexer = shlex.shlex(text, posix=False)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote
        return text.split()


def print_notes(notes: list[str]) -> None:
    for n in notes:
        say(f"note: {n}")


def print_histogram(title: str, bins: list[tuple[int, int, int]]) -> None:
    t = Table(title=title)
    t.add_column("range")
    t.add_column("count", justify="right")
    t.add_column("")
    peak = max((c for _, _, c in bins), default=1) or 1
    for lo, hi, c in bins:
        t.add_row(f"{lo}-{hi}", str(c), "#" * max(int(40 * c / peak), 1 if c else 0))
    console.print(t)


def loader_table(results: list[Record], rec: verdict.Recommendation | None = None, title: str = "loader trials",
                 verbose: bool = False) -> Table:
    """Every trial, fastest first, failed trials last; with a verdict over a step record, each against the model
    as the verdict judged it (rec.fits). Short by default (a 100-column terminal cut the numbers of the full
    table, about 240 columns wide): the config, what a training epoch gets with the repeats' spread, tokens/s for
    token data, against the model, and a flag where a row is not to be read at face value; `verbose` gives every
    column."""
    if verbose:
        return full_loader_table(results, rec, title)
    step = rec.step if rec is not None else None
    t = Table(title=title)
    tokens = any(getattr(r, "tokens_per_sample", None) for r in ok_loaders(results))
    t.add_column("config", overflow="fold")
    t.add_column("samples/s (spread)", justify="right", no_wrap=True)
    if tokens:
        t.add_column("tokens/s", justify="right", no_wrap=True)
    if step is not None:
        t.add_column(f"vs model ({fmt(step.samples_per_s)}/s), mid-epoch", justify="right", overflow="fold")
    t.add_column("flag", overflow="fold")
    for r in sorted_by_rate(results):
        cfg, rate = r.loader_config, rank_rate(r)
        spread = r.samples_per_s_spread_pct
        row = [label(r), f"{fmt(rate)} ({'±' + format(spread / 2, '.0f') + '%' if spread == spread else '-'})"]
        if tokens:
            row.append(fmt(rate * r.tokens_per_sample) if r.tokens_per_sample else "-")
        if step is not None:
            row.append(fed_short(rec.fit_of(r)) if cfg.decode else "no verdict (raw bytes)")
        row.append(", ".join(flags(r)))
        t.add_row(*row)
    for r in results:
        if isinstance(r, LoaderResult) and r.status != "ok":
            t.add_row(label(r), "[red]failed[/red]", *([""] if tokens else []),
                      *([""] if step is not None else []), "reason below")
    return t


def flags(r: LoaderResult) -> list[str]:
    """Why a row is not to be read at face value: repeats that disagree, a steady rate training does not see,
    workers that read nothing, a cold cache not verified."""
    out = []
    if r.samples_per_s_spread_pct > HIGH_SPREAD_PCT:
        out.append(f"[yellow]noisy: repeats {r.samples_per_s_spread_pct:.0f}% apart[/yellow]")
    if not r.steady_valid:
        out.append(f"rate of {r.training_basis or 'whole repeats'}")
    w = r.config.get("num_workers", 0)
    if r.active_workers is not None and w and r.active_workers < w:
        out.append(f"[red]{w - r.active_workers} of {w} workers idle[/red]")
    if r.cache_mode == "cold" and not r.cache_verified:
        out.append("cold not verified")
    return out


FULL_COLUMNS = ("backend", "config", "steady samples/s median \\[min-max]", "training samples/s",
                "MiB/s payload/storage", "ttfb_s", "wait_ms p50/p99", "workers active/shards", "per core",
                "per GiB PSS", "cache")


def full_cells(r: LoaderResult) -> list[str]:
    """A successful trial's every figure, in FULL_COLUMNS order."""
    cache = r.cache_mode + ("" if r.cache_verified else " (unverified)")
    return [backend_label(r), label(r),
            f"{fmt(r.samples_per_s_median)} \\[{fmt(r.samples_per_s_min)}-{fmt(r.samples_per_s_max)}]",
            fmt(rank_rate(r)) + ("" if r.steady_valid else " [yellow](steady not valid)[/yellow]"),
            f"{fmt(r.payload_mib_s_median, 1)}/{fmt(r.storage_read_mib_s_median, 1)}",
            fmt(r.ttfb_s_median, 3), f"{fmt(r.batch_wait_ms_p50, 2)}/{fmt(r.batch_wait_ms_p99, 2)}",
            workers_cell(r), fmt(getattr(r, "samples_per_s_per_core", None)),
            fmt(getattr(r, "samples_per_s_per_gib_pss", None)), cache]


def trial_table(r: LoaderResult, title: str) -> Table:
    """One trial's every figure down the page (bench): a row a figure fits any terminal, where the full table's
    columns are about 240 wide."""
    rows = list(zip(FULL_COLUMNS, full_cells(r), strict=True))
    if r.tokens_per_sample:
        rows.insert(4, ("tokens/s (training rate x tokens a sample)", fmt(rank_rate(r) * r.tokens_per_sample)))
    return figure_table(title, rows)


def full_loader_table(results: list[Record], rec: verdict.Recommendation | None = None,
                      title: str = "loader trials") -> Table:
    """Every column (--verbose): steady and training rates, MiB/s, time to first batch, waits, workers, per core
    and per GiB, cache; with a verdict over a step record, each against the model."""
    step = rec.step if rec is not None else None
    t = Table(title=title)
    for col in FULL_COLUMNS:
        t.add_column(col, justify="left" if col in ("backend", "config") else "right")
    if step is not None:
        t.add_column(f"vs step ({fmt(step.samples_per_s)} samples/s), mid-epoch")
    multi = any(getattr(r, "world_size", 1) > 1 for r in results)
    if multi:
        t.add_column("per-rank samples/s (slowest)")
    failed = [r for r in results if isinstance(r, LoaderResult) and r.status != "ok"]
    for r in sorted_by_rate(results):
        row = full_cells(r)
        if step is not None:
            row.append(fed_short(rec.fit_of(r)) if r.loader_config.decode else "no verdict (raw bytes)")
        if multi:
            ranks = ", ".join(fmt(x) for x in r.per_rank_samples_per_s)
            row.append(f"{ranks} (rank {r.slowest_rank})" if r.per_rank_samples_per_s else "-")
        t.add_row(*row)
    for r in failed:
        row = [backend_label(r), label(r), "[red]failed (below)[/red]", "", "", "", "", "",
               "", "", r.cache_mode]
        t.add_row(*row, *([""] if step is not None else []), *([""] if multi else []))
    return t


def workers_cell(r: LoaderResult) -> str:
    """'active/configured' workers and the shard count; idle workers in red (they read nothing)."""
    w = r.config.get("num_workers", 0)
    if r.active_workers is None or not w:
        cell = "-"
    else:
        cell = f"{r.active_workers}/{w}" + (" [red]idle[/red]" if r.active_workers < w else "")
    return cell + (f" ({r.shards} sh)" if r.shards is not None else "")


def print_warnings(rec: verdict.Recommendation) -> None:
    """Under a loader table (sweep, report): idle workers, and what the loader-vs-step verdict cannot see, as the
    verdict found them (rec.findings)."""
    for line in rec.findings:
        console.print(line)


def label(r: Record) -> str:
    """A record's config as measured: a shuffle its backend could not apply is not written 'shuffled'."""
    return r.loader_config.short(getattr(r, "knobs_ignored", None) or ())


def backend_label(r: LoaderResult) -> str:
    """The backend facet: its name, its worker kind, and knobs it could not express."""
    b = getattr(r, "backend", None) or {}
    label = b.get("backend") or r.config.get("backend", "?")
    if b.get("worker_type") and r.config.get("num_workers", 0):
        label += f" ({b['worker_type']} workers)"
    ignored = getattr(r, "knobs_ignored", None)
    if ignored:
        label += f" [yellow]ignores {','.join(ignored)}[/yellow]"
    return label


def print_trial_notes(results: list[Record]) -> None:
    """Every note of the table's trials, once each kind (the text before its first colon), with how many
    trials carry it and which: the first trial's text stands for the rest."""
    kinds: dict[str, list[tuple[str, str]]] = {}
    for r in ok_loaders(results):
        for n in r.notes:
            kinds.setdefault(n.removeprefix("warning: ").split(":", 1)[0], []).append((label(r), n))
    for seen in kinds.values():
        cfgs = list(dict.fromkeys(c for c, _ in seen))
        which = ", ".join(cfgs[:3]) + (f" and {len(cfgs) - 3} more" if len(cfgs) > 3 else "")
        say(f"note ({len(cfgs)} trial{'s' if len(cfgs) != 1 else ''}: {which}): {seen[0][1]}")


def print_failures(results: list[Record]) -> None:
    for r in results:
        if getattr(r, "status", "ok") != "ok" and getattr(r, "config", None) is not None:
            console.print(f"[red]failed[/red] {label(r)}: {r.error}")


def verdict_text(f: verdict.Fit) -> str:
    """How one loader rate compares with the model's consumption rate (verdict.fit)."""
    if f.input_bound:
        return (f"input-bound by {f.idle_fraction * 100:.0f}% (loader gives {f.ratio * 100:.0f}% of the step rate; "
                f"model idle {f.idle_fraction * 100:.0f}% of the time)")
    tag = "" if f.has_headroom else f", below the {f.headroom:g}x headroom"
    return f"loader has {f.ratio:.2f}x headroom{tag}"


def fed_short(f: verdict.TrialFit | None) -> str:
    """A table cell: the fed rate predicted for this config and what it leaves the model idle (verdict.fits)."""
    if f is None or not f.predicted:
        return "-"
    cell = f"fed ~{fmt(f.fed_samples_per_s)}"
    if f.feeds:
        return cell + " (feeds)"
    return cell + (f" [red](idle {f.idle_fraction * 100:.0f}%)[/red]" if f.stalls else f" (< {f.headroom:g}x)")


def recommendation_line(rec: verdict.Recommendation) -> str:
    """One line a person can act on, from the verdict."""
    if rec.outcome == "no_trials":
        return "no trial succeeded; see the errors above"
    if rec.outcome == "no_decoded":
        return ("no verdict: every trial moved undecoded bytes, and a model eats decoded samples; rerun the "
                "sweep with --decode")
    basis = {"all": "", "verified_cold": " (judged on verified cold-cache trials)",
             "unverified_cold_as_warm": f" ({rec.unverified_cold} cold trial(s) not verified as cold: judged as "
                                        "warm)"}[rec.basis]
    pick, best, step_sps = rec.pick, rec.best, rec.step_samples_per_s
    chosen = rec.pick_config.short() if rec.pick_config is not None else _named(pick)
    if rec.confirmed:
        idle = _idle_name(rec.fed[0].runs[0].device if rec.fed else "cpu")
        fed = (f"fed {fmt(rec.steady_samples_per_s)} samples/s mid-epoch with the {idle} "
               f"{(rec.steady_stall_fraction or 0) * 100:.0f}% of the time, {fmt(rec.fed_samples_per_s)} over whole "
               f"runs (step alone {fmt(step_sps)} samples/s)")
        if rec.outcome == "input_bound":
            head = "NOT SETTLED" if rec.lower_bound else "INPUT-BOUND, confirmed end to end"
            return f"{head}: the best of {len(rec.fed)} configs fed, {chosen}, {fed}{basis}{_lower(rec)}"
        return (f"recommended: {chosen}, confirmed end to end: {fed}; the cheapest within "
                f"{(1 - verdict.NEAR_CONFIRMED) * 100:.0f}% of the best fed rate of {len(rec.fed)} configs{basis}")
    if rec.outcome == "best_without_model":
        return (f"recommended: {_named(pick)} at {fmt(rank_rate(pick))} samples/s a training epoch (within 5% of "
                f"the best, {fmt(rank_rate(best))}, at the lowest cost){basis}{_lower(rec)}")
    predicted = (f"predicted fed {fmt(rec.steady_samples_per_s)} samples/s mid-epoch, the model idle "
                 f"{(rec.steady_stall_fraction or 0) * 100:.0f}%; not confirmed fed")
    if rec.outcome == "input_bound":
        head = "NOT SETTLED" if rec.lower_bound else "INPUT-BOUND"
        return (f"{head}: no config tried feeds the step rate of {fmt(step_sps)} samples/s; the best, "
                f"{_named(pick)}: {predicted}{basis}{_lower(rec)}")
    margin = (f"the cheapest with {rec.headroom:g}x headroom" if rec.ratio >= rec.headroom else
              f"none tried has {rec.headroom:g}x headroom, so the loader's own swings may starve it")
    return (f"recommended: {_named(pick)} feeds the model ({fmt(rank_rate(pick))} samples/s a training epoch vs "
            f"{fmt(step_sps)}, {rec.ratio:.2f}x, {margin}; {predicted}){basis}")


def _lower(rec: verdict.Recommendation) -> str:
    """INPUT-BOUND is said only when the configs that could feed the model were measured and fell short."""
    return (f"; a lower bound, not a verdict: {rec.lower_bound_why}" if rec.lower_bound else "")


def _idle_name(device: str) -> str:
    return "GPU idle" if device.startswith("cuda") else "model waiting on data"


def print_recommendation(rec: verdict.Recommendation) -> None:
    """The verdict in full: the fed confirmations, the limits of the judged config, the line, the effects."""
    if rec.fed:
        print_fed(rec)
    if rec.limits is not None:
        print_limits(rec.limits, rec.pick or rec.best, rec.binding)
    elif rec.binding is not None and rec.binding.sentence:
        say(rec.binding.sentence)
    say(recommendation_line(rec))
    for g in rec.gains:
        say(f"fed: {g}")
    print_notes([f"effect: {e.sentence}" for e in rec.effects])
    for line in verdict.answer(rec):
        say(line)


def print_fed(rec: verdict.Recommendation) -> None:
    """--confirm's fed runs per config: rounds, fed rate and idle share, the step's host time fed vs alone."""
    t = Table(title="confirmed end to end (the fed loop, interleaved rounds)")
    for col in ("config", "loader alone samples/s", "fed samples/s pooled (rounds)", "device idle fed",
                "step host ms fed / alone", "effects"):
        t.add_column(col, justify="left" if col in ("config", "effects") else "right")
    for f in rec.fed:
        runs = f.runs
        alone = [1000 * r.batch_size / r.step_samples_per_s for r in runs if r.step_samples_per_s]
        picked = f.trial is rec.pick and rec.pick_config is not None and f.config.key() == rec.pick_config.key()
        mark = " [green](picked)[/green]" if picked else ""
        t.add_row(f.config.short() + mark, fmt(rank_rate(f.trial)),
                  f"{fmt(f.samples_per_s)} ({', '.join(fmt(r.samples_per_s) for r in runs)})",
                  f"{f.stall_fraction * 100:.1f}%",
                  f"{fmt(statistics.median(r.step_host_ms_median for r in runs), 1)} / "
                  f"{fmt(statistics.median(alone), 1) if alone else '-'}", ", ".join(f.effects) or "-")
    console.print(t)
    for f in rec.fed:
        for n in dict.fromkeys(n for r in f.runs for n in r.notes if n.startswith("effect: ")):
            say(f"{f.config.short()}: {n}")


def print_limits(res: LimitsResult, trial: LoaderResult | None = None,
                 binding: verdict.Binding | None = None) -> None:
    """The limits table (limit_rows) and the sentence naming the binding one (the verdict's, given one: it is
    never the model beside INPUT-BOUND; else the record's lowest ceiling); given the trial the limits are of,
    beside each ceiling the stages that spend its resource (ms a sample) and the share of the ceiling the trial's
    rate uses."""
    cfg = LoaderConfig(**res.config)
    t = Table(title=f"limits of {cfg.short()} ({res.usable_cores} usable cores, {res.device})")
    staged = trial is not None and bool(trial.stage_ms_per_sample)
    cols = ["limit", "ceiling samples/s"] + (["stages, ms a sample", "used"] if staged else []) + ["how measured"]
    for col in cols:
        t.add_column(col, justify="right" if col.startswith(("ceiling", "used")) else "left")
    for row in limit_rows(res, trial, binding.limit if binding is not None else None):
        name = f"[bold]{row.limit} (binding)[/bold]" if row.binding else row.limit
        extra = []
        if staged:
            used = row.used_fraction * 100
            extra = [", ".join(f"{k} {v:.3g}" for k, v in row.stages_ms.items()) or "-",
                     f"{used:.0f}%" if used == used else "-"]
        t.add_row(name, fmt(row.samples_per_s), *extra, row.how)
    console.print(t)
    console.print(binding.sentence if binding is not None and binding.sentence else describe_limits(res),
                  soft_wrap=True)
    print_notes(res.notes)


def describe_limits(res: LimitsResult) -> str:
    """One sentence: the record's lowest ceiling, at what rate, and how close the best config comes to it (a
    measurement: the binding limit is the verdict's, verdict.binding, printed where there is one)."""
    if not res.binding_limit:
        return "no ceiling could be measured"
    s = f"lowest ceiling: {res.binding_limit} at {res.binding_samples_per_s:,.0f} samples/s"
    if math.isfinite(res.best_of_binding_pct):
        known = {f.name for f in fields(LoaderConfig)}
        best = LoaderConfig(**{k: v for k, v in json.loads(res.best_config_key).items() if k in known})
        s += f"; the measured config ({best.short()}) reaches {res.best_of_binding_pct:.0f}% of it"
    return s


def _named(r: LoaderResult) -> str:
    """A config said with its backend first, so a side-by-side sweep's pick names the loader to use."""
    b = r.backend.get("backend") if getattr(r, "backend", None) else None
    return f"{label(r)} (backend {b or r.config.get('backend')})"  # [..] is rich markup


def stage_line(r: LoaderResult | E2EResult | WatchResult) -> str | None:
    """Where a sample's time goes, in one line: each stage's ms a sample (dataperf.measure.breakdown) and the
    consumer's wait; for a loader trial, the stage to attack (verdict.attack)."""
    from dataperf.verdict.attack import exposed

    ms = r.stage_ms_per_sample
    if not ms:
        return None
    from dataperf.stages import STAGES

    order = sorted(ms, key=lambda k: STAGES.index(k) if k in STAGES else len(STAGES))  # pipeline order
    parts = ", ".join(f"{k} {ms[k]:.3g}" for k in order)
    line = f"stages, ms a sample: {parts}; waiting in next() {fmt(r.main_wait_ms_per_sample, 2)}"
    e = exposed(r) if isinstance(r, LoaderResult) else None
    return line + (f"\n  on the critical path: {e.sentence()}" if e else "")


def print_collectors(c: dict[str, Any], verbose: bool = False) -> None:
    """What the collectors saw, each in its own words (verdict.observed.describe); those that could not run here (no
    sysstat, no root for eBPF, no GPU) only with verbose: on most machines they are the same lines every
    command (the record keeps why, for `report`)."""
    ran = c if verbose else {k: v for k, v in c.items() if not (isinstance(v, dict) and v.get("available") is False)}
    for item in observed.describe(ran):
        if isinstance(item, observed.Table):
            t = Table(title=item.title)
            for col in item.columns:
                t.add_column(col, justify="right")
            for row in item.rows:
                t.add_row(*row)
            console.print(t)
        elif isinstance(item, observed.Histogram):
            print_histogram(item.title, item.bins)
        else:
            console.print(item)
