"""Everything a person reads: tables, progress bars, plots and verdicts. Takes records, never measures."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dataperf.formats.dataset_dir import Manifest

console = Console()
if not console.is_terminal:  # logs and pipes: wide enough that tables stay one line per trial
    console = Console(width=240)

MIB = 1024 * 1024


@contextlib.contextmanager
def progress_bar(label: str, total: int | None, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr; yields advance(n). Off on non-zero ranks and when stderr is no terminal
    (CI logs get the results, not redraw noise)."""
    err = Console(stderr=True)
    if not enabled or not err.is_terminal:
        yield lambda n=1: None
        return
    prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err, transient=True)
    with prog:
        task = prog.add_task(label, total=total)
        yield lambda n=1: prog.advance(task, n)


def print_made(out: Path, m: Manifest, made=None) -> None:
    """What was written; with `made` (formats.generate.Generated) also how fast, over its wall time."""
    extra = f", {len(m.shards)} shards" if m.format == "webdataset" else ""
    console.print(f"wrote {m.count} {m.kind} samples ({m.total_bytes / MIB:.1f} MiB{extra}) to {out}")
    if made is not None:
        unit = "images/s" if m.kind == "image" else "samples/s"
        console.print(f"generated at {made.samples_per_s:.1f} {unit}, {made.mib_per_s:.1f} MiB/s "
                      f"({made.wall_s:.1f} s, {made.jobs} process{'es' if made.jobs > 1 else ''})")


def print_inspection(ins) -> None:
    from dataperf.formats.inspect import length_histogram

    t = Table(title=f"dataset {ins.path}")
    t.add_column("figure")
    t.add_column("value", justify="right")
    rows = [
        ("format", ins.format), ("kind", ins.kind), ("samples", str(ins.count)),
        ("total_mib", f"{ins.total_bytes / MIB:.2f}"), ("shards", str(ins.shard_count)),
        ("sample_bytes_mean", f"{ins.sample_bytes_mean:.0f}"), ("sample_bytes_p50", f"{ins.sample_bytes_p50:.0f}"),
        ("sample_bytes_p99", f"{ins.sample_bytes_p99:.0f}"),
    ]
    if ins.token_lengths:
        rows += [("tokens_p50", f"{ins.token_p50:.0f}"), ("tokens_p99", f"{ins.token_p99:.0f}"),
                 ("tokens_max", str(max(ins.token_lengths)))]
    for r in rows:
        t.add_row(*r)
    console.print(t)
    if ins.token_lengths:
        print_histogram("token length (tokens)", length_histogram(ins.token_lengths))


def print_histogram(title: str, bins: list[tuple[int, int, int]]) -> None:
    t = Table(title=title)
    t.add_column("range")
    t.add_column("count", justify="right")
    t.add_column("")
    peak = max((c for _, _, c in bins), default=1) or 1
    for lo, hi, c in bins:
        t.add_row(f"{lo}-{hi}", str(c), "#" * max(int(40 * c / peak), 1 if c else 0))
    console.print(t)


def _fmt(v: float | None, nd: int = 0) -> str:
    if v is None or v != v:
        return "-"
    return f"{v:,.{nd}f}"


def ok_loaders(results: list) -> list:
    from dataperf.records import LoaderResult

    return [r for r in results if isinstance(r, LoaderResult) and r.status == "ok"]


def sorted_by_rate(results: list) -> list:
    return sorted(ok_loaders(results), key=lambda r: -r.samples_per_s_median)


def loader_table(results: list, step=None, headroom: float = 1.2, title: str = "loader trials") -> Table:
    """Every trial, fastest first, failed trials last with their reason; with a step record, the verdict."""
    from dataperf.records import LoaderConfig, LoaderResult

    t = Table(title=title)
    cols = ("backend", "config", "steady samples/s median \\[min-max]", "epoch samples/s", "MiB/s payload/storage",
            "ttfb_s", "wait_ms p50/p99", "workers active/shards", "per core", "per GiB PSS", "cache")
    for col in cols:
        t.add_column(col, justify="left" if col in ("backend", "config") else "right")
    if step is not None:
        t.add_column(f"vs step ({_fmt(step.samples_per_s)} samples/s)")
    multi = any(getattr(r, "world_size", 1) > 1 for r in results)
    if multi:
        t.add_column("per-rank samples/s (slowest)")
    failed = [r for r in results if isinstance(r, LoaderResult) and r.status != "ok"]
    for r in sorted_by_rate(results):
        cfg = LoaderConfig(**r.config)
        cache = r.cache_mode + ("" if r.cache_verified else " (unverified)")
        row = [backend_label(r), cfg.short(),
               f"{_fmt(r.samples_per_s_median)} \\[{_fmt(r.samples_per_s_min)}-{_fmt(r.samples_per_s_max)}]",
               _fmt(r.epoch_samples_per_s_median),
               f"{_fmt(r.payload_mib_s_median, 1)}/{_fmt(r.storage_read_mib_s_median, 1)}",
               _fmt(r.ttfb_s_median, 3), f"{_fmt(r.batch_wait_ms_p50, 2)}/{_fmt(r.batch_wait_ms_p99, 2)}",
               workers_cell(r), _fmt(getattr(r, "samples_per_s_per_core", None)),
               _fmt(getattr(r, "samples_per_s_per_gib_pss", None)), cache]
        if step is not None:
            row.append(verdict_short(r.samples_per_s_median, step.samples_per_s, headroom) if cfg.decode
                       else "no verdict (undecoded)")
        if multi:
            ranks = ", ".join(_fmt(x) for x in r.per_rank_samples_per_s)
            row.append(f"{ranks} (rank {r.slowest_rank})" if r.per_rank_samples_per_s else "-")
        t.add_row(*row)
    for r in failed:
        row = [backend_label(r), LoaderConfig(**r.config).short(), "[red]failed (below)[/red]", "", "", "", "", "",
               "", "", r.cache_mode]
        t.add_row(*row, *([""] if step is not None else []), *([""] if multi else []))
    return t


