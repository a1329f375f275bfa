"""`dataperf lengths`: per-batch token lengths and the OOM risk they carry, and the tables of a lengths record."""

from __future__ import annotations

from pathlib import Path

import click

from dataperf.commands import _render
from dataperf.results import LengthsResult, fmt


@click.command()
@click.argument("data")
@click.option("--batch-size", type=int, default=32, show_default=True,
              help="samples a batch (a batch pads to its longest)")
@click.option("--seq-len", type=int, default=None,
              help="window length of a flat token stream (.bin, 1-d .npy), as bench cuts it [512]")
@click.option("--cap", type=int, default=None, help="truncate sequences to this many tokens; shows the effect")
@click.option("--model", default=None, help="also measure step peak memory at the p99 batch length (and capped)")
@click.option("--device", default="cpu", show_default=True, help="where --model's step runs: cpu | cuda | cuda:N")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="append the record to this .jsonl")
def lengths(data, batch_size, seq_len, cap, model, device, out) -> None:
    """Per-batch token-length histogram and p99 (OOM risk from length variance), and what --cap changes."""
    from dataperf.data import resolve
    from dataperf.measure import preflight
    from dataperf.measure.step import StepOptions
    from dataperf.results import jsonl
    from dataperf.workflows.lengths import analyse, measure_cap_memory

    preflight.writable_file(out, "--out")
    if model:
        preflight.check_model(model, "tokens", "tokens")
    d = resolve(data)
    _render.print_data([d], True)
    r = analyse(d, batch_size, cap, seq_len)
    if model:
        measure_cap_memory(r, StepOptions(model=model, device=device, steps=2, warmup=1))
    if out:
        jsonl.append(out, r)
    render(r)


def render(r: LengthsResult) -> None:
    """The two length histograms, the figures with and without --cap, and the OOM risk (`report` shows them
    too)."""
    from dataperf.data.make.inspect import length_histogram

    _render.print_histogram("sample length (tokens)", length_histogram(r.sample_lengths))
    _render.print_histogram(f"per-batch padded length (tokens, batch {r.batch_size})",
                            length_histogram(r.batch_max_tokens))
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
        rows.append(("step peak_mem_mib at p99 batch length", fmt(r.step_peak_mem_mib_uncapped, 1)))
    if r.step_peak_mem_mib_capped is not None:
        rows.append(("step peak_mem_mib capped", fmt(r.step_peak_mem_mib_capped, 1)))
    _render.console.print(_render.figure_table(f"token lengths {r.data}", rows))
    ratio = r.batch_max_tokens_p99 / r.batch_max_tokens_p50 if r.batch_max_tokens_p50 else 1
    if ratio > 2:
        _render.console.print(f"OOM risk: the p99 batch is {ratio:.1f}x longer than the median batch; size memory "
                              f"for {r.batch_max_tokens_max} tokens per row, or --cap / bucket by length")
