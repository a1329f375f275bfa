"""Click commands only: parse options, call the package, hand results to report. No logic lives here."""

from __future__ import annotations

import errno
import os
import re
import sys
import time
from pathlib import Path

import click

from dataperf.commands import bench, diagnose, e2e, profile
from dataperf.commands import step as step_command
from dataperf.commands._options import (
    HEADROOM,
    OPTIMIZERS,
    loader_options,
    make_config,
    make_grid,
    make_step_options,
    make_trial_options,
    model_options,
    resolve_data,
    split,
    str_list,
    trial_options,
)
from dataperf.data.sizes import check_image_side
from dataperf.errors import UserError

OBJECT_REPR = re.compile(r"\s*<[\w.]+ object at 0x[0-9a-fA-F]+>")


def error_line(e: BaseException) -> tuple[str, int]:
    """The one `error:` line and exit code for an exception that ends a command (see docs/commands.md, exit codes): a
    library's text that spans lines is joined with spaces, and object reprs (`<_io.BytesIO object at 0x..>`,
    which name nothing a user has) are left out."""
    msg, code = _error(e)
    return " ".join(OBJECT_REPR.sub("", msg).split()), code


def _error(e: BaseException) -> tuple[str, int]:
    from dataperf.errors import TrialError

    if isinstance(e, UserError):
        return str(e), e.exit_code
    if isinstance(e, click.UsageError):
        msg = e.format_message().strip().rstrip(".")
        cmd = e.ctx.command_path if e.ctx is not None else "dataperf"
        return f"{msg}; see `{cmd} --help`", 2
    if isinstance(e, click.ClickException):
        return e.format_message(), e.exit_code
    if isinstance(e, TrialError):
        return str(e), 2
    if isinstance(e, OSError) and e.errno is not None:
        where = f" {e.filename}" if e.filename else ""
        fix = "free space" if e.errno == errno.ENOSPC else "check the path and its permissions"
        return f"cannot use{where}: {e.strerror}; {fix}", 2
    if isinstance(e, EOFError):  # a file that ends before its data does (a truncated pickle, an empty array)
        return (f"a file ended early (EOFError: {str(e) or 'no data left'}); check the data files (set "
                "DATAPERF_TRACEBACK=1 to see which was being read)"), 2
    from dataperf.measure.trial import describe_failure

    text = describe_failure(e)
    if text.startswith(("corrupt", "a DataLoader worker died")):
        return f"{text}; check the data with `dataperf shards inspect --verify`", 2
    return (f"{text} (set DATAPERF_TRACEBACK=1 to see where; if your data and options look "
            "right, this is a dataperf bug: please report it)"), 2