def workers_cell(r) -> str:
    """'active/configured' workers and the shard count; idle workers in red (they read nothing)."""
    w = r.config.get("num_workers", 0)
    if r.active_workers is None or not w:
        cell = "-"
    else:
        cell = f"{r.active_workers}/{w}" + (" [red]idle[/red]" if r.active_workers < w else "")
    return cell + (f" ({r.shards} sh)" if r.shards is not None else "")


def idle_warning(results: list) -> str | None:
    """One line for a whole table: trials whose workers were partly idle, and the fix."""
    idle = [r for r in ok_loaders(results) if r.active_workers is not None
            and r.active_workers < r.config.get("num_workers", 0)]
    if not idle:
        return None
    worst = max(r.config["num_workers"] * max(r.world_size, 1) for r in idle)
    shards = {r.shards for r in idle}
    return (f"warning: idle workers in {len(idle)} trial(s): more workers than shards ({sorted(shards)} shards) "
            f"left some reading nothing; their rates are shard-limited. Reshard to at least {worst} shards "
            f"(workers x ranks): dataperf shards convert SRC OUT --shards {worst}")


def verdict_caveats(results: list, step) -> list[str]:
    """What the loader-vs-step verdict cannot see, stated where it applies (audit M9, H4)."""
    out = []
    ok = ok_loaders(results)
    if step is None:
        return out
    if any(not r.config.get("decode") for r in ok):
        out.append("note: undecoded trials get no verdict: a model eats decoded samples (sweep --model decodes "
                   "unless --no-decode is given)")
    if str(step.device).startswith("cpu"):
        out.append("note: loader and model step were measured apart on this CPU; training runs them together "
                   "on the same cores, so the fed rate is lower than either (check with dataperf e2e)")
    sizes = sorted({r.config.get("batch_size") for r in ok} - {step.batch_size})
    if sizes:
        out.append(f"note: the step was measured at batch {step.batch_size}; loader trials at batch {sizes} are "
                   "compared per sample with it, which assumes the step's per-sample cost does not change")
    return out


def backend_label(r) -> str:
    """The backend facet: its name, its worker kind, and knobs it could not express."""
    b = getattr(r, "backend", None) or {}
    label = b.get("backend") or r.config.get("format", "?")
    if b.get("worker_type") and r.config.get("num_workers", 0):
        label += f" ({b['worker_type']} workers)"
    ignored = getattr(r, "knobs_ignored", None)
    if ignored:
        label += f" [yellow]ignores {','.join(ignored)}[/yellow]"
    return label


def print_failures(results: list) -> None:
    from dataperf.records import LoaderConfig

    for r in results:
        if getattr(r, "status", "ok") != "ok" and getattr(r, "config", None) is not None:
            console.print(f"[red]failed[/red] {LoaderConfig(**r.config).short()}: {r.error}")


def verdict_text(loader_sps: float, step_sps: float, headroom: float = 1.2) -> str:
    """How one loader rate compares with the model's consumption rate."""
    ratio = loader_sps / step_sps
    if ratio < 1:
        return (f"input-bound by {(1 - ratio) * 100:.0f}% (loader gives {ratio * 100:.0f}% of the step rate; "
                f"model idle {(1 - ratio) * 100:.0f}% of the time)")
    tag = "" if ratio >= headroom else f", below the {headroom:g}x headroom"
    return f"loader has {ratio:.2f}x headroom{tag}"


def verdict_short(loader_sps: float, step_sps: float, headroom: float = 1.2) -> str:
    ratio = loader_sps / step_sps
    if ratio < 1:
        return f"[red]input-bound by {(1 - ratio) * 100:.0f}%[/red]"
    return f"{ratio:.2f}x headroom" + ("" if ratio >= headroom else f" (< {headroom:g}x)")


