"""`dataperf tune`: a search for the fastest (or cheapest sufficient) config, shown trial by trial."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dataperf.commands import _answer, _render
from dataperf.commands._build import make_config, make_step_options, make_trial_options, resolve_data
from dataperf.commands._options import EPOCH_SAMPLES, HEADROOM, loader_options, model_options, split, trial_options
from dataperf.data.sizes import check_image_side
from dataperf.errors import UserError
from dataperf.results import LimitsResult, fmt
from dataperf.verdict import rank_rate


@click.command()
@click.argument("data", required=False)
@click.option("--target-samples-per-s", type=float, default=None,
              help="the rate to sustain, in samples/s [none: the fastest]")
@model_options("tune")
@HEADROOM
@EPOCH_SAMPLES
@loader_options("tune")
@click.option("--min-gain", type=float, default=0.05, show_default=True,
              help="smallest gain that moves the search one more step, a fraction (0.05: 5%)")
@click.option("--max-workers", type=int, default=None, help="most worker processes the search tries [2 x cores]")
@click.option("--max-batch-size", type=int, default=256, show_default=True,
              help="largest batch size tried (with --model only under --vary-batch)")
@click.option("--vary-batch", is_flag=True, default=False,
              help="with --model, also try larger batch sizes (off: the training's --batch-size is kept)")
@click.option("--budget", "budget_text", default=None, metavar="DURATION",
              help="stop the search when 60% of this time (300, 90s, 10m) is spent and end with the best measured; "
                   "the rest goes to the pick's limits and fed check [5m with --model; none: no budget]")
@click.option("--out", type=click.Path(path_type=Path), default=Path("results/tune.jsonl"), show_default=True,
              help="append each trial's record to this .jsonl")
@trial_options
def tune(data, target_samples_per_s, headroom, epoch_samples, min_gain, max_workers, max_batch_size, vary_batch,
         budget_text, out, **kw) -> None:
    """Find the fastest config (or the cheapest that sustains a target, or the model's step rate with headroom)
    from the limits, their neighbours and a confirmation of the top two or three, without the whole grid."""
    from dataperf.measure import preflight
    from dataperf.measure.trial.plan import batch_size_cap, check_epoch
    from dataperf.workflows import budget
    from dataperf.workflows.tune import Tuner, TuneRequest

    loader, model_kw, topts = split(kw, "tune", "model")
    model = model_kw["model"]
    if loader["batch_size"] < 1:  # as bench and sweep refuse it (preflight.check_loader), before the limits probe
        raise UserError(f"--batch-size must be at least 1, got {loader['batch_size']}")
    if target_samples_per_s is not None and model is not None:
        raise UserError("give --target-samples-per-s or --model, not both (the model's target is its step rate "
                        "x --headroom)")
    if target_samples_per_s is not None and not target_samples_per_s > 0:
        raise UserError(f"--target-samples-per-s must be a positive rate, got {target_samples_per_s}")
    if max_workers is not None:
        preflight.check_workers(max_workers, "--max-workers")
    if max_batch_size < loader["batch_size"]:
        raise UserError(f"--max-batch-size {max_batch_size} is below the starting --batch-size "
                        f"{loader['batch_size']}; raise it or lower --batch-size")
    check_image_side(loader["image_size"])
    if budget_text is None and model:
        budget_text = budget.DEFAULT_MODEL_BUDGET
    budget_s = budget.parse_duration(budget_text) if budget_text not in (None, "none") else None
    preflight.writable_file(out, "--out")
    opts = make_trial_options(raw_dir=out.parent / "raw", **topts)
    if model:
        preflight.check_model(model, seq_len=loader["seq_len"] if model.startswith("gpt") else None)
    data = resolve_data(data, loader["dataset_factory"])[0]
    base = make_config(data, **loader)
    check_epoch(data, [base.batch_size], 0, opts.min_batches, opts.world_size)
    if (fits := batch_size_cap(data, opts.min_batches, opts.world_size)) is not None:
        max_batch_size = min(max_batch_size, fits)  # the search would try batches an epoch cannot fill
    sopts = make_step_options(**model_kw, batch_size=loader["batch_size"], seq_len=loader["seq_len"],
                              image_size=loader["image_size"]) if model else None
    _render.print_data([data], base.decode)
    req = TuneRequest(data, base, opts, target_samples_per_s, sopts, headroom, min_gain, max_workers, max_batch_size,
                      out=out, vary_batch=vary_batch, budget_s=budget_s, epoch_samples=epoch_samples)
    outcome = Tuner(req, on_trial=print_trial, on_prediction=print_prediction, bar=_render.progress_bar).run()
    render(outcome)
    if outcome.pick is None:  # nothing ran: never "done" (0), nor a target missed by a config that runs (1)
        failed = next((s.result.error for s in outcome.steps if s.result.status != "ok"), None)
        raise UserError(f"tune found no config that runs ({outcome.stop_reason.split(';')[0]})"
                        + (f"; the first failed: {failed}" if failed else ""))
    if not outcome.met and outcome.target_samples_per_s is not None:
        sys.exit(1)


def print_trial(step) -> None:
    """One line per trial as the search runs: its phase, config, rate and why it was tried."""
    r = step.result
    rate = fmt(rank_rate(r)) if r.status == "ok" else "failed"
    _render.say(f"[{step.phase:>10}] {r.loader_config.short():<48} {rate:>10} samples/s  ({step.why})",
                markup=False)


def print_prediction(p, probe: LimitsResult) -> None:
    """What tune measured before its first trial, and the config it predicts from that."""
    _render.print_limits(probe)
    _render.say(f"prediction: {p.why}")


def render(outcome) -> None:
    """Where the search stopped, its confirmations and pick, how good its predictions were, and the answer (the
    decision lines sweep and report end with: _answer.print_decision)."""
    console = _render.console
    _render.say(f"stopped: {outcome.stop_reason} after {len(outcome.steps)} trials")
    if outcome.cut:
        _render.say(f"  budget: {outcome.cut}")
    if outcome.pick is None:
        return
    for short, rates in outcome.confirmed.items():
        console.print(f"confirmation: {short}: {', '.join(fmt(x) for x in rates)} samples/s")
    tgt = f" (target {fmt(outcome.target_samples_per_s)})" if outcome.target_samples_per_s else ""
    _render.say(f"search pick: {outcome.pick.loader_config.short()} at {fmt(outcome.pick_samples_per_s)} samples/s "
                f"a training epoch{tgt}")
    for p in outcome.predictions:
        if p.get("measured") and p.get("predicted") == p.get("predicted"):
            as_ = f" {p['measured_as']}" if p.get("measured_as") else ""
            _render.say(f"prediction: {fmt(p['predicted'])} samples/s, measured {fmt(p['measured'])}{as_} "
                        f"({(p['predicted'] / p['measured'] - 1) * 100:+.0f}%)")
    for line in outcome.recommendation.findings if outcome.recommendation is not None else []:
        _render.say(line)  # what the trials cannot show by themselves: other load, a costly epoch start
    _answer.print_decision(outcome.recommendation, outcome.limits, outcome.pick_config or outcome.pick.loader_config)
