"""`dataperf e2e`: the loader feeding the real step, and the table of an e2e record."""

from __future__ import annotations

from pathlib import Path

import click

from dataperf import verdict
from dataperf.commands import _render
from dataperf.commands._build import fed_config, make_step_options
from dataperf.commands._options import OUT, loader_options, model_options
from dataperf.errors import UserError
from dataperf.results import E2EResult, fmt


@click.command()
@click.argument("data", required=False)
@loader_options("e2e")
@model_options("e2e")
@click.option("--steps", type=int, default=20, show_default=True, help="fed steps per repeat")
@click.option("--repeats", type=int, default=5, show_default=True, help="timed repeats of --steps fed steps")
@click.option("--warmup", type=int, default=3, show_default=True, help="fed steps before the repeats, not timed")
@click.option("--no-predict", is_flag=True, help="skip the separate loader and step measurements")
@click.option("--sync-each-step", is_flag=True,
              help="CUDA: synchronize after every step, so host wait equals GPU idle (slower; default: events)")
@click.option("--nan-guard", "nan_guard_dir", type=click.Path(path_type=Path), default=None,
              help="check every step for NaN/inf; checkpoint into this folder and stop on the first")
@OUT
def e2e(data, nan_guard_dir, out, **kw) -> None:
    """The loader feeding the real step: data-wait vs compute per step, and the data-stall fraction."""
    from dataperf.measure import preflight
    from dataperf.measure.guards import NonFiniteError
    from dataperf.results import jsonl
    from dataperf.workflows.e2e import FedPlan, run_fed

    preflight.writable_file(out, "--out")
    preflight.writable_dir(nan_guard_dir, "--nan-guard")
    data, cfg, model, seq_len = fed_config("e2e", data, kw)  # kw keeps e2e's own options
    plan = FedPlan(kw["steps"], kw["repeats"], kw["warmup"], predict=not kw["no_predict"],
                   sync_each_step=kw["sync_each_step"])
    sopts = make_step_options(**model, seq_len=seq_len, results_dir=out.parent if out else None,
                              nan_guard_dir=nan_guard_dir)
    try:
        r = run_fed(data, cfg, sopts, plan)
    except NonFiniteError as e:
        raise UserError(str(e)) from None
    if out:
        jsonl.append(out, r)
    render(r)


def render(r: E2EResult) -> None:
    """An e2e record's figures and whether the device waited on data (`report` shows them too)."""
    rows = [("step_ms median (wall, fed)", fmt(r.step_ms_median, 2)),
            ("data_wait_ms median / p99", f"{fmt(r.data_wait_ms_median, 2)} / {fmt(r.data_wait_ms_p99, 2)}"),
            ("epoch restarts while measured", str(r.epoch_restarts)),
            ("h2d_ms median", fmt(r.h2d_ms_median, 3)),
            ("compute_ms median", fmt(r.compute_ms_median, 2)),
            ("step host ms median (in the step call)", fmt(r.step_host_ms_median, 2)),
            ("samples_per_s", fmt(r.samples_per_s, 1)),
            ("host_wait_fraction", f"{r.host_wait_fraction * 100:.1f}%")]
    if r.gpu_idle_fraction is not None:
        rows.append(("gpu_idle_fraction", f"{r.gpu_idle_fraction * 100:.1f}%"))
    rows.append(("data_stall_fraction (device idle)", f"{r.data_stall_fraction * 100:.1f}%"))
    steady = r.steady_stall_fraction == r.steady_stall_fraction
    if steady:
        rows += [("samples_per_s mid-epoch", fmt(r.steady_samples_per_s, 1)),
                 ("data_stall_fraction mid-epoch", f"{r.steady_stall_fraction * 100:.1f}%"),
                 (f"epoch start s ({r.epoch_starts_timed} timed)",
                  fmt(r.epoch_start_s, 2) if r.epoch_starts_timed else "-")]
    if r.predicted_stall_fraction is not None:
        rows += [("loader_samples_per_s (alone, steady)", fmt(r.loader_samples_per_s, 1)),
                 ("loader repeat samples/s (alone, start-up incl.)", fmt(r.loader_repeat_samples_per_s, 1)),
                 ("loader rate with this run's epoch restarts", fmt(r.predicted_loader_samples_per_s, 1)),
                 ("step_samples_per_s (alone)", fmt(r.step_samples_per_s, 1)),
                 ("predicted_stall_fraction", f"{r.predicted_stall_fraction * 100:.1f}%")]
    _render.console.print(_render.figure_table(f"end to end: {r.loader_config.short()} -> {r.model} on {r.device}",
                                               rows))
    # input-bound is the wait mid-epoch (docs/measurement/verdict.md); a record from before it: the whole run's
    stall = r.steady_stall_fraction if steady else r.data_stall_fraction
    verdict_ = "input-bound" if stall > verdict.FED_STALL else "not input-bound"
    where = (f"mid-epoch; {r.data_stall_fraction * 100:.1f}% over the whole run, epoch starts included"
             if steady else "over the whole run")
    _render.say(f"{verdict_}: the model's device sat idle waiting for data {stall * 100:.1f}% of the time {where} "
                f"({r.stall_basis})")
    line = _render.stage_line(r)
    if line:
        _render.say(line)
    _render.print_notes(r.notes)