def cost_key(r) -> tuple:
    """Cheapest first: fewest workers (DALI: threads), then smallest prefetch, then smallest batch."""
    c = r.config
    workers = c.get("dali_num_threads") or 0 if c.get("format") == "dali" else c.get("num_workers", 0)
    prefetch = (c.get("dali_prefetch_queue_depth") if c.get("format") == "dali" else c.get("prefetch_factor")) or 0
    return (workers, prefetch, c.get("batch_size", 0), c.get("pin_memory", False),
            c.get("persistent_workers", False))


def cheapest_feeding(results: list, step_sps: float, headroom: float = 1.2):
    """The smallest decoded config whose median rate sustains the step rate with headroom, or None."""
    feeding = [r for r in ok_loaders(results) if r.samples_per_s_median >= headroom * step_sps
               and r.config.get("decode")]
    return min(feeding, key=cost_key) if feeding else None


def recommendation(results: list, step=None, headroom: float = 1.2) -> str:
    """One line a person can act on."""

    ok = sorted_by_rate(results)
    if not ok:
        return "no trial succeeded; see the errors above"
    cold = [r for r in ok if r.cache_mode == "cold" and r.cache_verified]
    unverified = sum(1 for r in ok if r.cache_mode == "cold" and not r.cache_verified)
    basis = f" ({unverified} cold trial(s) not verified as cold: judged as warm)" if unverified else ""
    if cold and len(cold) < len(ok):
        # a training set larger than RAM is read cold: judge configs by what storage sustains
        ok, results, basis = cold, cold, " (judged on verified cold-cache trials)"
    if step is not None:
        decoded = [r for r in ok if r.config.get("decode")]
        if not decoded:
            return ("no verdict: every trial moved undecoded bytes, and a model eats decoded samples; rerun the "
                    "sweep with --decode")
        ok = decoded
    best = ok[0]
    if step is None:
        near = [r for r in ok if r.samples_per_s_median >= 0.95 * best.samples_per_s_median]
        pick = min(near, key=cost_key)
        return (f"recommended: {_named(pick)} at {_fmt(pick.samples_per_s_median)} "
                f"samples/s (within 5% of the best, {_fmt(best.samples_per_s_median)}, at the lowest cost){basis}")
    pick = cheapest_feeding(results, step.samples_per_s, headroom)
    if pick is None:
        return (f"INPUT-BOUND: no config sustains {headroom:g}x the step rate of {_fmt(step.samples_per_s)} "
                f"samples/s; the best, {_named(best)}, is "
                f"{verdict_text(best.samples_per_s_median, step.samples_per_s, headroom)}{basis}")
    return (f"recommended: {_named(pick)} feeds the model "
            f"({_fmt(pick.samples_per_s_median)} vs {_fmt(step.samples_per_s)} samples/s, "
            f"{pick.samples_per_s_median / step.samples_per_s:.2f}x, the cheapest with {headroom:g}x headroom){basis}")


def _named(r) -> str:
    """A config said with its backend first, so a side-by-side sweep's pick names the loader to use."""
    from dataperf.records import LoaderConfig

    b = r.backend.get("backend") if getattr(r, "backend", None) else None
    return f"{LoaderConfig(**r.config).short()} (backend {b or r.config.get('format')})"  # [..] is rich markup