class ContractGroup(click.Group):
    """Every command ends the same way: 0 ok, 1 a regression or an unmet target, 2 with exactly one
    `error:` line for any user mistake (click's own usage errors included), 130 on Ctrl-C."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except (KeyboardInterrupt, click.Abort) as e:
            if not isinstance(e.__cause__, EOFError):
                click.echo("interrupted", err=True)
                sys.exit(130)
            self.fail(e.__cause__)  # click wraps every EOFError in Abort: a file that ended early, not Ctrl-C
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.exceptions.NoArgsIsHelpError as e:
            click.echo(e.ctx.get_help())  # a bare group asks for its help: that is not a mistake
            sys.exit(0)
        except Exception as e:
            self.fail(e)
        sys.exit(rv if isinstance(rv, int) else 0)

    @staticmethod
    def fail(e: BaseException) -> None:
        """Exit with the one `error:` line for e (or its traceback under DATAPERF_TRACEBACK=1)."""
        if os.environ.get("DATAPERF_TRACEBACK"):
            raise e
        msg, code = error_line(e)
        click.echo(f"error: {msg}", err=True)
        sys.exit(code)


@click.group(cls=ContractGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dataperf")
def cli() -> None:
    """Which data-loader configuration can your storage and CPUs sustain, and is training input-bound?"""


@cli.group()
def shards() -> None:
    """Generate, convert and inspect datasets."""


@shards.command("make")
@click.option("--kind", type=click.Choice(["image", "tokens"]), default="image", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["files", "webdataset"]), default="webdataset", show_default=True)
@click.option("--count", type=int, default=1000, show_default=True, help="number of samples")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="output folder [shards/KIND-FORMAT]")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--shard-mb", type=float, default=64.0, show_default=True, help="target tar shard size")
@click.option("--shards", "n_shards", type=int, default=None,
              help="exact shard count instead of --shard-mb (at least workers x ranks: extra workers idle)")
@click.option("--like", type=click.Choice(["imagenet"]), default=None,
              help="photo-like JPEGs with ImageNet-1k train's size distribution (docs/synthetic-data.md), instead "
                   "of --image-size")
@click.option("--jobs", type=int, default=None, help="processes making --like images [the cores]")
@click.option("--image-size", type=int, default=None, help="JPEG width and height in pixels [256]")
@click.option("--quality", type=click.IntRange(1, 100), default=90, show_default=True, help="JPEG quality")
@click.option("--median-len", type=int, default=512, show_default=True, help="median token sequence length")
@click.option("--sigma", type=float, default=0.9, show_default=True, help="lognormal shape of token lengths")
@click.option("--min-len", type=int, default=8, show_default=True)
@click.option("--max-len", type=int, default=8192, show_default=True)
@click.option("--vocab", type=int, default=32000, show_default=True)
@click.option("--overwrite", is_flag=True, help="replace a non-empty output folder")
def shards_make(kind, fmt, count, out, seed, shard_mb, n_shards, like, jobs, image_size, quality, median_len, sigma,
                min_len, max_len, vocab, overwrite) -> None:
    """Generate a synthetic dataset: JPEG images (fixed-size, or --like imagenet) or token sequences with a
    long-tailed length distribution."""
    from dataperf.commands import _render
    from dataperf.data.make.generate import ImageSpec, TokenSpec, generate_dataset

    if like and image_size is not None:
        raise UserError(f"--like {like} draws each image's size; drop --image-size")
    side = 256 if image_size is None else image_size  # 0 is a value to refuse, not "the default"
    out = out or Path("shards") / f"{kind}-{fmt}"
    with _render.progress_bar(f"writing {count} {kind} samples", count) as advance:
        g = generate_dataset(out, kind, fmt, count, seed, ImageSpec(side, side, quality),
                             TokenSpec(median_len, sigma, min_len, max_len, vocab),
                             shard_mb, overwrite, advance, shards=n_shards, like=like, jobs=jobs)
    _render.print_made(out, g.manifest, g)


@shards.command("convert")
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--shard-mb", type=float, default=64.0, show_default=True)
@click.option("--shards", "n_shards", type=int, default=None,
              help="exact shard count instead of --shard-mb (at least workers x ranks: extra workers idle)")
@click.option("--overwrite", is_flag=True, help="replace a non-empty output folder")
def shards_convert(src, out, shard_mb, n_shards, overwrite) -> None:
    """Pack a folder of per-sample files (grouped by basename, like WebDataset keys) into tar shards."""
    from dataperf.commands import _render
    from dataperf.data.make.convert import convert

    with _render.progress_bar("packing", None) as advance:
        m = convert(src, out, shard_mb, overwrite, advance, shards=n_shards)
    _render.print_made(out, m)


@shards.command("inspect")
@click.argument("data", type=click.Path(path_type=Path))
@click.option("--verify", is_flag=True, help="decode every sample and list the bad ones (exit 2 if any)")
def shards_inspect(data, verify) -> None:
    """Sample count, sizes and shard count; for tokens the length histogram and p99."""
    from dataperf.commands import _render
    from dataperf.data.make.inspect import inspect_dataset

    ins = inspect_dataset(data, verify)
    _render.print_inspection(ins)
    if ins.corrupt:
        for c in ins.corrupt:
            _render.console.print(f"corrupt: {c}")
        fix = "replace or remove those files" if ins.format == "files" else "regenerate or re-convert those shards"
        raise UserError(f"{len(ins.corrupt)} corrupt sample(s) in {data} (listed above); {fix}, or measure with "
                        "--on-corrupt skip")


BUDGET_START_ENV = "DATAPERF_BUDGET_START"  # --nproc: when the launching command started (time.monotonic())
_main_started: float | None = None  # main() sets it: when this command's process started


def process_start() -> float:
    """When this process started, on the time.monotonic() clock: a budget counts the interpreter's start and
    imports too (on the H200 a 5-minute sweep ended 16 s past its budget, counted from the command's body)."""
    import psutil

    return time.monotonic() - max(0.0, time.time() - psutil.Process().create_time())


@cli.command()
@click.argument("data", nargs=-1, required=False)
@click.option("--config", "config_file", type=click.Path(path_type=Path), default=None,
              help="TOML/YAML file of sweep axes (overrides the axis options)")
@loader_options("sweep")
@click.option("--out", type=click.Path(path_type=Path), default=Path("results/sweep.jsonl"), show_default=True)
@click.option("--resume", is_flag=True, help="skip trials already recorded as ok in --out")
@click.option("--overwrite", is_flag=True, help="discard --out's old results")
@click.option("--plot", type=click.Path(path_type=Path), default=None, help="heatmap PNG [next to --out]")
@model_options("sweep")
@click.option("--model-batch-size", type=int, default=None, help="step batch size [first --batch-size]")
@HEADROOM
@click.option("--confirm", "confirm_k", type=int, default=None, metavar="K",
              help="with --model: feed the model from K configs (the cheapest predicted to feed it, then the "
                   "fastest predicted) and, on CUDA, the first pinned, 2 interleaved rounds each, and pick by the "
                   "fed rate [2 with --model; 0: off]")
@click.option("--confirm-steps", type=int, default=20, show_default=True, help="fed steps per repeat of --confirm")
@click.option("--nproc", type=int, default=None, help="run the sweep on N processes through torchrun")
@click.option("--budget", "budget_text", default=None, metavar="DURATION",
              help="fit the sweep into this time (300, 90s, 10m, 1h): fewer repeats first (not below 3), then "
                   "shorter ones, then fewer trials (worker counts last), then fewer --confirm runs, each cut said, "
                   "and time left at the end runs what was cut; with --model the step is measured first and the "
                   "grid gets what the step, the limits and --confirm leave [5m with --model; none: no budget]")
@trial_options
def sweep(data, config_file, out, resume, overwrite, plot, model_batch_size, headroom, confirm_k, confirm_steps,
          nproc, budget_text, **kw) -> None:
    """Grid over loader settings; a table fastest first, a heatmap, a recommendation (and a verdict)."""
    # --budget counts from the process's start (main()), or under --nproc from the launching command (one host:
    # one monotonic clock), or, called in-process (tests), from here
    started = float(os.environ.get(BUDGET_START_ENV) or _main_started or time.monotonic())
    from dataperf.commands import _render
    from dataperf.measure import distributed, preflight
    from dataperf.workflows import budget
    from dataperf.workflows import sweep as sw

    loader, step_kw, topts = split(kw, "sweep", "model")
    model = step_kw["model"]
    if budget_text is None and model:
        budget_text = budget.DEFAULT_MODEL_BUDGET
    budget_s = budget.parse_duration(budget_text) if budget_text not in (None, "none") else None
    preflight.writable_file(out, "--out")
    preflight.writable_file(plot, "--plot")
    if confirm_k and not model:
        raise UserError(f"--confirm {confirm_k} feeds a model: give --model too (e.g. --model cnn-small)")
    confirm_k = (2 if model else 0) if confirm_k is None else confirm_k
    if confirm_k < 0 or confirm_steps < 1:
        raise UserError(f"--confirm takes a count of configs (0: off) and --confirm-steps a positive count, got "
                        f"{confirm_k} and {confirm_steps}")
    if loader["decode"] is None:
        loader["decode"] = model is not None  # a model eats decoded samples: its verdict needs decoded rates
    datas = resolve_data(sw.unique_datasets(data), loader["dataset_factory"])
    grid = make_grid(datas, **loader)
    if nproc is not None:
        sw.check_ranks(datas, nproc)
        sys.exit(distributed.launch_self(nproc, sys.argv[1:], lambda: _interrupted(len(sw.finished_ids(out)), out),
                                         env={BUDGET_START_ENV: repr(started)}))
    if config_file:
        grid, file_opts = sw.load_grid_file(config_file)
        topts.update(file_opts)
    opts = make_trial_options(raw_dir=out.parent / "raw", **topts)  # checks the values before any rank starts
    ladder = loader["num_workers"] is None and not config_file  # the default worker axis: sized by the data
    trials = sw.plan(datas, grid, ladder=ladder)
    for d, cfg in trials:
        preflight.check_loader(d, cfg)
    sopts = None
    if model:
        kinds = {d.kind for d in datas}
        preflight.check_model(model, kinds.pop() if len(kinds) == 1 else None, step_kw["input_kind"],
                              seq_len=loader["seq_len"] if "tokens" in kinds else None)
        sopts = make_step_options(**step_kw, batch_size=model_batch_size or loader["batch_size"][0],
                                  seq_len=loader["seq_len"], image_size=loader["image_size"])
    ctx = distributed.init_from_env()
    confirm = sw.ConfirmOptions(confirm_k, steps=confirm_steps) if confirm_k else None
    plan = sw.make_plan(trials, opts, out, resume and not overwrite, budget_s, model=model is not None,
                        fed_runs=confirm.k * confirm.rounds if confirm else 0)
    if ctx.rank == 0:
        _render.print_plan(plan)
    with _render.progress_bar(f"sweep ({len(plan.trials)} trials)", len(plan.trials), enabled=ctx.rank == 0,
                             eta=True) as advance:
        outcome = sw.run(plan.trials, plan.opts, out, ctx, resume, overwrite, sopts, on_result=lambda r: advance(1),
                         headroom=headroom, confirm_opts=confirm, bar=_render.progress_bar,
                         deadline=None if budget_s is None else started + budget_s, spare=plan.spare,
                         extend=ladder, budget_s=budget_s)
    if outcome.interrupted:
        if ctx.rank == 0:
            _interrupted(outcome.kept, out)
        sys.exit(130)
    if ctx.rank != 0:
        return
    recs, step = outcome.records, outcome.step
    _render.console.print(_render.loader_table(recs, step, headroom))
    _render.print_failures(recs)
    _render.print_trial_notes(recs)
    for line in [_render.idle_warning(recs), *_render.verdict_caveats(recs, step)]:
        if line:
            _render.console.print(line)
    png = _render.heatmap(recs, plot or out.with_suffix(".png"))
    if png:
        _render.console.print(f"heatmap: {png}")
    _render.print_recommendation(outcome.recommendation)
    _render.print_duration(plan, outcome)
    _render.console.print(f"results: {out} ({len(outcome.results)} new trials)")
    if outcome.all_failed:
        raise UserError(f"every trial failed ({len(outcome.results)}); the first: {outcome.results[0].error}")


@cli.command()
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("head", type=click.Path(path_type=Path))
@click.option("--metrics", callback=str_list, default="step_ms,peak_mem_mib,samples_per_s", show_default=True,
              help="comma list: samples_per_s, epoch_samples_per_s, step_ms, peak_mem_mib, payload_mib_s, "
                   "storage_read_mib_s, data_stall_fraction")
@click.option("--threshold", default="5%", show_default=True, help="smallest change that counts")
def compare(base, head, metrics, threshold) -> None:
    """Base vs head result files: medians, % change, noise-aware verdict; exit 1 on a regression."""
    from dataperf.commands import _render
    from dataperf.workflows import compare as cmp

    changes = cmp.compare(base, head, metrics, cmp.parse_threshold(threshold))
    _render.print_env_differences(cmp.env_differences(base, head))
    _render.print_compare(changes, threshold)
    if cmp.has_regression(changes):
        sys.exit(1)


@cli.command()
@click.argument("data", type=click.Path(path_type=Path))
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--cap", type=int, default=None, help="truncate sequences to this many tokens; shows the effect")
@click.option("--model", default=None, help="also measure step peak memory at the p99 batch length (and capped)")
@click.option("--device", default="cpu", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="append the record to this .jsonl")
def lengths(data, batch_size, cap, model, device, out) -> None:
    """Per-batch token-length histogram and p99 (OOM risk from length variance), and what --cap changes."""
    from dataperf import results as records
    from dataperf.commands import _render
    from dataperf.measure import preflight
    from dataperf.measure.step import StepOptions
    from dataperf.workflows.lengths import analyse, measure_cap_memory

    preflight.writable_file(out, "--out")
    if model:
        preflight.check_model(model, "tokens", "tokens")
    r = analyse(data, batch_size, cap)
    if model:
        measure_cap_memory(r, StepOptions(model=model, device=device, steps=2, warmup=1))
    if out:
        records.append(out, r)
    _render.print_lengths(r)


@cli.command()
@click.argument("data", required=False)
@click.option("--target-samples-per-s", type=float, default=None, help="the rate to sustain")
@model_options("tune")
@HEADROOM
@loader_options("tune")
@click.option("--min-gain", type=float, default=0.05, show_default=True,
              help="smallest gain that moves the search one more step")
@click.option("--max-workers", type=int, default=None, help="[2 x cores]")
@click.option("--max-batch-size", type=int, default=256, show_default=True, help="largest batch size tried")
@click.option("--out", type=click.Path(path_type=Path), default=Path("results/tune.jsonl"), show_default=True)
@trial_options
def tune(data, target_samples_per_s, headroom, min_gain, max_workers, max_batch_size, out, **kw) -> None:
    """Find the fastest config (or the cheapest that sustains a target, or the model's step rate with headroom)
    from the limits, their neighbours and a confirmation of the top two or three, without the whole grid."""
    from dataperf.commands import _render
    from dataperf.measure import preflight
    from dataperf.workflows.tune import Tuner

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
    preflight.writable_file(out, "--out")
    opts = make_trial_options(raw_dir=out.parent / "raw", **topts)
    if model:
        preflight.check_model(model, seq_len=loader["seq_len"] if model.startswith("gpt") else None)
    data = resolve_data(data, loader["dataset_factory"])[0]
    base = make_config(data, **loader)
    sopts = make_step_options(**model_kw, batch_size=loader["batch_size"], seq_len=loader["seq_len"],
                              image_size=loader["image_size"]) if model else None
    outcome = Tuner(data, base, opts, target_samples_per_s, sopts, headroom, min_gain, max_workers, max_batch_size,
                    out=out, on_trial=_render.print_tune_step, on_prediction=_render.print_prediction,
                    bar=_render.progress_bar).run()
    _render.print_tune(outcome)
    if outcome.pick is None:  # nothing ran: never "done" (0), nor a target missed by a config that runs (1)
        failed = next((s.result.error for s in outcome.steps if s.result.status != "ok"), None)
        raise UserError(f"tune found no config that runs ({outcome.stop_reason.split(';')[0]})"
                        + (f"; the first failed: {failed}" if failed else ""))
    if not outcome.met and outcome.target_samples_per_s is not None:
        sys.exit(1)


@cli.command()
@click.option("--model", default="gpt-1.3b", show_default=True, help="a built-in name or MODULE:FACTORY")
@click.option("--optimizers", callback=str_list, default="adamw,adam8bit,zero2-offload,zero3-offload",
              show_default=True, help=f"comma list of {', '.join(OPTIMIZERS)}")
@click.option("--batch-size", type=int, default=8, show_default=True)
@click.option("--seq-len", type=int, default=1024, show_default=True)
@click.option("--device", default="cuda", show_default=True)
@click.option("--amp", type=click.Choice(["bf16", "none"]), default="bf16", show_default=True,
              help="bf16: autocast for torch optimizers, DeepSpeed's bf16 (fp32 master state) for ZeRO")
@click.option("--repeats", type=int, default=3, show_default=True)
@click.option("--steps", type=int, default=5, show_default=True)
@click.option("--warmup", type=int, default=2, show_default=True)
@click.option("--max-batch", is_flag=True, help="also find each optimizer's largest batch (doubling, bisection)")
@click.option("--max-batch-limit", type=int, default=1024, show_default=True)
@click.option("--tolerance", type=float, default=10.0, show_default=True,
              help="stop bisecting when the gap is within this % of the fitting batch")
@click.option("--out", type=click.Path(path_type=Path), default=Path("results/memory.jsonl"), show_default=True)
def memory(model, optimizers, batch_size, seq_len, device, amp, repeats, steps, warmup, max_batch, max_batch_limit,
           tolerance, out) -> None:
    """GPU memory, step time and % saved against AdamW for each optimizer at one batch size, one process each."""
    from dataperf import results as records
    from dataperf.commands import _render
    from dataperf.workflows.memory import measure_memory

    bad = [o for o in optimizers if o not in OPTIMIZERS]
    if bad:
        raise UserError(f"unknown optimizer {bad[0]!r} in --optimizers; choose from {', '.join(OPTIMIZERS)}")
    if not device.startswith("cuda"):
        raise UserError(f"memory compares GPU memory: --device {device} has none; use --device cuda")
    import torch

    if not torch.cuda.is_available():  # one error: line before any trial starts
        raise UserError("memory compares GPU memory, and torch sees no CUDA device here; run it on a GPU machine")
    base = {"model": model, "batch_size": batch_size, "seq_len": seq_len, "device": device,
            "amp": None if amp == "none" else amp, "repeats": repeats, "steps": steps, "warmup": warmup,
            "results_dir": str(out.parent)}
    rows = measure_memory(base, optimizers, max_batch=max_batch, max_batch_limit=max_batch_limit,
                          tolerance_pct=tolerance, on_result=lambda r: records.append(out, r))
    _render.print_memory(rows)
    _render.console.print(f"results: {out}")


@cli.command("report")
@click.argument("results", type=click.Path(path_type=Path))
@HEADROOM
@click.option("--plot", type=click.Path(path_type=Path), default=None, help="heatmap PNG")
def report_cmd(results, headroom, plot) -> None:
    """Tables, heatmap and the input-bound verdict from a saved results file."""
    from dataperf import results as records
    from dataperf import verdict
    from dataperf.commands import _render
    from dataperf.measure import preflight

    preflight.writable_file(plot, "--plot")
    recs = records.current(records.load(results))
    if not recs:
        raise UserError(f"{results} holds no records; run `dataperf sweep --out {results}` first")
    step = verdict.latest_step(recs)
    _render.print_env(recs)
    printers = {"e2e": e2e.render, "lengths": _render.print_lengths, "profile": profile.render,
                "diagnose": diagnose.render}
    rec = verdict.recommend(recs, step, headroom)
    verdict.saved_bound(rec, recs)
    for r in recs:
        confirmation = r.kind == "e2e" and r.confirm_round is not None  # shown in the verdict's fed table
        if r.kind in printers and r.status == "ok" and not confirmation:
            printers[r.kind](r)
        if r.kind == "limits" and r is not rec.limits:
            _render.print_limits(r)
    if any(r.kind == "watch" for r in recs):
        _render.print_watch(recs)
    loaders = [r for r in recs if r.kind == "loader"]
    if loaders:
        _render.console.print(_render.loader_table(recs, step, headroom))
    _render.print_failures(recs)
    _render.print_trial_notes(recs)
    for line in [_render.idle_warning(recs), *_render.verdict_caveats(recs, step)]:
        if line:
            _render.console.print(line)
    if step is not None:
        step_command.render(step)
    mem = [r for r in recs if r.kind == "memory"]
    if mem:
        _render.print_memory(mem)
    if plot:
        png = _render.heatmap(recs, plot)
        _render.console.print(f"heatmap: {png}" if png else "no heatmap: no successful webdataset/files trials")
    if loaders:
        _render.print_recommendation(rec)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("cmd", nargs=-1, type=click.UNPROCESSED)
@click.option("--pid", type=int, default=None, help="attach the collectors to this running job (no hooks)")
@click.option("--out", type=click.Path(path_type=Path), default=Path("results/watch.jsonl"), show_default=True,
              help="append one watch record per rank to this .jsonl")
@click.option("--label", default=None, help="name of the job in --out, matched by compare [the command line]")
@click.option("--ebpf", is_flag=True, help="count read syscalls per process of the job with eBPF (bcc/bpftrace)")
@click.option("--nsys", is_flag=True, help="run the command under Nsight Systems when installed")
def watch(cmd, pid, out, label, ebpf, nsys) -> None:
    """Your own training run, unmodified: `dataperf watch -- python train.py` (or `-- torchrun ...`).

    Per rank: step time, data wait, samples/s, data-stall fraction (GPU idle on CUDA), the DataLoader settings
    the script built, the hook's own cost; collectors on the job's process tree; exits with the job's code.
    """
    from dataperf import results as records
    from dataperf.commands import _render
    from dataperf.workflows.watch import launch, results

    cmd = list(cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if bool(cmd) == (pid is not None):
        raise UserError("give either a command after `--` (dataperf watch -- python train.py) or --pid PID")
    raw = out.parent / "raw"
    if pid is not None:
        w = launch.attach(pid, raw, ebpf, on_started=lambda: click.echo(
            f"watching pid {pid} and its process tree (collectors only); Ctrl-C stops watching", err=True))
    else:
        w = launch.run(cmd, raw, ebpf, nsys, results.data_path_of)
    recs = results.build(w, cmd or [f"pid {pid}"], label)
    for r in recs:
        records.append(out, r)
    with _render.to_stderr():
        _render.print_watch(recs)
        _render.console.print(f"results: {out} ({len(recs)} watch record(s)); per-step hook lines: {w.hook_dir}")
    if w.exit_code is not None:
        sys.exit(w.exit_code)


for command in (bench.bench, diagnose.diagnose, e2e.e2e, profile.profile, step_command.step):
    cli.add_command(command)


def main() -> None:
    global _main_started
    _main_started = process_start()  # only the command's own process: a caller that imports cli keeps its clock
    cli(prog_name="dataperf")


def _interrupted(kept: int, out: Path) -> None:
    """The one line a Ctrl-C'd sweep ends with, in one process or under --nproc."""
    click.echo(f"interrupted: {kept} finished trials are kept in {out}; run the same command with --resume to skip "
               "them", err=True)
