"""`dataperf sweep`: a grid over loader settings, then its table, rates plot, recommendation and how long it took."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from dataperf.commands import _plots, _render
from dataperf.commands._build import default_decode, make_grid, make_step_options, make_trial_options, resolve_data
from dataperf.commands._options import EPOCH_SAMPLES, HEADROOM, loader_options, model_options, split, trial_options
from dataperf.errors import UserError
from dataperf.results import jsonl
from dataperf.workflows import clock


@click.command()
@click.argument("data", nargs=-1, required=False)
@click.option("--config", "config_file", type=click.Path(path_type=Path), default=None,
              help="TOML/YAML file of sweep axes (overrides the axis options)")
@loader_options("sweep")
@click.option("--out", type=click.Path(path_type=Path), default=Path("results/sweep.jsonl"), show_default=True,
              help="append each trial's record to this .jsonl (read back by --resume and report)")
@click.option("--resume", is_flag=True, help="skip trials already recorded as ok in --out")
@click.option("--overwrite", is_flag=True, help="discard --out's old results")
@click.option("--verbose", is_flag=True, help="every column of the loader table (MiB/s, waits, workers, per core)")
@click.option("--plot", type=click.Path(path_type=Path), default=None,
              help="a PNG of samples/s against workers, with the model's rate, the fed configs and the pick "
                   "[next to --out]")
@model_options("sweep")
@click.option("--model-batch-size", type=int, default=None, help="step batch size [first --batch-size]")
@HEADROOM
@EPOCH_SAMPLES
@click.option("--confirm", "confirm_k", type=int, default=None, metavar="K",
              help="with --model: feed the model from K configs (the cheapest predicted to feed it, then the "
                   "fastest predicted) and, on CUDA, the first pinned, 2 interleaved rounds each, and pick by the "
                   "fed rate [2 with --model; 0: off]")
@click.option("--confirm-steps", type=int, default=20, show_default=True, help="fed steps per repeat of --confirm")
@click.option("--nproc", type=int, default=None,
              help="run the sweep on N processes through torchrun: N ranks reading as one loader measurement")
@click.option("--ranks", type=int, default=None, metavar="G",
              help="G data-parallel ranks on this host (torchrun), each with its own DataLoader and split, each fed "
                   "by a consumer at the model's step rate (--step-rate, or --model's step measured once): the "
                   "answer is the workers per rank, beside the 2-4 per GPU rule and tf.data's cores / G")
@click.option("--step-rate", type=click.FloatRange(min=0, min_open=True), default=None, metavar="N",
              help="with --ranks: the samples/s one rank's model takes (each rank's consumer is paced at it) "
                   "instead of measuring --model's step")
@click.option("--budget", "budget_text", default=None, metavar="DURATION",
              help="fit the sweep into this time (300, 90s, 10m, 1h): fewer repeats first (not below 3), then "
                   "shorter ones, then fewer trials (worker counts last), then fewer --confirm runs, each cut said, "
                   "and time left at the end runs what was cut; with --model the step is measured first and the "
                   "grid gets what the step, the limits and --confirm leave [5m with --model; none: no budget]")
@trial_options
def sweep(data, verbose, plot, **kw) -> None:
    """Grid over loader settings; a table fastest first, a rates plot, a recommendation (and a verdict)."""
    from dataperf.measure import distributed
    from dataperf.measure.trial.plan import check_epoch
    from dataperf.workflows import sweep as sw

    if kw["ranks"] is not None or kw["step_rate"] is not None:
        ranks_sweep(data, kw)
        return
    kw.pop("ranks"), kw.pop("step_rate")
    request, nproc = _request(data, plot, kw)
    out = request.out
    if nproc is not None:
        sw.check_ranks(request.datas, nproc)
        with jsonl.exclusive(out):  # a locked or occupied --out is refused here, before any rank starts
            sw.prepare_out(out, request.resume, request.overwrite)
    grid, opts = request.grid, request.opts
    for d in request.datas:  # a batch size too big for the data fails every trial: refused before measuring
        check_epoch(d, grid.batch_size, min(grid.num_workers), opts.min_batches, nproc or opts.world_size)
    if nproc is not None:
        sys.exit(distributed.launch_self(nproc, sys.argv[1:], lambda: interrupted(len(sw.finished_ids(out)), out),
                                         env={clock.BUDGET_START_ENV: repr(request.started)}))
    plan = sw.plan(request)
    ctx = distributed.init_from_env()
    if ctx.rank == 0:
        print_plan(plan.estimate)
        _render.print_data(request.datas, any(request.grid.decode))
    with _render.progress_bar(f"sweep ({len(plan.trials)} trials)", len(plan.trials), enabled=ctx.rank == 0,
                              eta=True) as advance:
        outcome = sw.run(plan, ctx=ctx, on_result=lambda r: advance(1), bar=_render.progress_bar)
    if outcome.interrupted:
        if ctx.rank == 0:
            interrupted(outcome.kept, out)
        sys.exit(130)
    if ctx.rank != 0:
        return
    render(plan.estimate, outcome, out, plot or out.with_suffix(".png"), request.headroom, verbose)
    if outcome.all_failed:
        raise UserError(f"every trial failed ({len(outcome.results)}); the first: {outcome.results[0].error}")


def _request(data: tuple[str, ...], plot: Path | None, kw: dict[str, Any]):
    """The sweep's options parsed and checked into a SweepRequest (and --nproc): the budget counts from the
    process's start (cli.main), or under --nproc from the launching command (one host: one monotonic clock)."""
    from dataperf.measure import preflight
    from dataperf.workflows import budget
    from dataperf.workflows import sweep as sw

    started = clock.started()
    own = {k: kw.pop(k) for k in OWN}
    loader, step_kw, topts = split(kw, "sweep", "model")
    model, out = step_kw["model"], own["out"]
    budget_text = own["budget_text"]
    if budget_text is None and model:
        budget_text = budget.DEFAULT_MODEL_BUDGET
    budget_s = budget.parse_duration(budget_text) if budget_text not in (None, "none") else None
    preflight.writable_file(out, "--out")
    preflight.writable_file(plot, "--plot")
    confirm = _confirm_options(own["confirm_k"], own["confirm_steps"], model)
    datas = resolve_data(sw.unique_datasets(data), loader["dataset_factory"])
    if loader["decode"] is None:
        loader["decode"] = default_decode(datas, model)  # a model eats decoded samples: its verdict needs them
    grid = make_grid(datas, **loader)
    if own["config_file"]:
        grid, file_opts = sw.load_grid_file(own["config_file"])
        topts.update(file_opts)
    opts = make_trial_options(raw_dir=out.parent / "raw", **topts)  # checks the values before any rank starts
    sopts = None
    if model:
        sopts = make_step_options(**step_kw, batch_size=own["model_batch_size"] or loader["batch_size"][0],
                                  seq_len=loader["seq_len"], image_size=loader["image_size"])
    request = sw.SweepRequest(datas, grid, opts, out, step=sopts, headroom=own["headroom"], confirm=confirm,
                              ladder=loader["num_workers"] is None and not own["config_file"], resume=own["resume"],
                              overwrite=own["overwrite"], budget_s=budget_s, started=started,
                              epoch_samples=own["epoch_samples"])
    return request, own["nproc"]


