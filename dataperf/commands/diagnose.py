"""`dataperf diagnose`: where data stalls come from, and the tables of a diagnose record."""

from __future__ import annotations

import click
from rich.table import Table

from dataperf.commands import _render
from dataperf.commands._build import fed_config, make_step_options, make_trial_options
from dataperf.commands._options import OUT, loader_options, model_options, trial_options
from dataperf.results import DiagnoseResult, fmt


@click.command()
@click.argument("data", required=False)
@loader_options("diagnose")
@model_options("diagnose")
@click.option("--throttle-mib-s", type=float, default=None,
              help="simulate slow storage for the cold measurement (MiB/s per reader)")
@click.option("--page-cache-gib", type=float, default=None, help="what-if: predicted stall with this much cache")
@OUT
@trial_options
def diagnose(data, throttle_mib_s, page_cache_gib, out, **kw) -> None:
    """Where data stalls come from: prep (CPU decode) vs fetch (storage), as shares of step time."""
    from dataperf.measure import preflight
    from dataperf.results import jsonl
    from dataperf.workflows.diagnose import diagnose as run_diagnose

    preflight.writable_file(out, "--out")
    data, cfg, model, seq_len = fed_config("diagnose", data, kw)
    topts = make_trial_options(**kw)
    sopts = make_step_options(**model, seq_len=seq_len, seed=topts.seed)
    r, lim = run_diagnose(data, cfg, sopts, topts, throttle_mib_s, page_cache_gib)
    if out:
        jsonl.append(out, r)
        jsonl.append(out, lim)
    render(r)
    _render.print_limits(lim)


def render(r: DiagnoseResult) -> None:
    """A diagnose record: the three rates, the stall shares, the advice and the page-cache what-if (`report`
    shows it too)."""
    console = _render.console
    t = Table(title=f"diagnose {r.data} -> {r.model}")
    t.add_column("measurement")
    t.add_column("samples_per_s", justify="right")
    t.add_row("(1) model step, synthetic in-memory data", fmt(r.step_samples_per_s, 1))
    t.add_row("(2) loader, warm page cache", fmt(r.warm_samples_per_s, 1))
    t.add_row("(3) loader, cold cache", fmt(r.cold_samples_per_s, 1))
    console.print(t)
    fetch = "not measured (cold not verified)" if r.fetch_stall_fraction != r.fetch_stall_fraction else \
        f"{r.fetch_stall_fraction * 100:.0f}%"
    console.print(f"share of step time: compute {r.compute_fraction * 100:.0f}%, prep stall "
                  f"{r.prep_stall_fraction * 100:.0f}%, fetch stall {fetch}")
    if r.binding_limit:
        console.print(f"binding limit: {r.binding_limit} (the limits table follows)")
    console.print(r.sentence)
    for a in r.advice:
        console.print(f"  - {a}")
    w = Table(title="what-if: dataset fraction in page cache")
    w.add_column("cached_fraction", justify="right")
    w.add_column("predicted model idle", justify="right")
    for row in r.what_if:
        w.add_row(f"{row['cached_fraction'] * 100:.0f}%", f"{row['predicted_stall_fraction'] * 100:.0f}%")
    console.print(w)
    _render.print_notes(r.notes)