def heatmap(results: list, path: Path) -> Path | None:
    """samples/s over workers x prefetch, one panel per backend/worker type/cache/batch size/decode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    groups: dict[tuple, list] = {}
    for r in ok_loaders(results):
        c = r.config
        if c["format"] == "dali":
            continue
        wt = (getattr(r, "backend", None) or {}).get("worker_type") or c.get("worker_type") or ""
        groups.setdefault((c["format"], wt, r.cache_mode, c["batch_size"], c["decode"]), []).append(r)
    if not groups:
        return None
    rates = [r.samples_per_s_median for rs in groups.values() for r in rs]
    vmin, vmax = min(rates), max(rates)  # one scale for every panel, so colours compare across them
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 3.6), squeeze=False)
    for ax, (g, rs) in zip(axes[0], sorted(groups.items()), strict=True):
        workers = sorted({r.config["num_workers"] for r in rs})
        pfs = sorted({r.config["prefetch_factor"] or 0 for r in rs})
        grid = np.full((len(workers), len(pfs)), np.nan)
        for r in rs:
            i, j = workers.index(r.config["num_workers"]), pfs.index(r.config["prefetch_factor"] or 0)
            grid[i, j] = np.nanmax([grid[i, j], r.samples_per_s_median])
        im = ax.imshow(grid, cmap="viridis", aspect="auto", origin="lower", vmin=vmin, vmax=vmax)
        for (i, j), v in np.ndenumerate(grid):
            if v == v:
                light = (v - vmin) / ((vmax - vmin) or 1) > 0.6
                ax.text(j, i, f"{v:,.0f}", ha="center", va="center", color="k" if light else "w", fontsize=8)
        ax.set_xticks(range(len(pfs)), [str(p) if p else "-" for p in pfs])
        ax.set_yticks(range(len(workers)), [str(w) for w in workers])
        ax.set_xlabel("prefetch_factor")
        ax.set_ylabel("num_workers")
        ax.set_title(f"{g[0]}{f' ({g[1]} workers)' if g[1] else ''} {g[2]} bs={g[3]}{' decode' if g[4] else ''}",
                     fontsize=9)
        fig.colorbar(im, ax=ax, label="samples/s")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def print_trial(r) -> None:
    """One trial in full: figures, collectors, notes."""
    console.print(loader_table([r], title=f"bench {r.data}"))
    if r.status == "ok":
        console.print(f"repeats: {r.repeats} x {r.batches_per_repeat} batches; steady samples/s per repeat "
                      f"{[round(x) for x in r.samples_per_s_repeats]}; epoch (start-up included) "
                      f"{[round(x) for x in r.epoch_samples_per_s_repeats]}; start-up {_fmt(r.startup_s_median, 3)} s")
        console.print(f"harness overhead (no-op DataLoader, same workers, collectors on): "
                      f"{_fmt(r.harness_overhead_ms_per_batch, 3)} ms/batch = {_fmt(r.harness_overhead_pct, 1)}% "
                      "of this trial's batch time")
        print_footprint(r)
        print_collectors(r.collectors)
    else:
        print_failures([r])
    for n in r.notes:
        console.print(f"note: {n}", soft_wrap=True)  # one note, one line: logs grep by line


def print_footprint(r) -> None:
    """Cost of the trial: cores busy and PSS of the process tree, and a converted store's one-off cost."""
    b = getattr(r, "backend", None) or {}
    if getattr(r, "cpu_cores_busy_median", None) == getattr(r, "cpu_cores_busy_median", 0.0):  # not NaN
        console.print(f"footprint: {_fmt(r.cpu_cores_busy_median, 2)} cores busy "
                      f"({_fmt(r.samples_per_s_per_core)} samples/s per core); PSS peak "
                      f"{_fmt(r.pss_mib_peak)} MiB, main process + workers "
                      f"({_fmt(r.samples_per_s_per_gib_pss)} samples/s per GiB); workers' PSS growth within an "
                      f"epoch {_fmt(r.worker_pss_growth_pct, 1)}%")
    if "conversion_s" in b:
        console.print(f"store: {b['store']} ({_fmt(b['store_mib'], 1)} MiB, converted in "
                      f"{_fmt(b['conversion_s'], 2)} s{', reused' if b.get('store_reused') else ''})")


def print_collectors(c: dict) -> None:
    if not c:
        return
    disk = c.get("disk", {})
    if disk.get("available"):
        line = f"disk {disk['device']}: {disk['read_mib_s']:.1f} MiB/s read, {disk['read_iops']:.0f} IOPS"
        if "util_pct" in disk:
            line += f", {disk['util_pct']:.0f}% util"
        console.print(line)
    elif disk:
        console.print(f"disk: unavailable: {disk.get('why')}")
    procs = c.get("processes")
    if procs:
        t = Table(title="processes (/proc/PID/io)")
        for col in ("pid", "role", "read_syscalls", "storage_read_mib", "cpu_pct_mean", "rss_peak_mib"):
            t.add_column(col, justify="right")
        for p in procs["per_process"]:
            t.add_row(str(p["pid"]), p["role"] + (" (exited)" if p["exited"] else ""), str(p["read_syscalls"]),
                      _fmt(p["storage_read_mib"], 2), _fmt(p["cpu_pct_mean"], 0), _fmt(p["rss_peak_mib"], 0))
        console.print(t)
        console.print("note: read_syscalls count every read(), worker result pipes and the collectors' own /proc "
                      "reads included, not only dataset reads; exited workers' rows hold their last sample "
                      "(totals are right via main)")
        if procs.get("main_includes_exited_workers"):
            console.print("note: the main row includes exited workers' counts (the kernel folds a reaped "
                          "child's I/O into its parent)")
    for name in ("iostat", "pidstat", "ebpf"):
        d = c.get(name)
        if not d:
            continue
        if not d.get("available"):
            stand_in = f"; {d['fallback']} stand in" if d.get("fallback") else ""
            console.print(f"{name}: unavailable: {d.get('why')}{stand_in}")
        elif name == "iostat":
            console.print(f"iostat {d.get('device')}: {d.get('intervals')} intervals, "
                          f"{_fmt(d.get('read_mib_s_mean'), 1)} MiB/s, {_fmt(d.get('read_iops_mean'))} r/s, "
                          f"{_fmt(d.get('util_pct_mean'), 0)}% util (log {d.get('raw_log')})")
        elif name == "pidstat":
            ours = [p for p in d.get("processes", []) if p["ours"]]
            console.print(f"pidstat: {d.get('intervals')} intervals, our processes "
                          + ", ".join(f"{p['pid']} {_fmt(p['cpu_pct_mean'])}% CPU" for p in ours)
                          + f" (log {d.get('raw_log')})")
        else:
            print_ebpf(d)


