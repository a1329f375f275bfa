"""`dataperf step`: a real train step on synthetic in-memory data, and the table of a step record."""

from __future__ import annotations

import click

from dataperf.commands import _render
from dataperf.commands._build import make_step_options
from dataperf.commands._options import OUT, model_options
from dataperf.data.sizes import check_image_side
from dataperf.results import StepResult, fmt


@click.command()
@model_options("step")
@click.option("--repeats", type=int, default=5, show_default=True, help="timed repeats of --steps steps")
@click.option("--steps", type=int, default=10, show_default=True, help="timed steps per repeat")
@click.option("--warmup", type=int, default=3, show_default=True, help="steps before the repeats, not timed")
@OUT
def step(batch_size, image_size, seq_len, repeats, steps, warmup, out, **model) -> None:
    """Median ms/step, samples/s and peak memory of a real train step on synthetic in-memory data."""
    from dataperf.measure import preflight
    from dataperf.measure.step import measure_step
    from dataperf.results import jsonl

    preflight.writable_file(out, "--out")
    check_image_side(image_size)
    preflight.check_model(model["model"], input_kind=model["input_kind"],
                          seq_len=seq_len if model["input_kind"] != "image" else None)
    r = measure_step(make_step_options(**model, batch_size=batch_size, seq_len=seq_len, image_size=image_size,
                                       repeats=repeats, steps=steps, warmup=warmup,
                                       results_dir=out.parent if out else None))
    if out:
        jsonl.append(out, r)
    render(r)


def render(r: StepResult) -> None:
    """A step record's figures (`report` shows them too)."""
    shape = f"{r.batch_size} x {r.seq_len} tokens" if r.seq_len else f"{r.batch_size} x {r.image_size}px" \
        if r.image_size else f"{r.batch_size} x {'x'.join(map(str, r.image_shape or []))} {r.image_dtype}"
    rows = [("batch", shape),
            ("step_ms mean (every timed step)", fmt(r.step_ms_mean, 2)),
            ("step_ms of the repeats: median \\[min-max]",
             f"{r.step_ms_median:.2f} \\[{r.step_ms_min:.2f}-{r.step_ms_max:.2f}]"),
            ("samples_per_s (batch / mean step)", fmt(r.samples_per_s, 1))]
    if r.tokens_per_s:
        rows.append(("tokens_per_s", fmt(r.tokens_per_s)))
    rows.append(("cpu_cores_busy (training process)", fmt(r.cpu_cores_busy_median, 2)))
    rows.append(("peak_mem_mib", fmt(r.peak_mem_mib, 1)))
    if r.cuda_max_allocated_mib is not None:
        rows.append(("cuda_max_allocated_mib", fmt(r.cuda_max_allocated_mib, 1)))
        rows.append(("nvml_peak_used_mib", fmt(r.nvml_peak_used_mib, 1)))
    rows.append(("peak_rss_mib", fmt(r.peak_rss_mib, 1)))
    _render.console.print(_render.figure_table(f"step {r.model} on {r.device} ({r.params_m:.1f}M params, "
                                               f"{r.optimizer})", rows))
    _render.print_notes(r.notes)
