"""`dataperf watch`: the user's own training run, unmodified, and the table of its watch records."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click
from rich.table import Table

from dataperf.commands import _render
from dataperf.errors import UserError
from dataperf.results import Record, WatchResult, fmt


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
@click.option("--pid", type=int, default=None, help="attach the collectors to this running job (no hooks)")
@click.option("--out", type=click.Path(path_type=Path), default=Path("results/watch.jsonl"), show_default=True,
              help="append one watch record per rank to this .jsonl")
@click.option("--label", default=None, help="name of the job in --out, matched by compare [the command line]")
@click.option("--ebpf", is_flag=True, help="count read syscalls per process of the job with eBPF (bcc/bpftrace)")
@click.option("--nsys", is_flag=True, help="run the command under Nsight Systems when installed")
@click.option("--verbose", is_flag=True, help="also say which collectors could not run here, and why")
def watch(cmd, pid, out, label, ebpf, nsys, verbose) -> None:
    """Your own training run, unmodified: `dataperf watch -- python train.py` (or `-- torchrun ...`).

    Per rank: step time, data wait, samples/s, data-stall fraction (GPU idle on CUDA), the DataLoader settings
    the script built, the hook's own cost; collectors on the job's process tree; exits with the job's code.
    """
    from dataperf.results import jsonl
    from dataperf.workflows.watch import launch, results

    cmd = list(cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if bool(cmd) == (pid is not None):
        raise UserError("give either a command after `--` (dataperf watch -- python train.py) or --pid PID")
    raw = out.parent / "raw"
    if pid is not None:
        w = launch.attach(pid, raw, ebpf, on_started=lambda: click.echo(
            f"watching pid {pid} and its process tree (collectors only); Ctrl-C stops watching", err=True))
    else:
        w = launch.run(cmd, raw, ebpf, nsys, results.data_path_of)
    recs = results.build(w, cmd or [f"pid {pid}"], label)
    for r in recs:
        jsonl.append(out, r)
    with _render.to_stderr():
        if pid is not None:
            _render.say(f"pid {pid}: collectors only, for {w.wall_s:.1f} s; step time, data wait and the loader are "
                        "measured in a job watch starts itself: dataperf watch -- python train.py")
        render(recs, verbose)
        hooks = f"; per-step hook lines: {w.hook_dir}" if w.hook_dir else ""
        _render.console.print(f"results: {out} ({len(recs)} watch record(s)){hooks}")
    if w.exit_code is not None:
        sys.exit(w.exit_code)


def verdict_line(r: WatchResult) -> str:
    """Input-bound or not, from the host's wait on the DataLoader and, on CUDA, the GPU's idle share."""
    if r.steps_measured == 0:
        return "no verdict: no optimizer steps were measured"
    if not r.samples_per_s:  # no DataLoader batch reached a step (no loader, or only ones that fed no step)
        read = f" (it read {Path(r.files_read[0]['path']).name})" if r.files_read else ""
        return ("unknown: no DataLoader batch was timed: the loop reads its data some other way" + read +
                "; whether it waits on it is not measured")
    gpu = "" if r.gpu_idle_fraction is None else f"; GPU idle {r.gpu_idle_fraction * 100:.1f}% of the time"
    stall = r.data_stall_fraction * 100
    if r.data_stall_fraction > 0.05:
        return f"input-bound: the training loop waited on the DataLoader {stall:.1f}% of step time{gpu}"
    return f"not input-bound: the training loop waited on the DataLoader {stall:.1f}% of step time{gpu}"


def figure_table(ws: list[WatchResult]) -> Table:
    """The job's figures, a column a rank; a figure the job did not give (no DataLoader batch reached a step:
    samples/s, waits, stall) reads 'unknown', never 0."""
    t = Table(title=f"watch: {' '.join(ws[0].command)[:100]}")
    t.add_column("figure")
    for r in ws:
        t.add_column("job" if r.rank is None else f"rank {r.rank}", justify="right")
    pct = lambda v: "-" if v is None or v != v else f"{v * 100:.1f}%"  # noqa: E731

    def fed(show: Callable[[WatchResult], str]) -> Callable[[WatchResult], str]:
        return lambda r: show(r) if r.samples_per_s or not r.steps_measured else "unknown"

    rows = [("steps (measured / total)", lambda r: f"{r.steps_measured} / {r.steps_total}"),
            ("first_step_ms (start-up, first batch)", lambda r: fmt(r.first_step_ms, 1)),
            ("step_ms median / mean / p99",
             lambda r: f"{fmt(r.step_ms_median, 2)} / {fmt(r.step_ms_mean, 2)} / {fmt(r.step_ms_p99, 2)}"),
            ("data_wait_ms median / p99",
             fed(lambda r: f"{fmt(r.data_wait_ms_median, 2)} / {fmt(r.data_wait_ms_p99, 2)}")),
            ("samples_per_s (steady / whole run)",
             fed(lambda r: f"{fmt(r.samples_per_s, 1)} / {fmt(r.run_samples_per_s, 1)}")),
            ("model_samples_per_s (when fed)", fed(lambda r: fmt(r.model_samples_per_s, 1))),
            ("data_stall_fraction", fed(lambda r: pct(r.data_stall_fraction))),
            ("gpu_idle_fraction (CUDA events)", lambda r: pct(r.gpu_idle_fraction) if r.gpu_idle_fraction is not None
             else "n/a (no CUDA)"),
            ("hook cost us/step (% of step)", lambda r: f"{fmt(r.hook_us_per_step_median, 1)} "
             f"({fmt(r.hook_overhead_pct, 3)}%)"),
            ("exit code", lambda r: "-" if r.exit_code is None else str(r.exit_code))]
    for name, fn in rows:
        t.add_row(name, *[fn(r) for r in ws])
    return t


def render(recs: list[Record], verbose: bool = False) -> None:
    """Per rank: the e2e-style figures of the user's own job, its loaders, the verdict and the next step (`report`
    shows them too)."""
    ws = [r for r in recs if isinstance(r, WatchResult)]
    if not ws:
        return
    console = _render.console
    if any(r.hook_loaded for r in ws):  # else every figure is unknown: the notes say why, no table of dashes
        console.print(figure_table(ws))
    for r in ws:
        who = "job" if r.rank is None else f"rank {r.rank}"
        for ld in r.loaders:
            console.print(f"{who} DataLoader: {ld.get('dataset_type')} bs={ld.get('batch_size')} "
                          f"workers={ld.get('num_workers')} prefetch={ld.get('prefetch_factor')} "
                          f"pin={ld.get('pin_memory')} persistent={ld.get('persistent_workers')} "
                          f"batches={ld.get('batches')} iterators={ld.get('iterators')} path={ld.get('data_path')}")
        if r.hook_loaded:
            console.print(f"{who}: {verdict_line(r)}")
        line = _render.stage_line(r)
        if line:
            _render.say(f"{who} {line}")
    for r in ws:
        if r.collectors:
            _render.print_collectors(r.collectors, verbose)
    seen = set()
    for r in ws:
        for n in r.notes:
            if n not in seen:
                seen.add(n)
                console.print(f"note: {n}")
    # a command wrapped only with ` \\` line ends: its lines pasted into a shell run as that one command
    for step, notes in dict.fromkeys((r.next_step, tuple(r.next_notes)) for r in ws):
        if step:
            _render.say(f"next: {step}", shell=True, markup=False)
        for n in notes:
            _render.say(f"note: {n}", markup=False)
