"""`dataperf profile`: torch.profiler around the fed loop, and the tables of a profile record."""

from __future__ import annotations

import sys
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
    r = run_profile(data, cfg, make_step_options(**model, seq_len=seq_len), out_dir, top)
    if nsys:
        _, r.nsys = nsys_wrap(sys.argv[1:], out_dir)
    if out:
        jsonl.append(out, r)
    render(r)


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