def print_ebpf(d: dict) -> None:
    t = Table(title=f"eBPF read syscalls by process (via {d.get('backend')})")
    for col in ("pid", "comm", "reads", "read_mib"):
        t.add_column(col, justify="right")
    for p in d.get("per_process", []):
        t.add_row(str(p["pid"]), p["comm"], str(p["reads"]), _fmt(p["read_mib"], 2))
    console.print(t)
    if d.get("skipped"):
        console.print(f"note: eBPF first choice skipped: {d['skipped']}")
    hist = d.get("read_size_histogram_bytes") or {}
    if hist:
        print_histogram("read() sizes (bytes)", [(int(k.split("-")[0]), int(k.split("-")[1]), v)
                                                 for k, v in hist.items()])


def latest_step(recs: list):
    from dataperf.records import StepResult

    steps = [r for r in recs if isinstance(r, StepResult) and r.status == "ok"]
    return steps[-1] if steps else None


def print_step(r) -> None:
    t = Table(title=f"step {r.model} on {r.device} ({r.params_m:.1f}M params, {r.optimizer})")
    t.add_column("figure")
    t.add_column("value", justify="right")
    shape = f"{r.batch_size} x {r.seq_len} tokens" if r.seq_len else f"{r.batch_size} x {r.image_size}px"
    rows = [("batch", shape),
            ("step_ms median \\[min-max]", f"{r.step_ms_median:.2f} \\[{r.step_ms_min:.2f}-{r.step_ms_max:.2f}]"),
            ("samples_per_s", _fmt(r.samples_per_s, 1))]
    if r.tokens_per_s:
        rows.append(("tokens_per_s", _fmt(r.tokens_per_s)))
    rows.append(("peak_mem_mib", _fmt(r.peak_mem_mib, 1)))
    if r.cuda_max_allocated_mib is not None:
        rows.append(("cuda_max_allocated_mib", _fmt(r.cuda_max_allocated_mib, 1)))
        rows.append(("nvml_peak_used_mib", _fmt(r.nvml_peak_used_mib, 1)))
    rows.append(("peak_rss_mib", _fmt(r.peak_rss_mib, 1)))
    for row in rows:
        t.add_row(*row)
    console.print(t)
    for n in r.notes:
        console.print(f"note: {n}")


def print_e2e(r) -> None:
    from dataperf.records import LoaderConfig

    t = Table(title=f"end to end: {LoaderConfig(**r.config).short()} -> {r.model} on {r.device}")
    t.add_column("figure")
    t.add_column("value", justify="right")
    rows = [("step_ms median (wall, fed)", _fmt(r.step_ms_median, 2)),
            ("data_wait_ms median / p99", f"{_fmt(r.data_wait_ms_median, 2)} / {_fmt(r.data_wait_ms_p99, 2)}"),
            ("epoch restarts while measured", str(r.epoch_restarts)),
            ("h2d_ms median", _fmt(r.h2d_ms_median, 3)),
            ("compute_ms median", _fmt(r.compute_ms_median, 2)),
            ("samples_per_s", _fmt(r.samples_per_s, 1)),
            ("host_wait_fraction", f"{r.host_wait_fraction * 100:.1f}%")]
    if r.gpu_idle_fraction is not None:
        rows.append(("gpu_idle_fraction", f"{r.gpu_idle_fraction * 100:.1f}%"))
    rows.append(("data_stall_fraction (device idle)", f"{r.data_stall_fraction * 100:.1f}%"))
    if r.predicted_stall_fraction is not None:
        rows += [("loader_samples_per_s (alone, steady)", _fmt(r.loader_samples_per_s, 1)),
                 ("loader epoch samples/s (alone, start-up incl.)", _fmt(r.loader_epoch_samples_per_s, 1)),
                 ("loader rate with this run's epoch restarts", _fmt(r.predicted_loader_samples_per_s, 1)),
                 ("step_samples_per_s (alone)", _fmt(r.step_samples_per_s, 1)),
                 ("predicted_stall_fraction", f"{r.predicted_stall_fraction * 100:.1f}%")]
    for row in rows:
        t.add_row(*row)
    console.print(t)
    verdict = "input-bound" if r.data_stall_fraction > 0.05 else "not input-bound"
    console.print(f"{verdict}: the model's device sat idle waiting for data {r.data_stall_fraction * 100:.1f}% of "
                  f"the time ({r.stall_basis})")
    for n in r.notes:
        console.print(f"note: {n}")


