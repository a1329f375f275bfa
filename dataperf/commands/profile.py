"""`dataperf profile`: torch.profiler around the fed loop, and the tables of a profile record."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import click
from rich.table import Table

from dataperf.commands import _render
from dataperf.commands._build import fed_config, make_step_options
from dataperf.commands._options import OUT, loader_options, model_options
from dataperf.results import ProfileResult, fmt


@click.command("profile")
@click.argument("data", required=False)
@loader_options("profile")
@model_options("profile")
@click.option("--out-dir", type=click.Path(path_type=Path), default=Path("results/profile"), show_default=True,
              help="folder for the trace and the record")
@click.option("--top", type=int, default=15, show_default=True, help="rows of the top-ops table")
@click.option("--nsys", is_flag=True, help="also run under Nsight Systems (nsys) and save its report")
@OUT
def profile(data, out_dir, top, nsys, out, **kw) -> None:
    """torch.profiler (wait=1, warmup=1, active=3) around the fed loop: Chrome trace, top ops, time split."""
    from dataperf.measure import preflight
    from dataperf.results import jsonl
    from dataperf.workflows.profile import nsys_wrap, run_profile

    preflight.writable_file(out, "--out")
    preflight.writable_dir(out_dir, "--out-dir")
    data, cfg, model, seq_len = fed_config("profile", data, kw)
    with kineto_lines() as kineto:
        r = run_profile(data, cfg, make_step_options(**model, seq_len=seq_len), out_dir, top)
    if kineto:
        _render.say(f"note: {kineto[0]}")
    if nsys:
        _, r.nsys = nsys_wrap(sys.argv[1:], out_dir)
    if out:
        jsonl.append(out, r)
    render(r)


USDT = re.compile(r"^USDT:\S+ (\S+) .*\] (profiler_start|profiler_stop)$")


@contextlib.contextmanager
def kineto_lines() -> Iterator[list[str]]:
    """torch's profiler (kineto) writes `USDT:<date> <time> <pid>:<tid> <file>:<line>] profiler_start` straight
    to file descriptor 2: its stderr is held in a file while the profiler runs, then the USDT pair is put in
    words (the list yielded: one line, once the block ends) and anything else written meanwhile is written back
    to stderr as it was."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    held = tempfile.TemporaryFile()
    os.dup2(held.fileno(), 2)
    said: list[str] = []
    try:
        yield said
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        held.seek(0)
        times, other = {}, []
        for ln in held.read().decode(errors="replace").splitlines():
            m = USDT.match(ln)
            if m:
                times[m.group(2)] = m.group(1)
            else:
                other.append(ln)
        held.close()
        if other:
            sys.stderr.write("\n".join(other) + "\n")
        if times:
            said.append(f"torch's profiler traced from {times.get('profiler_start', '?')} to "
                        f"{times.get('profiler_stop', '?')} (its kineto log lines, put in words)")


def render(r: ProfileResult) -> None:
    """A profile record: the top ops, the step's time split and where the traces are (`report` shows it too)."""
    t = Table(title=f"top ops by {r.sort_by} ({r.model} on {r.device})")
    for col in ("op", "calls", "self_ms", "cpu_total_ms"):
        t.add_column(col, justify="left" if col == "op" else "right")
    for o in r.top_ops:
        t.add_row(o["name"][:70], str(o["calls"]), fmt(o["self_ms"], 3), fmt(o["cpu_total_ms"], 3))
    console = _render.console
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