OWN = ("config_file", "out", "resume", "overwrite", "model_batch_size", "headroom", "epoch_samples", "confirm_k",
       "confirm_steps", "nproc", "budget_text")  # sweep's own options, beside the shared loader, model, trial ones


def ranks_sweep(data: tuple[str, ...], kw: dict[str, Any]) -> None:
    """`sweep --ranks G`: checked here (bad input refused before any rank starts), then re-run under torchrun on
    G ranks (measure.distributed.launch_self, as --nproc); each rank runs workflows.sweep.ranks, and rank 0
    prints the answer (_answer.print_ranks)."""
    import os

    from dataperf import verdict
    from dataperf.commands import _answer
    from dataperf.measure import distributed, preflight
    from dataperf.measure.trial import cores
    from dataperf.workflows import sweep as sw
    from dataperf.workflows.sweep import ranks as rk

    own = {k: kw.pop(k) for k in (*OWN, "ranks", "step_rate")}
    G, rate = own["ranks"], own["step_rate"]
    if G is None:
        raise UserError("--step-rate paces the consumers of --ranks: give --ranks G too (e.g. --ranks 8)")
    for flag, given in (("--nproc", own["nproc"]), ("--resume", own["resume"]), ("--config", own["config_file"]),
                        ("--confirm", own["confirm_k"]), ("--budget", own["budget_text"])):
        if given:
            raise UserError(f"--ranks answers workers per rank on its own ladder; drop {flag}")
    loader, step_kw, topts = split(kw, "sweep", "model")
    model = step_kw["model"]
    if (rate is None) == (model is None):
        raise UserError("--ranks feeds each rank at the model's step rate: give --step-rate N (samples/s a rank) or "
                        "--model (its step measured once here), one of the two")
    out = own["out"]
    preflight.writable_file(out, "--out")
    datas = resolve_data(sw.unique_datasets(data), loader["dataset_factory"])
    if len(datas) != 1:
        raise UserError(f"--ranks reads one dataset, got {len(datas)}")
    if loader["decode"] is None:
        loader["decode"] = True  # the consumers stand for a model, which eats decoded samples
    src = click.get_current_context().get_parameter_source
    for knob in verdict.ranks.KNOBS:  # a knob not given takes its first value: the sweep's own axis would vary it
        if src(knob) == click.core.ParameterSource.DEFAULT and isinstance(loader.get(knob), list):
            loader[knob] = loader[knob][:1]
    grid = make_grid(datas, **loader)
    configs = [c for c in grid.configs(datas[0].format) if c.num_workers > 0]
    if not configs:
        raise UserError("--ranks measures workers per rank from 1 up; give --num-workers counts of 1 or more")
    cfg, variants = configs[0], rk.variants_of(configs)
    opts = make_trial_options(raw_dir=out.parent / "raw", **topts)
    sopts = None
    if model:
        sopts = make_step_options(**step_kw, batch_size=own["model_batch_size"] or cfg.batch_size,
                                  seq_len=loader["seq_len"], image_size=loader["image_size"])
    workers = loader["num_workers"]
    if workers is not None and min(workers) < 1:
        raise UserError(f"--ranks measures workers per rank from 1 up; --num-workers {min(workers)} reads in each "
                        "rank's own process, serial with its step: give counts of 1 or more")
    rk.check(datas[0], cfg.batch_size, G, cores())
    req = rk.RanksRequest(datas[0], cfg, G, out, opts, step_rate=rate, step=sopts, workers=workers,
                          variants=variants, overwrite=own["overwrite"])
    world = int(os.environ.get("WORLD_SIZE", "0"))
    if not world:
        with jsonl.exclusive(out):  # a locked or occupied --out is refused here, before any rank starts
            sw.prepare_out(out, False, own["overwrite"])
        sys.exit(distributed.launch_self(G, sys.argv[1:]))
    if world != G:
        raise UserError(f"--ranks {G} under a torchrun of {world} processes: give --nproc_per_node {G}")
    ctx = distributed.init_from_env()
    outcome = rk.run(req, ctx, on_result=ranks_progress if ctx.rank == 0 else None)
    if ctx.rank != 0:
        return
    _answer.print_ranks(outcome.records)
    _render.console.print(f"results: {out}")