def print_profile(r) -> None:
    t = Table(title=f"top ops by {r.sort_by} ({r.model} on {r.device})")
    for col in ("op", "calls", "self_ms", "cpu_total_ms"):
        t.add_column(col, justify="left" if col == "op" else "right")
    for o in r.top_ops:
        t.add_row(o["name"][:70], str(o["calls"]), _fmt(o["self_ms"], 3), _fmt(o["cpu_total_ms"], 3))
    console.print(t)
    split = " / ".join(f"{k} {v:.2f} ms ({r.split_fraction.get(k, 0) * 100:.0f}%)" for k, v in r.split_ms.items())
    console.print(f"step time split (per active step): {split}")
    console.print("note: these steps start on a fresh loader and are served from the batches its workers "
                  "already queued (workers x prefetch), so data_wait here is a lower bound; dataperf e2e "
                  "measures the stall")
    if r.span_ms:
        console.print("profiler spans per step (host): "
                      + ", ".join(f"{k} {v:.2f} ms" for k, v in r.span_ms.items()))
    if r.device.startswith("cuda"):
        console.print(f"CUDA ops with device time: {r.cuda_kernels_seen}")
    console.print(f"Chrome trace: {r.trace_path} (open in https://ui.perfetto.dev or chrome://tracing)")
    if r.nsys:
        console.print(f"nsys: {r.nsys}")


def print_compare(changes: list, threshold: str) -> None:
    t = Table(title=f"base vs head (threshold {threshold})")
    for col in ("kind", "config", "metric", "base", "head", "change", "95% CI", "verdict"):
        t.add_column(col, justify="left" if col in ("kind", "config", "metric", "verdict") else "right")
    colour = {"regression": "red", "improvement": "green", "within noise": "yellow", "unchanged": "white",
              "too few repeats": "yellow"}
    for c in changes:
        t.add_row(c.kind, c.config[:60], c.metric, _fmt(c.base_median, 2), _fmt(c.head_median, 2),
                  f"{c.change_pct:+.1f}%", f"{c.ci_pct[0]:+.1f}..{c.ci_pct[1]:+.1f}%",
                  f"[{colour[c.verdict]}]{c.verdict}[/{colour[c.verdict]}]")
    console.print(t)
    n = sum(c.verdict == "regression" for c in changes)
    console.print("verdict: regression when the whole 95% CI is beyond the threshold on the worse side")
    few = sum(c.verdict == "too few repeats" for c in changes)
    if few:
        console.print(f"note: {few} row(s) have fewer than 5 repeats a side: no verdict (measure with --repeats 5, "
                      "or pool several runs in one file)")
    console.print(f"{n} regression(s)" if n else "no regression")


def print_lengths(r) -> None:
    from dataperf.formats.inspect import length_histogram

    print_histogram("sample length (tokens)", length_histogram(r.sample_lengths))
    print_histogram(f"per-batch padded length (tokens, batch {r.batch_size})", length_histogram(r.batch_max_tokens))
    t = Table(title=f"token lengths {r.data}")
    t.add_column("figure")
    t.add_column("value", justify="right")
    rows = [("samples", str(r.samples)),
            ("sample_tokens p50 / p99 / max",
             f"{r.sample_tokens_p50:.0f} / {r.sample_tokens_p99:.0f} / {r.sample_tokens_max}"),
            ("batch_max_tokens p50 / p99 / max",
             f"{r.batch_max_tokens_p50:.0f} / {r.batch_max_tokens_p99:.0f} / {r.batch_max_tokens_max}"),
            ("padding_waste_pct", f"{r.padding_waste_pct:.1f}")]
    if r.cap_tokens:
        rows += [(f"capped at {r.cap_tokens}: batch_max_tokens p99", f"{r.capped_batch_max_tokens_p99:.0f}"),
                 ("capped padding_waste_pct", f"{r.capped_padding_waste_pct:.1f}"),
                 ("tokens_dropped_by_cap_pct", f"{r.tokens_dropped_by_cap_pct:.1f}")]
    if r.step_peak_mem_mib_uncapped is not None:
        rows.append(("step peak_mem_mib at p99 batch length", _fmt(r.step_peak_mem_mib_uncapped, 1)))
    if r.step_peak_mem_mib_capped is not None:
        rows.append(("step peak_mem_mib capped", _fmt(r.step_peak_mem_mib_capped, 1)))
    for row in rows:
        t.add_row(*row)
    console.print(t)
    ratio = r.batch_max_tokens_p99 / r.batch_max_tokens_p50 if r.batch_max_tokens_p50 else 1
    if ratio > 2:
        console.print(f"OOM risk: the p99 batch is {ratio:.1f}x longer than the median batch; size memory for "
                      f"{r.batch_max_tokens_max} tokens per row, or --cap / bucket by length")


