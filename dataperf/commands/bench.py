"""`dataperf bench`: one loader configuration timed, and a loader trial shown in full."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from dataperf.commands import _plots, _render
from dataperf.commands._build import default_decode, make_config, make_trial_options, resolve_data
from dataperf.commands._options import OUT, loader_options, split, trial_options
from dataperf.errors import UserError
from dataperf.results import LoaderResult, fmt
from dataperf.verdict import rank_rate
from dataperf.verdict.ray import cross_check


@click.command()
@click.argument("data", required=False)
@loader_options("bench")
@OUT
@trial_options
@click.option("--verbose", is_flag=True, help="also say which collectors could not run here, and why")
@click.option("--plot", type=click.Path(path_type=Path), default=None,
              help="a PNG of where a sample's time goes (the stage waterfall)")
def bench(data, out, verbose, plot, **kw) -> None:
    """Time one DataLoader configuration: samples/s, MiB/s, time to first batch, batch-wait p50/p99."""
    from dataperf.measure import preflight
    from dataperf.measure.trial import run_trial
    from dataperf.measure.trial.plan import check_epoch
    from dataperf.results import jsonl

    loader, topts = split(kw, "bench")
    preflight.writable_file(out, "--out")
    preflight.writable_file(plot, "--plot")
    data = resolve_data(data, loader["dataset_factory"])[0]
    if loader["decode"] is None:
        loader["decode"] = default_decode([data])
    cfg = make_config(data, **loader)
    opts = make_trial_options(raw_dir=out.parent / "raw" if out else None, **topts)
    preflight.check_loader(data, cfg)
    check_epoch(data, [cfg.batch_size], cfg.num_workers, opts.min_batches, opts.world_size)
    _render.print_data([data], cfg.decode)  # before measuring: a trial that fails is read against it
    with jsonl.exclusive(out) if out else contextlib.nullcontext():
        r = run_trial(data, cfg, opts)
        if out:
            jsonl.append(out, r)
    if r.status != "ok":
        raise UserError(f"{cfg.short()} failed: {r.error}")
    render(r, verbose)
    if plot:
        png = _plots.waterfall(r, plot)
        _render.console.print(f"stage waterfall: {png}" if png else f"no stage waterfall: {cfg.backend} keeps no "
                              "stage books")


def render(r: LoaderResult, verbose: bool = False) -> None:
    """One trial in full: figures, collectors, notes."""
    console = _render.console
    if r.status == "ok":
        console.print(_render.trial_table(r, f"bench {r.data}"))
        console.print(f"repeats: {r.repeats} x {r.batches_per_repeat} batches; steady samples/s per repeat "
                      f"{[round(x) for x in r.samples_per_s_repeats]}; repeat (start-up included) "
                      f"{[round(x) for x in r.repeat_samples_per_s_repeats]}; start-up {fmt(r.startup_s_median, 3)} s"
                      + (f"; epoch tail {fmt(r.tail_s, 2)} s" if r.tail_s else ""))
        _render.say(f"training rate: {fmt(rank_rate(r))} samples/s ({r.training_basis or 'the steady rate'})")
        line = _render.stage_line(r)
        if line:
            _render.say(line)
        for line in cross_check((r.backend or {}), r.stage_ms_per_sample):  # ray: its own books beside ours
            _render.say(line)
        console.print(f"harness overhead (no-op DataLoader, same workers, collectors on): "
                      f"{fmt(r.harness_overhead_ms_per_batch, 3)} ms/batch = {fmt(r.harness_overhead_pct, 1)}% "
                      "of this trial's batch time")
        print_footprint(r)
        _render.print_collectors(r.collectors, verbose)
    else:
        _render.print_failures([r])
    _render.print_notes(r.notes)


def print_footprint(r: LoaderResult) -> None:
    """Cost of the trial: cores busy and PSS of the process tree, and a converted store's one-off cost."""
    b = getattr(r, "backend", None) or {}
    if getattr(r, "cpu_cores_busy_median", None) == getattr(r, "cpu_cores_busy_median", 0.0):  # not NaN
        _render.console.print(f"footprint: {fmt(r.cpu_cores_busy_median, 2)} cores busy "
                              f"({fmt(r.samples_per_s_per_core)} samples/s per core); PSS peak "
                              f"{fmt(r.pss_mib_peak)} MiB, main process + workers "
                              f"({fmt(r.samples_per_s_per_gib_pss)} samples/s per GiB); workers' PSS growth in a "
                              f"repeat {fmt(r.worker_pss_growth_pct, 1)}%, private memory "
                              f"{fmt(r.worker_private_growth_mib, 1)} MiB; copied from the parent since their first "
                              f"batch {fmt(r.worker_copied_mib, 1)} MiB over {fmt(r.worker_copied_samples)} samples "
                              f"(an epoch: {fmt(r.worker_copied_mib_epoch, 1)} MiB; copy-on-read)")
    if "conversion_s" in b:
        _render.console.print(f"store: {b['store']} ({fmt(b['store_mib'], 1)} MiB, converted in "
                              f"{fmt(b['conversion_s'], 2)} s{', reused' if b.get('store_reused') else ''})")