def ranks_progress(r) -> None:
    """One line as each config of --ranks finishes (rank 0), with its prefetch, pin and persistence: the ladder's
    counts and the other settings tried at its pick read apart."""
    from dataperf.commands._answer import knob_words

    what = f"{r.fed_samples_per_s_slowest:,.0f} samples/s a rank (the slowest)" if r.status == "ok" else \
        f"failed: {r.error}"
    _render.say(f"ranks: {r.config.get('num_workers')} workers a rank ({knob_words(r)}): {what}", markup=False)


def _confirm_options(k: int | None, steps: int, model: str | None):
    """--confirm K (2 with --model, else off) and --confirm-steps, checked."""
    from dataperf.workflows.sweep import ConfirmOptions

    if k and not model:
        raise UserError(f"--confirm {k} feeds a model: give --model too (e.g. --model cnn-small)")
    k = (2 if model else 0) if k is None else k
    if k < 0 or steps < 1:
        raise UserError(f"--confirm takes a count of configs (0: off) and --confirm-steps a positive count, got "
                        f"{k} and {steps}")
    return ConfirmOptions(k, steps=steps) if k else None


def interrupted(kept: int, out: Path) -> None:
    """The one line a Ctrl-C'd sweep ends with, in one process or under --nproc."""
    click.echo(f"interrupted: {kept} finished trials are kept in {out}; run the same command with --resume to skip "
               "them", err=True)


def print_plan(plan) -> None:
    """Before a sweep starts: how long it should take (budget.Plan), and what --budget cut to fit."""
    _render.console.print(plan.describe())
    for cut in plan.dropped:
        _render.console.print(f"  budget: {cut}")


def render(plan, outcome, out: Path, plot: Path, headroom: float, verbose: bool = False) -> None:
    """After the grid: the answer `report` prints from the same records (_answer.print_answer: the trials fastest
    first, what the verdict cannot see, the step, the rates plot and the stage waterfall, the recommendation),
    then the time taken and where the records are."""
    from dataperf.commands import _answer

    recs, rec = outcome.records, outcome.recommendation
    pictures = []
    png = _plots.rates(recs, rec.step, rec, plot, headroom)
    if png:
        pictures.append(f"plot: {png} (samples/s against workers, the model's rate, the fed configs, the pick)")
    chosen = rec.pick or rec.best
    stages_png = _plots.waterfall(chosen, plot.with_name(plot.stem + "-stages.png")) if chosen and plot else None
    if stages_png:
        pictures.append(f"stage waterfall of {'the pick' if rec.pick else 'the fastest'}: {stages_png}")
    _answer.print_answer(recs, rec, verbose, pictures)
    print_duration(plan, outcome)
    _render.console.print(f"results: {out} ({len(outcome.results)} new trials)")


def print_duration(plan, outcome) -> None:
    """After a sweep: how long it took against the plan, the trials --budget left no time for, and the fed runs
    of --confirm it cut."""
    from dataperf.workflows.budget import minutes

    line = f"took {minutes(outcome.wall_s)} (planned {minutes(plan.expected_s)})"
    if outcome.added:
        line += f"; {outcome.added} of the {len(plan.spare)} trials the budget cut were run after all (time was left)"
    if outcome.extended:
        line += (f"; past the ladder, {', '.join(map(str, outcome.extended))} workers were tried (the best was the "
                 "largest count tried and the answer was not settled there)")
    if outcome.filled:
        line += f"; {outcome.filled} trials the budget had left out ran with the time left at the end"
    if outcome.not_started:
        line += (f"; {outcome.not_started} trials not started: the budget's {minutes(max(outcome.grid_s or 0, 0))} "
                 "for the grid ran out (rerun with --resume and a larger --budget to add them)")
    _render.say(line)
    for cut in outcome.cuts:
        _render.console.print(f"  budget: {cut}")