def print_diagnose(r) -> None:
    t = Table(title=f"diagnose {r.data} -> {r.model}")
    t.add_column("measurement")
    t.add_column("samples_per_s", justify="right")
    t.add_row("(1) model step, synthetic in-memory data", _fmt(r.step_samples_per_s, 1))
    t.add_row("(2) loader, warm page cache", _fmt(r.warm_samples_per_s, 1))
    t.add_row("(3) loader, cold cache", _fmt(r.cold_samples_per_s, 1))
    console.print(t)
    fetch = "not measured (cold not verified)" if r.fetch_stall_fraction != r.fetch_stall_fraction else \
        f"{r.fetch_stall_fraction * 100:.0f}%"
    console.print(f"share of step time: compute {r.compute_fraction * 100:.0f}%, prep stall "
                  f"{r.prep_stall_fraction * 100:.0f}%, fetch stall {fetch}")
    console.print(r.sentence)
    for a in r.advice:
        console.print(f"  - {a}")
    w = Table(title="what-if: dataset fraction in page cache")
    w.add_column("cached_fraction", justify="right")
    w.add_column("predicted model idle", justify="right")
    for row in r.what_if:
        w.add_row(f"{row['cached_fraction'] * 100:.0f}%", f"{row['predicted_stall_fraction'] * 100:.0f}%")
    console.print(w)
    for n in r.notes:
        console.print(f"note: {n}")


def print_tune_step(step) -> None:
    from dataperf.records import LoaderConfig

    r = step.result
    rate = _fmt(r.samples_per_s_median) if r.status == "ok" else "failed"
    console.print(f"\\[{step.phase:>10}] {LoaderConfig(**r.config).short():<48} {rate:>10} samples/s  ({step.why})")


def print_tune(outcome) -> None:
    from dataperf.records import LoaderConfig

    console.print(f"stopped: {outcome.stop_reason} after {len(outcome.steps)} trials")
    if outcome.pick is not None:
        p = outcome.pick
        tgt = f" (target {outcome.target_samples_per_s:.0f})" if outcome.target_samples_per_s else ""
        console.print(f"pick: {LoaderConfig(**p.config).short()} at {_fmt(p.samples_per_s_median)} samples/s{tgt}")


def print_env(recs: list) -> None:
    """Where the results came from, once at the top; a warning when the file mixes machines or versions."""
    from dataperf import provenance

    envs = [r.env for r in recs if getattr(r, "env", None)]
    if not envs:
        console.print("provenance: not recorded (results written by dataperf before schema 2)")
        return
    e = envs[0]
    gpu = f", GPU {e['gpu_model']} (driver {e['gpu_driver']})" if e.get("gpu_model") else ", no GPU"
    console.print(f"machine: {e.get('host')}: {e.get('cpu_count')} x {e.get('cpu_model')}, "
                  f"{e.get('mem_total_gib')} GiB, kernel {e.get('kernel')}{gpu}")
    commit = e.get("dataperf_commit") or "no commit"
    console.print(f"software: python {e.get('python')}, torch {e.get('torch')}, webdataset {e.get('webdataset')}, "
                  f"DALI {e.get('dali') or '-'}, dataperf {e.get('dataperf')} ({commit})")
    if e.get("fs_type"):
        console.print(f"storage: {e['fs_type']} on {e.get('fs_device')}")
    mixed = sorted({k for other in envs[1:] for k, _, _ in provenance.differences(e, other)})
    if mixed:
        console.print(f"[yellow]warning: this file mixes results from different {', '.join(mixed)}; "
                      "figures from different machines or versions are not comparable[/yellow]")


def print_env_differences(diffs: list[tuple[str, object, object]]) -> None:
    for k, b, h in diffs:
        console.print(f"[yellow]warning: base and head differ in {k}: {b!r} vs {h!r}; the comparison is not "
                      "like for like[/yellow]")


@contextlib.contextmanager
def to_stderr() -> Iterator[None]:
    """Print on stderr for a while: `dataperf watch` leaves the job's stdout exactly as the job wrote it."""
    global console
    saved = console
    console = Console(stderr=True)
    if not console.is_terminal:
        console = Console(stderr=True, width=180)
    try:
        yield
    finally:
        console = saved


def watch_verdict(r) -> str:
    """Input-bound or not, from the host's wait on the DataLoader and, on CUDA, the GPU's idle share."""
    if r.steps_measured == 0:
        return "no verdict: no optimizer steps were measured"
    gpu = "" if r.gpu_idle_fraction is None else f"; GPU idle {r.gpu_idle_fraction * 100:.1f}% of the time"
    stall = r.data_stall_fraction * 100
    if r.data_stall_fraction > 0.05:
        return f"input-bound: the training loop waited on the DataLoader {stall:.1f}% of step time{gpu}"
    return f"not input-bound: the training loop waited on the DataLoader {stall:.1f}% of step time{gpu}"


