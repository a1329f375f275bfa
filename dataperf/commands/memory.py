"""`dataperf memory`: GPU memory per optimizer, and the table of memory records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table

from dataperf.commands import _render
from dataperf.commands._options import OPTIMIZERS, str_list
from dataperf.errors import UserError
from dataperf.results import MemoryResult, fmt


@click.command()
@click.option("--model", default="gpt-1.3b", show_default=True, help="a built-in name or MODULE:FACTORY")
@click.option("--optimizers", callback=str_list, default="adamw,adam8bit,zero2-offload,zero3-offload",
              show_default=True, help=f"comma list of {', '.join(OPTIMIZERS)}")
@click.option("--batch-size", type=int, default=8, show_default=True, help="samples a batch")
@click.option("--seq-len", type=int, default=1024, show_default=True, help="tokens a sequence")
@click.option("--device", default="cuda", show_default=True, help="cuda | cuda:N")
@click.option("--amp", type=click.Choice(["bf16", "none"]), default="bf16", show_default=True,
              help="bf16: autocast for torch optimizers, DeepSpeed's bf16 (fp32 master state) for ZeRO")
@click.option("--repeats", type=int, default=3, show_default=True, help="timed repeats of --steps steps")
@click.option("--steps", type=int, default=5, show_default=True, help="steps a repeat")
@click.option("--warmup", type=int, default=2, show_default=True, help="steps before the repeats, not timed")
@click.option("--max-batch", is_flag=True, help="also find each optimizer's largest batch (doubling, bisection)")
@click.option("--max-batch-limit", type=int, default=1024, show_default=True,
              help="largest batch size the search for the largest that fits tries")
@click.option("--tolerance", type=float, default=10.0, show_default=True,
              help="stop bisecting when the gap is within this % of the fitting batch")
@click.option("--out", type=click.Path(path_type=Path), default=Path("results/memory.jsonl"), show_default=True,
              help="append the records to this .jsonl")
def memory(optimizers, out, **kw) -> None:
    """GPU memory, step time and % saved against AdamW for each optimizer at one batch size, one process each."""
    from dataperf.results import jsonl
    from dataperf.workflows.memory import measure_memory

    bad = [o for o in optimizers if o not in OPTIMIZERS]
    if bad:
        raise UserError(f"unknown optimizer {bad[0]!r} in --optimizers; choose from {', '.join(OPTIMIZERS)}")
    if not kw["device"].startswith("cuda"):
        raise UserError(f"memory compares GPU memory: --device {kw['device']} has none; use --device cuda")
    import torch

    if not torch.cuda.is_available():  # one error: line before any trial starts
        raise UserError("memory compares GPU memory, and torch sees no CUDA device here; run it on a GPU machine")
    rows = measure_memory(_step_base(kw, out), optimizers, max_batch=kw["max_batch"],
                          max_batch_limit=kw["max_batch_limit"], tolerance_pct=kw["tolerance"],
                          on_result=lambda r: jsonl.append(out, r))
    render(rows)
    _render.console.print(f"results: {out}")


def _step_base(kw: dict[str, Any], out: Path) -> dict[str, Any]:
    """What every optimizer's step process is given (workflows.memory), from the command's options."""
    return {"model": kw["model"], "batch_size": kw["batch_size"], "seq_len": kw["seq_len"], "device": kw["device"],
            "amp": None if kw["amp"] == "none" else kw["amp"], "repeats": kw["repeats"], "steps": kw["steps"],
            "warmup": kw["warmup"], "results_dir": str(out.parent)}


def render(rows: list[MemoryResult]) -> None:
    """The memory table: one row per optimizer at one batch size, reduction against AdamW (`report` shows it
    too)."""
    console = _render.console
    first = rows[0]
    t = Table(title=f"GPU memory {first.model} batch {first.batch_size} seq {first.seq_len} amp {first.amp}")
    cols = ("optimizer", "max_allocated_mib", "nvml_peak_used_mib", "step_ms", "samples_per_s",
            "reduction_vs_adamw", "max_batch")
    for col in cols:
        t.add_column(col, justify="left" if col == "optimizer" else "right")
    for r in rows:
        red = "-" if r.reduction_vs_adamw_pct is None else f"{r.reduction_vs_adamw_pct:+.1f}%"
        if r.status != "ok":
            t.add_row(r.optimizer, "failed", "", "", "", "", fmt(r.max_batch) if r.max_batch is not None else "-")
            continue
        t.add_row(r.optimizer, fmt(r.cuda_max_allocated_mib), fmt(r.nvml_peak_used_mib), fmt(r.step_ms_median, 1),
                  fmt(r.samples_per_s, 1), red, fmt(r.max_batch) if r.max_batch is not None else "-")
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
