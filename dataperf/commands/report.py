"""`dataperf report`: a saved results file shown again, each record by its own command's renderer, then the
verdict."""

from __future__ import annotations

from pathlib import Path

import click

from dataperf import verdict
from dataperf.commands import _answer, _plots, _render, diagnose, e2e, lengths, profile, watch
from dataperf.commands._options import EPOCH_SAMPLES, HEADROOM
from dataperf.errors import UserError
from dataperf.results import Record

# the record kinds shown one by one, each by its command's renderer (loader, step, memory, watch and limits
# records are shown together, below)
PRINTERS = {"e2e": e2e.render, "lengths": lengths.render, "profile": profile.render, "diagnose": diagnose.render}


@click.command("report")
@click.argument("results", type=click.Path(path_type=Path))
@HEADROOM
@EPOCH_SAMPLES
@click.option("--plot", type=click.Path(path_type=Path), default=None,
              help="a PNG of samples/s against workers, with the model's rate, the fed configs and the pick")
@click.option("--verbose", is_flag=True, help="every column of the loader table (MiB/s, waits, workers, per core)")
def report(results, headroom, epoch_samples, plot, verbose) -> None:
    """Tables, the rates plot and the input-bound verdict from a saved results file."""
    from dataperf.measure import preflight
    from dataperf.results import jsonl

    preflight.writable_file(plot, "--plot")
    recs = jsonl.current(jsonl.load(results))
    if not recs:
        raise UserError(f"{results} holds no records; run `dataperf sweep --out {results}` first")
    render(recs, headroom, plot, verbose, epoch_samples)


def render(recs: list[Record], headroom: float, plot: Path | None, verbose: bool = False,
           epoch_samples: int | None = None) -> None:
    """Every record of a file: provenance first, then each kind, then the answer `sweep` printed after its
    trials (_answer.print_answer: the loader table, its warnings, the step, the rates plot and the
    recommendation). A confirmation and the recommendation's own limits record are shown inside the verdict, not
    twice. The verdict is the sweep's: judged again from the same records, with the lower bound the sweep's plan
    decided read back from its decision record (verdict.saved_bound)."""
    print_env(recs)
    rec = verdict.recommend(recs, verdict.latest_step(recs), headroom, epoch_samples or verdict.saved_epoch(recs))
    verdict.saved_bound(rec, recs)
    in_verdict = {id(run) for f in rec.fed for run in f.runs}  # fed runs the verdict's fed table shows
    for r in recs:
        if r.kind in PRINTERS and r.status == "ok" and id(r) not in in_verdict:
            PRINTERS[r.kind](r)
        if r.kind == "limits" and r is not rec.limits:
            _render.print_limits(r)
    if any(r.kind == "watch" for r in recs):
        watch.render(recs)
    if any(r.kind == "ranks" for r in recs):  # sweep --ranks: its own answer, workers per rank
        _answer.print_ranks(recs)
        if not any(r.kind == "loader" for r in recs):
            return
    pictures = []
    if plot:
        png = _plots.rates(recs, rec.step, rec, plot, headroom)
        pictures.append(f"plot: {png}" if png else "no plot: no loader trial succeeded")
    _answer.print_answer(recs, rec, verbose, pictures)


def print_env(recs: list[Record]) -> None:
    """Where the results came from, once at the top; a warning when the file mixes machines or versions."""
    from dataperf.results import provenance

    console = _render.console
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