def print_watch(recs: list) -> None:
    """Per rank: the e2e-style figures of the user's own job, its loaders, the verdict and the next step."""
    from dataperf.records import WatchResult

    ws = [r for r in recs if isinstance(r, WatchResult)]
    if not ws:
        return
    t = Table(title=f"watch: {' '.join(ws[0].command)[:100]}")
    t.add_column("figure")
    for r in ws:
        t.add_column("job" if r.rank is None else f"rank {r.rank}", justify="right")
    pct = lambda v: "-" if v is None or v != v else f"{v * 100:.1f}%"  # noqa: E731
    rows = [("steps (measured / total)", lambda r: f"{r.steps_measured} / {r.steps_total}"),
            ("first_step_ms (start-up, first batch)", lambda r: _fmt(r.first_step_ms, 1)),
            ("step_ms median / p99", lambda r: f"{_fmt(r.step_ms_median, 2)} / {_fmt(r.step_ms_p99, 2)}"),
            ("data_wait_ms median / p99",
             lambda r: f"{_fmt(r.data_wait_ms_median, 2)} / {_fmt(r.data_wait_ms_p99, 2)}"),
            ("samples_per_s (steady / whole run)",
             lambda r: f"{_fmt(r.samples_per_s, 1)} / {_fmt(r.run_samples_per_s, 1)}"),
            ("model_samples_per_s (when fed)", lambda r: _fmt(r.model_samples_per_s, 1)),
            ("data_stall_fraction", lambda r: pct(r.data_stall_fraction)),
            ("gpu_idle_fraction (CUDA events)", lambda r: pct(r.gpu_idle_fraction) if r.gpu_idle_fraction is not None
             else "n/a (no CUDA)"),
            ("hook cost us/step (% of step)", lambda r: f"{_fmt(r.hook_us_per_step_median, 1)} "
             f"({_fmt(r.hook_overhead_pct, 3)}%)"),
            ("exit code", lambda r: str(r.exit_code))]
    for name, fn in rows:
        t.add_row(name, *[fn(r) for r in ws])
    console.print(t)
    for r in ws:
        who = "job" if r.rank is None else f"rank {r.rank}"
        for ld in r.loaders:
            console.print(f"{who} DataLoader: {ld.get('dataset_type')} bs={ld.get('batch_size')} "
                          f"workers={ld.get('num_workers')} prefetch={ld.get('prefetch_factor')} "
                          f"pin={ld.get('pin_memory')} persistent={ld.get('persistent_workers')} "
                          f"batches={ld.get('batches')} iterators={ld.get('iterators')} path={ld.get('data_path')}")
        if r.hook_loaded:
            console.print(f"{who}: {watch_verdict(r)}")
    for r in ws:
        if r.collectors:
            print_collectors(r.collectors)
            nv = r.collectors.get("nvml", {})
            if nv.get("available"):
                for g in nv["gpus"]:
                    console.print(f"GPU {g['index']} {g['name']}: peak {g['peak_used_mib']:,.0f} of "
                                  f"{g['total_mib']:,.0f} MiB used (NVML, {len(g['used_mib_windows'])} x "
                                  f"{nv['window_s']:g} s windows)")
            elif nv:
                console.print(f"nvml: unavailable: {nv.get('why')}")
    seen = set()
    for r in ws:
        for n in r.notes:
            if n not in seen:
                seen.add(n)
                console.print(f"note: {n}")
    steps = {r.next_step for r in ws if r.next_step}
    for s in steps:
        console.print(f"next: {s}")


def print_memory(rows: list) -> None:
    """The memory table: one row per optimizer at one batch size, reduction against AdamW."""
    first = rows[0]
    t = Table(title=f"GPU memory {first.model} batch {first.batch_size} seq {first.seq_len} amp {first.amp}")
    cols = ("optimizer", "max_allocated_mib", "nvml_peak_used_mib", "step_ms", "samples_per_s",
            "reduction_vs_adamw", "max_batch")
    for col in cols:
        t.add_column(col, justify="left" if col == "optimizer" else "right")
    for r in rows:
        red = "-" if r.reduction_vs_adamw_pct is None else f"{r.reduction_vs_adamw_pct:+.1f}%"
        if r.status != "ok":
            t.add_row(r.optimizer, "failed", "", "", "", "", _fmt(r.max_batch) if r.max_batch is not None else "-")
            continue
        t.add_row(r.optimizer, _fmt(r.cuda_max_allocated_mib), _fmt(r.nvml_peak_used_mib), _fmt(r.step_ms_median, 1),
                  _fmt(r.samples_per_s, 1), red, _fmt(r.max_batch) if r.max_batch is not None else "-")
    console.print(t)
    for r in rows:
        if r.error:
            console.print(f"{r.optimizer}: {r.error}")
        if r.oom_summary:
            console.print(f"{r.optimizer}: memory summary of the first batch that did not fit: {r.oom_summary}")
        for n in r.notes:
            if n.startswith("max-batch"):
                console.print(f"{r.optimizer}: {n}")
    console.print(f"nvml_peak_used_mib is sampled every {first.nvml_interval_s:g} s (as nvidia-smi -l 1) and "
                  "includes the CUDA context; reduction is of max_allocated_mib")
