"""Click commands only: parse options, call the package, hand results to report. No logic lives here."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from pathlib import Path

import click

from dataperf.errors import UserError
from dataperf.formats.backends import REGISTRY

BACKENDS = list(REGISTRY)  # every --format value a loader command takes (beside auto)


def error_line(e: BaseException) -> tuple[str, int]:
    """The one `error:` line and exit code for an exception that ends a command (see README, exit codes)."""
    from dataperf.errors import TrialError

    if isinstance(e, UserError):
        return str(e), e.exit_code
    if isinstance(e, click.UsageError):
        msg = " ".join(e.format_message().split()).rstrip(".")
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
    from dataperf.runner import describe_failure

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
        except (KeyboardInterrupt, click.Abort):
            click.echo("interrupted", err=True)
            sys.exit(130)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.exceptions.NoArgsIsHelpError as e:
            click.echo(e.ctx.get_help())  # a bare group asks for its help: that is not a mistake
            sys.exit(0)
        except Exception as e:
            if os.environ.get("DATAPERF_TRACEBACK"):
                raise
            msg, code = error_line(e)
            click.echo(f"error: {msg}", err=True)
            sys.exit(code)
        sys.exit(rv if isinstance(rv, int) else 0)


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
              help="photo-like JPEGs with ImageNet-1k train's size distribution (README), instead of --image-size")
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
    from dataperf import report
    from dataperf.formats.generate import ImageSpec, TokenSpec, generate_dataset

    if like and image_size is not None:
        raise UserError(f"--like {like} draws each image's size; drop --image-size")
    side = image_size or 256
    out = out or Path("shards") / f"{kind}-{fmt}"
    with report.progress_bar(f"writing {count} {kind} samples", count) as advance:
        g = generate_dataset(out, kind, fmt, count, seed, ImageSpec(side, side, quality),
                             TokenSpec(median_len, sigma, min_len, max_len, vocab),
                             shard_mb, overwrite, advance, shards=n_shards, like=like, jobs=jobs)
    report.print_made(out, g.manifest, g)


@shards.command("convert")
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--shard-mb", type=float, default=64.0, show_default=True)
@click.option("--shards", "n_shards", type=int, default=None,
              help="exact shard count instead of --shard-mb (at least workers x ranks: extra workers idle)")
@click.option("--overwrite", is_flag=True, help="replace a non-empty output folder")
def shards_convert(src, out, shard_mb, n_shards, overwrite) -> None:
    """Pack a folder of per-sample files (grouped by basename, like WebDataset keys) into tar shards."""
    from dataperf import report
    from dataperf.formats.convert import convert

    with report.progress_bar("packing", None) as advance:
        m = convert(src, out, shard_mb, overwrite, advance, shards=n_shards)
    report.print_made(out, m)


@shards.command("inspect")
@click.argument("data", type=click.Path(path_type=Path))
@click.option("--verify", is_flag=True, help="decode every sample and list the bad ones (exit 2 if any)")
def shards_inspect(data, verify) -> None:
    """Sample count, sizes and shard count; for tokens the length histogram and p99."""
    from dataperf import report
    from dataperf.formats.inspect import inspect_dataset

    ins = inspect_dataset(data, verify)
    report.print_inspection(ins)
    if ins.corrupt:
        for c in ins.corrupt:
            report.console.print(f"corrupt: {c}")
        raise UserError(f"{len(ins.corrupt)} corrupt sample(s) in {data} (listed above); regenerate or "
                        "re-convert those shards, or measure with --on-corrupt skip")


def data_options(fn):
    """DATA's alternatives and what the loader does to each image, shared by every loader-running command."""
    for opt in reversed([
        click.option("--dataset", "dataset_factory", default=None, metavar="MODULE:FACTORY",
                     help="your own torch Dataset/IterableDataset (DATA is then left out)"),
        click.option("--transform", default=None, metavar="PRESET|MODULE:FACTORY",
                     help="resize (default) | imagenet-train | imagenet-val | MODULE:FACTORY"),
    ]):
        fn = opt(fn)
    return fn


def resolve_data(data: str | tuple[str, ...] | None, dataset_factory: str | None):
    """DATA resolved once (sources.Data) and passed down; --dataset stands in for DATA."""
    from dataperf import sources

    given = [d for d in ((data,) if isinstance(data, str) else (data or ())) if d]
    if dataset_factory and given:
        raise UserError("give DATA or --dataset MODULE:FACTORY, not both")
    if dataset_factory:
        return [sources.user_dataset(dataset_factory)]
    if not given:
        raise UserError("missing DATA: a folder, a file, a glob, a brace pattern or a URL "
                        "(or --dataset MODULE:FACTORY for your own Dataset)")
    return [sources.resolve(d) for d in given]


def model_options(fn):
    """How a model trains, for sweep and tune as for step/e2e: same names, same meaning."""
    for opt in reversed([
        click.option("--optimizer", type=click.Choice(["adamw", "adam8bit", "adamw-cpu-offload", "zero"]),
                     default="adamw", show_default=True),
        click.option("--amp", type=click.Choice(["bf16"]), default=None, help="autocast dtype"),
        click.option("--input", "input_kind", type=click.Choice(["tokens", "image"]), default=None,
                     help="input of a MODULE:FACTORY model [tokens]"),
    ]):
        fn = opt(fn)
    return fn


def int_list(ctx, param, value):
    """Parse '0,1,2' into [0, 1, 2] with an error that names the option."""
    if value is None:
        return None
    try:
        return [int(x) for x in str(value).split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None


def str_list(ctx, param, value):
    return None if value is None else [x.strip() for x in str(value).split(",") if x.strip()]


ON_CORRUPT = click.option("--on-corrupt", type=click.Choice(["fail", "skip"]), default="fail", show_default=True,
                          help="a sample that does not decode fails the trial (naming it), or is skipped and "
                               "counted (corrupt_samples)")


def trial_options(fn):
    """Options of how a trial measures, shared by bench, sweep and tune."""
    for opt in reversed([
        click.option("--repeats", type=int, default=5, show_default=True,
                     help="measured repeats (>= 5 for compare's interval to mean something)"),
        click.option("--warmup-batches", type=int, default=2, show_default=True),
        click.option("--max-batches", type=int, default=None, help="batches per repeat [whole epoch]"),
        click.option("--min-batches", type=int, default=5, show_default=True,
                     help="refuse to report a repeat with fewer batches"),
        click.option("--drop-caches", is_flag=True, help="cold cache: also write /proc/sys/vm/drop_caches (root)"),
        click.option("--no-collect", is_flag=True, help="skip system collectors"),
        click.option("--ebpf", is_flag=True, help="count read syscalls per process with eBPF (bcc)"),
        click.option("--seed", type=int, default=0, show_default=True),
    ]):
        fn = opt(fn)
    return fn


def make_opts(repeats, warmup_batches, max_batches, min_batches, drop_caches, no_collect, ebpf, seed,
              raw_dir=None, **dist):
    from dataperf.runner import TrialOptions

    if repeats < 1:
        raise UserError(f"--repeats must be at least 1, got {repeats}")
    if warmup_batches < 0:
        raise UserError(f"--warmup-batches must be >= 0, got {warmup_batches}")
    if min_batches < 2:
        raise UserError(f"--min-batches must be at least 2, got {min_batches}: a repeat's rate is timed from "
                        "its second batch on, so one batch measures nothing")
    if max_batches is not None and max_batches < min_batches:
        raise UserError(f"--max-batches {max_batches} is below --min-batches {min_batches}; every repeat would "
                        "be refused. Raise --max-batches or lower --min-batches")
    return TrialOptions(repeats=repeats, warmup_batches=warmup_batches, max_batches=max_batches,
                        min_batches=min_batches, drop_caches=drop_caches, collect=not no_collect, ebpf=ebpf,
                        raw_dir=raw_dir, seed=seed, **dist)


@cli.command()
@click.argument("data", required=False)
@data_options
@click.option("--format", "fmt", type=click.Choice(["auto", *BACKENDS]), default="auto",
              show_default=True, help="loader backend; auto = the dataset's own format")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--num-workers", type=int, default=0, show_default=True)
@click.option("--worker-type", type=click.Choice(["process", "thread"]), default=None,
              help="where the backend offers both [its own kind]")
@click.option("--prefetch-factor", type=int, default=None)
@click.option("--pin-memory", is_flag=True)
@click.option("--persistent-workers", is_flag=True)
@click.option("--decode", is_flag=True, help="decode JPEGs / token arrays (else move raw bytes)")
@click.option("--image-size", type=int, default=224, show_default=True, help="decoded image side")
@click.option("--cap", "cap_tokens", type=int, default=None, help="truncate token sequences to this length")
@click.option("--seq-len", type=int, default=None, help="tokens per window of a .bin/.npy token stream [512]")
@click.option("--cache", type=click.Choice(["warm", "cold"]), default="warm", show_default=True)
@click.option("--dali-threads", type=int, default=2, show_default=True)
@click.option("--dali-queue", type=int, default=2, show_default=True)
@click.option("--dali-decode", type=click.Choice(["cpu", "mixed"]), default="cpu", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="append the record to this .jsonl")
@ON_CORRUPT
@trial_options
def bench(data, dataset_factory, transform, fmt, batch_size, num_workers, worker_type, prefetch_factor, pin_memory,
          persistent_workers, decode, image_size, cap_tokens, seq_len, cache, dali_threads, dali_queue, dali_decode,
          out, on_corrupt, **topts) -> None:
    """Time one DataLoader configuration: samples/s, MiB/s, time to first batch, batch-wait p50/p99."""
    from dataperf import preflight, records, report
    from dataperf.runner import run_trial

    preflight.writable_file(out, "--out")
    data = resolve_data(data, dataset_factory)[0]
    cfg = make_config(data, fmt, batch_size, num_workers, prefetch_factor, pin_memory, persistent_workers,
                      image_size, cap_tokens, cache, dali_threads, dali_queue, dali_decode, decode=decode,
                      on_corrupt=on_corrupt, worker_type=worker_type, transform=transform, seq_len=seq_len)
    opts = make_opts(raw_dir=out.parent / "raw" if out else None, **topts)
    preflight.check_loader(data, cfg)
    with records.exclusive(out) if out else contextlib.nullcontext():
        r = run_trial(data, cfg, opts)
        if out:
            records.append(out, r)
    if r.status != "ok":
        raise UserError(f"{cfg.short()} failed: {r.error}")
    report.print_trial(r)


@cli.command()
@click.argument("data", nargs=-1, required=False)
@data_options
@click.option("--config", "config_file", type=click.Path(path_type=Path), default=None,
              help="TOML/YAML file of sweep axes (overrides the axis options)")
@click.option("--format", "formats", callback=str_list, default="auto", show_default=True,
              help="comma list of backends: auto (the dataset's own), all (every installed one), "
                   f"{','.join(BACKENDS)}")
@click.option("--num-workers", callback=int_list, default=None, help="comma list [0,1,2,4,.. up to 2x cores]")
@click.option("--worker-type", "worker_types", callback=str_list, default=None,
              help="comma list: process,thread (each backend runs those it offers) [each backend's own kind]")
@click.option("--prefetch-factor", callback=int_list, default="2,4,8", show_default=True)
@click.option("--batch-size", callback=int_list, default="32", show_default=True)
@click.option("--pin-memory", type=click.Choice(["off", "on", "both"]), default="off", show_default=True)
@click.option("--persistent-workers", type=click.Choice(["off", "on", "both"]), default="off", show_default=True)
@click.option("--decode/--no-decode", default=None, help="decode samples [on with --model, else off]")
@click.option("--image-size", type=int, default=224, show_default=True)
@click.option("--cap", "cap_tokens", type=int, default=None, help="truncate token sequences to this length")
@click.option("--cache", type=click.Choice(["warm", "cold", "both"]), default="warm", show_default=True)
@click.option("--dali-threads", callback=int_list, default="1,2,4", show_default=True)
@click.option("--dali-queue", callback=int_list, default="2", show_default=True)
@click.option("--dali-decode", callback=str_list, default="cpu", show_default=True, help="cpu,mixed")
@click.option("--out", type=click.Path(path_type=Path), default=Path("results/sweep.jsonl"), show_default=True)
@click.option("--resume", is_flag=True, help="skip trials already recorded as ok in --out")
@click.option("--overwrite", is_flag=True, help="discard --out's old results")
@click.option("--plot", type=click.Path(path_type=Path), default=None, help="heatmap PNG [next to --out]")
@click.option("--model", default=None, help="also measure this model's step and give the verdict")
@click.option("--model-batch-size", type=int, default=None, help="step batch size [first --batch-size]")
@click.option("--seq-len", type=int, default=512, show_default=True)
@click.option("--device", default="cpu", show_default=True)
@model_options
@click.option("--headroom", type=float, default=1.2, show_default=True)
@click.option("--nproc", type=int, default=None, help="run the sweep on N processes through torchrun")
@ON_CORRUPT
@trial_options
def sweep(data, dataset_factory, transform, config_file, formats, num_workers, worker_types, prefetch_factor,
          batch_size, pin_memory, persistent_workers, decode, image_size, cap_tokens, cache, dali_threads, dali_queue,
          dali_decode, out, resume, overwrite, plot, model, model_batch_size, seq_len, device, optimizer, amp,
          input_kind, headroom, nproc, on_corrupt, **topts) -> None:
    """Grid over loader settings; a table fastest first, a heatmap, a recommendation (and a verdict)."""
    from dataperf import distributed, preflight, records
    from dataperf import sweep as sw

    preflight.writable_file(out, "--out")
    preflight.writable_file(plot, "--plot")
    if not headroom > 0:
        raise UserError(f"--headroom must be positive (1.2 = the loader 20% faster than the step), got {headroom}")
    for name, axis in (("--num-workers", num_workers), ("--prefetch-factor", prefetch_factor),
                       ("--batch-size", batch_size), ("--format", formats), ("--dali-threads", dali_threads),
                       ("--dali-queue", dali_queue), ("--dali-decode", dali_decode)):
        if axis is not None and not axis:
            raise UserError(f"{name} got no values; give a comma list such as 0,1,2, or leave it out")
    _check_transform(transform)
    datas = resolve_data(sw.unique_datasets(data), dataset_factory)
    if nproc is not None:
        sw.check_ranks(datas, nproc)
        sys.exit(distributed.launch_self(nproc, sys.argv[1:], out))
    windows = any(d.format in ("tokens-bin", "npy") for d in datas)
    both = {"off": [False], "on": [True], "both": [False, True]}
    if decode is None:
        decode = model is not None  # a model eats decoded samples: its verdict needs decoded loader rates
    grid = sw.Grid(formats=formats, num_workers=num_workers or sw.default_workers(),
                   worker_types=worker_types or [None],
                   prefetch_factor=prefetch_factor, batch_size=batch_size, pin_memory=both[pin_memory],
                   persistent_workers=both[persistent_workers], decode=[decode],
                   cache=["warm", "cold"] if cache == "both" else [cache], image_size=image_size,
                   cap_tokens=cap_tokens, transform=transform, seq_len=seq_len if windows else None,
                   dali_num_threads=dali_threads, dali_prefetch_queue_depth=dali_queue,
                   dali_decode_device=dali_decode, on_corrupt=None if on_corrupt == "fail" else on_corrupt)
    if config_file:
        grid, file_opts = sw.load_grid_file(config_file)
        topts.update(file_opts)
    opts = make_opts(raw_dir=out.parent / "raw", **topts)  # checks the values before any rank starts
    trials = sw.plan(datas, grid)
    for d, cfg in trials:
        preflight.check_loader(d, cfg)
    if model:
        kinds = {d.kind for d in datas}
        preflight.check_model(model, kinds.pop() if len(kinds) == 1 else None, input_kind,
                              seq_len=seq_len if "tokens" in kinds else None)
    ctx = distributed.init_from_env()
    with records.exclusive(out) if ctx.rank == 0 else contextlib.nullcontext():
        _sweep(ctx, trials, out, resume, overwrite, plot, model, model_batch_size, seq_len, device,
               headroom, batch_size, image_size, opts, optimizer, amp, input_kind)


def _sweep(ctx, trials, out, resume, overwrite, plot, model, model_batch_size, seq_len, device, headroom,
           batch_size, image_size, opts, optimizer="adamw", amp=None, input_kind=None) -> None:
    from dataclasses import replace

    from dataperf import records, report
    from dataperf import sweep as sw

    if ctx.rank == 0:
        sw.prepare_out(out, resume, overwrite)
    if ctx.barrier:
        ctx.barrier()  # no rank reads --out before rank 0 has cleared it
    skip = sw.finished_ids(out) if resume else set()
    opts = replace(opts, rank=ctx.rank, world_size=ctx.world_size, barrier=ctx.barrier, gather=ctx.gather)
    step = None
    try:
        with report.progress_bar(f"sweep ({len(trials)} trials)", len(trials), enabled=ctx.rank == 0) as advance:
            results = sw.run_sweep(trials, opts, out, skip, on_result=lambda r: advance(1))
        ctx.close()
        if ctx.rank != 0:
            return
        if model:
            from dataperf.step import StepOptions, measure_step

            step = measure_step(StepOptions(model=model, batch_size=model_batch_size or batch_size[0],
                                            seq_len=seq_len, device=device, image_size=image_size,
                                            optimizer=optimizer, amp=amp, input=input_kind))
            records.append(out, step)
    except KeyboardInterrupt:
        if ctx.rank == 0:
            click.echo(f"interrupted: {len(sw.finished_ids(out))} finished trials are kept in {out}; run the "
                       "same command with --resume to skip them", err=True)
        sys.exit(130)
    all_results = records.current(records.load(out))
    report.console.print(report.loader_table(all_results, step, headroom))
    report.print_failures(all_results)
    for line in [report.idle_warning(all_results), *report.verdict_caveats(all_results, step)]:
        if line:
            report.console.print(line)
    png = report.heatmap(all_results, plot or out.with_suffix(".png"))
    if png:
        report.console.print(f"heatmap: {png}")
    report.console.print(report.recommendation(all_results, step, headroom))
    report.console.print(f"results: {out} ({len(results)} new trials)")
    if results and all(r.status != "ok" for r in results):
        raise UserError(f"every trial failed ({len(results)}); the first: {results[0].error}")


OPTIMIZERS = ["adamw", "adam8bit", "adamw-cpu-offload", "zero", "zero2", "zero2-offload", "zero3", "zero3-offload",
              "zero2-adam8bit"]  # the last five run through DeepSpeed (dataperf[deepspeed])


def step_options(fn):
    """Options that describe the model step, shared by step, e2e, profile, diagnose and tune."""
    for opt in reversed([
        click.option("--model", default="gpt-small", show_default=True,
                     help="gpt-small | gpt-tiny | cnn-small | MODULE:FACTORY"),
        click.option("--seq-len", type=int, default=512, show_default=True),
        click.option("--device", default="cpu", show_default=True, help="cpu | cuda | cuda:N"),
        click.option("--optimizer", type=click.Choice(OPTIMIZERS),
                     default="adamw", show_default=True),
        click.option("--amp", type=click.Choice(["bf16"]), default=None, help="autocast dtype"),
        click.option("--input", "input_kind", type=click.Choice(["tokens", "image"]), default=None,
                     help="input of a MODULE:FACTORY model [tokens]"),
        click.option("--deterministic", is_flag=True,
                     help="seed everything and torch.use_deterministic_algorithms(True)"),
    ]):
        fn = opt(fn)
    return fn


@cli.command()
@step_options
@click.option("--batch-size", type=int, default=8, show_default=True)
@click.option("--image-size", type=int, default=224, show_default=True)
@click.option("--repeats", type=int, default=5, show_default=True)
@click.option("--steps", type=int, default=10, show_default=True, help="timed steps per repeat")
@click.option("--warmup", type=int, default=3, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="append the record to this .jsonl")
def step(model, seq_len, device, optimizer, amp, input_kind, deterministic, batch_size, image_size, repeats, steps,
         warmup, out) -> None:
    """Median ms/step, samples/s and peak memory of a real train step on synthetic in-memory data."""
    from dataperf import preflight, records, report
    from dataperf.step import StepOptions, measure_step

    preflight.writable_file(out, "--out")
    preflight.check_image_side(image_size)
    preflight.check_model(model, input_kind=input_kind, seq_len=seq_len if input_kind != "image" else None)
    r = measure_step(StepOptions(model=model, batch_size=batch_size, seq_len=seq_len, image_size=image_size,
                                 device=device, optimizer=optimizer, repeats=repeats, steps=steps,
                                 warmup=warmup, input=input_kind, amp=amp, deterministic=deterministic,
                                 results_dir=out.parent if out else None))
    if out:
        records.append(out, r)
    report.print_step(r)


def loader_options(fn):
    """One loader config (not a grid), shared by e2e, profile and diagnose."""
    for opt in reversed([
        click.option("--format", "fmt", type=click.Choice(["auto", *BACKENDS]), default="auto",
                     show_default=True),
        click.option("--batch-size", type=int, default=32, show_default=True),
        click.option("--num-workers", type=int, default=2, show_default=True),
        click.option("--worker-type", type=click.Choice(["process", "thread"]), default=None,
                     help="where the backend offers both [its own kind]"),
        click.option("--prefetch-factor", type=int, default=None),
        click.option("--pin-memory/--no-pin-memory", default=None, help="[on with CUDA]"),
        click.option("--persistent-workers", is_flag=True),
        click.option("--image-size", type=int, default=224, show_default=True),
        click.option("--cap", "cap_tokens", type=int, default=None, help="truncate token sequences"),
        click.option("--dataset", "dataset_factory", default=None, metavar="MODULE:FACTORY",
                     help="your own torch Dataset/IterableDataset (DATA is then left out)"),
        click.option("--transform", default=None, metavar="PRESET|MODULE:FACTORY",
                     help="resize (default) | imagenet-train | imagenet-val | MODULE:FACTORY"),
        click.option("--cache", type=click.Choice(["warm", "cold"]), default="warm", show_default=True),
        click.option("--dali-threads", type=int, default=2, show_default=True),
        click.option("--dali-queue", type=int, default=2, show_default=True),
        click.option("--dali-decode", type=click.Choice(["cpu", "mixed"]), default="cpu", show_default=True),
        ON_CORRUPT,
    ]):
        fn = opt(fn)
    return fn


def _check_transform(transform: str | None) -> None:
    from dataperf.sources import transforms

    transforms.check(transform)


def make_config(data, fmt, batch_size, num_workers, prefetch_factor, pin_memory, persistent_workers, image_size,
                cap_tokens, cache, dali_threads, dali_queue, dali_decode, device="cpu", decode=True,
                on_corrupt="fail", worker_type=None, transform=None, seq_len=None, dataset_factory=None):
    """One LoaderConfig from the options; `data` is the resolved sources.Data (its format is what auto means)."""
    from dataperf.records import LoaderConfig

    _check_transform(transform)
    if fmt == "auto":
        fmt = data.format
    dali = fmt == "dali"
    if dali and (dali_threads < 1 or dali_queue < 1):
        raise UserError(f"--dali-threads and --dali-queue must be at least 1, got {dali_threads} and {dali_queue}")
    return LoaderConfig(format=fmt, batch_size=batch_size, num_workers=0 if dali else num_workers,
                        prefetch_factor=None if dali else prefetch_factor,
                        pin_memory=str(device).startswith("cuda") if pin_memory is None else pin_memory,
                        persistent_workers=persistent_workers and not dali, decode=decode, cache=cache,
                        image_size=image_size, cap_tokens=cap_tokens, transform=transform, seq_len=seq_len,
                        dali_num_threads=dali_threads if dali else None,
                        dali_prefetch_queue_depth=dali_queue if dali else None,
                        dali_decode_device=dali_decode if dali else None,
                        on_corrupt=None if on_corrupt == "fail" else on_corrupt, worker_type=worker_type)


@cli.command()
@click.argument("data", required=False)
@loader_options
@step_options
@click.option("--steps", type=int, default=20, show_default=True, help="fed steps per repeat")
@click.option("--repeats", type=int, default=5, show_default=True)
@click.option("--warmup", type=int, default=3, show_default=True)
@click.option("--no-predict", is_flag=True, help="skip the separate loader and step measurements")
@click.option("--sync-each-step", is_flag=True,
              help="CUDA: synchronize after every step, so host wait equals GPU idle (slower; default: events)")
@click.option("--nan-guard", "nan_guard_dir", type=click.Path(path_type=Path), default=None,
              help="check every step for NaN/inf; checkpoint into this folder and stop on the first")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="append the record to this .jsonl")
def e2e(data, model, seq_len, device, optimizer, amp, input_kind, deterministic, steps, repeats, warmup, no_predict,
        sync_each_step, nan_guard_dir, out, **loader) -> None:
    """The loader feeding the real step: data-wait vs compute per step, and the data-stall fraction."""
    from dataperf import preflight, records, report
    from dataperf.e2e import run_e2e
    from dataperf.guards import NonFiniteError
    from dataperf.step import StepOptions

    preflight.writable_file(out, "--out")
    preflight.writable_dir(nan_guard_dir, "--nan-guard")
    data = resolve_data(data, loader["dataset_factory"])[0]
    cfg = make_config(data, device=device, **loader)
    preflight.check_fed(data, cfg, model, input_kind)

    sopts = StepOptions(model=model, seq_len=seq_len, device=device, optimizer=optimizer, amp=amp,
                        input=input_kind, results_dir=out.parent if out else None, deterministic=deterministic,
                        nan_guard_dir=nan_guard_dir)
    try:
        r = run_e2e(data, cfg, sopts, steps, repeats, warmup, predict=not no_predict, sync_each_step=sync_each_step)
    except NonFiniteError as e:
        raise UserError(str(e)) from None
    if out:
        records.append(out, r)
    report.print_e2e(r)


@cli.command("profile")
@click.argument("data", required=False)
@loader_options
@step_options
@click.option("--out-dir", type=click.Path(path_type=Path), default=Path("results/profile"), show_default=True)
@click.option("--top", type=int, default=15, show_default=True, help="rows of the top-ops table")
@click.option("--nsys", is_flag=True, help="also run under Nsight Systems (nsys) and save its report")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="append the record to this .jsonl")
def profile_cmd(data, model, seq_len, device, optimizer, amp, input_kind, deterministic, out_dir, top, nsys, out,
                **loader) -> None:
    """torch.profiler (wait=1, warmup=1, active=3) around the fed loop: Chrome trace, top ops, time split."""
    from dataperf import preflight, records, report
    from dataperf.profile import nsys_wrap, run_profile
    from dataperf.step import StepOptions

    preflight.writable_file(out, "--out")
    preflight.writable_dir(out_dir, "--out-dir")
    data = resolve_data(data, loader["dataset_factory"])[0]
    cfg = make_config(data, device=device, **loader)
    preflight.check_fed(data, cfg, model, input_kind)
    sopts = StepOptions(model=model, seq_len=seq_len, device=device, optimizer=optimizer, amp=amp,
                        input=input_kind, deterministic=deterministic)
    r = run_profile(data, cfg, sopts, out_dir, top)
    if nsys:
        _, r.nsys = nsys_wrap(sys.argv[1:], out_dir)
    if out:
        records.append(out, r)
    report.print_profile(r)


@cli.command()
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("head", type=click.Path(path_type=Path))
@click.option("--metrics", callback=str_list, default="step_ms,peak_mem_mib,samples_per_s", show_default=True,
              help="comma list: samples_per_s, epoch_samples_per_s, step_ms, peak_mem_mib, payload_mib_s, "
                   "storage_read_mib_s, data_stall_fraction")
@click.option("--threshold", default="5%", show_default=True, help="smallest change that counts")
def compare(base, head, metrics, threshold) -> None:
    """Base vs head result files: medians, % change, noise-aware verdict; exit 1 on a regression."""
    from dataperf import compare as cmp
    from dataperf import report

    changes = cmp.compare(base, head, metrics, cmp.parse_threshold(threshold))
    report.print_env_differences(cmp.env_differences(base, head))
    report.print_compare(changes, threshold)
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
    from dataperf import preflight, records, report
    from dataperf.lengths import analyse, measure_cap_memory
    from dataperf.step import StepOptions

    preflight.writable_file(out, "--out")
    if model:
        preflight.check_model(model, "tokens", "tokens")
    r = analyse(data, batch_size, cap)
    if model:
        measure_cap_memory(r, StepOptions(model=model, device=device, steps=2, warmup=1))
    if out:
        records.append(out, r)
    report.print_lengths(r)


@cli.command()
@click.argument("data", required=False)
@loader_options
@step_options
@click.option("--throttle-mib-s", type=float, default=None,
              help="simulate slow storage for the cold measurement (MiB/s per reader)")
@click.option("--page-cache-gib", type=float, default=None, help="what-if: predicted stall with this much cache")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="append the record to this .jsonl")
@trial_options
def diagnose(data, model, seq_len, device, optimizer, amp, input_kind, deterministic, throttle_mib_s,
             page_cache_gib, out, repeats, warmup_batches, max_batches, min_batches, drop_caches, no_collect, ebpf,
             seed, **loader) -> None:
    """Where data stalls come from: prep (CPU decode) vs fetch (storage), as shares of step time."""
    from dataperf import preflight, records, report
    from dataperf.diagnose import diagnose as run_diagnose
    from dataperf.step import StepOptions

    preflight.writable_file(out, "--out")
    data = resolve_data(data, loader["dataset_factory"])[0]
    cfg = make_config(data, device=device, **loader)
    preflight.check_fed(data, cfg, model, input_kind)
    sopts = StepOptions(model=model, seq_len=seq_len, device=device, optimizer=optimizer, amp=amp,
                        input=input_kind, deterministic=deterministic, seed=seed)
    topts = make_opts(repeats, warmup_batches, max_batches, min_batches, drop_caches, no_collect, ebpf, seed)
    r = run_diagnose(data, cfg, sopts, topts, throttle_mib_s, page_cache_gib)
    if out:
        records.append(out, r)
    report.print_diagnose(r)


@cli.command()
@click.argument("data", required=False)
@data_options
@click.option("--target-samples-per-s", type=float, default=None, help="the rate to sustain")
@click.option("--model", default=None, help="target = this model's step rate x --headroom")
@click.option("--seq-len", type=int, default=512, show_default=True)
@click.option("--device", default="cpu", show_default=True)
@model_options
@click.option("--headroom", type=float, default=1.2, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["auto", "files", "webdataset"]), default="auto")
@click.option("--batch-size", type=int, default=32, show_default=True, help="starting batch size")
@click.option("--decode/--no-decode", default=True, show_default=True)
@click.option("--image-size", type=int, default=224, show_default=True)
@click.option("--cache", type=click.Choice(["warm", "cold"]), default="cold", show_default=True)
@click.option("--min-gain", type=float, default=0.10, show_default=True, help="smallest gain worth a step")
@click.option("--max-workers", type=int, default=None, help="[2 x cores]")
@click.option("--out", type=click.Path(path_type=Path), default=Path("results/tune.jsonl"), show_default=True)
@trial_options
def tune(data, dataset_factory, transform, target_samples_per_s, model, seq_len, device, optimizer, amp, input_kind,
         headroom, fmt, batch_size, decode, image_size, cache,
         min_gain, max_workers, out, **topts) -> None:
    """Find a config that sustains a target (or the model's step rate with headroom) without the whole grid."""
    from dataperf import preflight, records, report
    from dataperf.records import LoaderConfig
    from dataperf.tune import Tuner

    if (target_samples_per_s is None) == (model is None):
        raise UserError("give exactly one of --target-samples-per-s or --model")
    if target_samples_per_s is not None and not target_samples_per_s > 0:
        raise UserError(f"--target-samples-per-s must be a positive rate, got {target_samples_per_s}")
    if not headroom > 0:
        raise UserError(f"--headroom must be positive, got {headroom}")
    if max_workers is not None:
        preflight.check_workers(max_workers, "--max-workers")
    preflight.check_image_side(image_size)
    preflight.writable_file(out, "--out")
    topts_ = make_opts(raw_dir=out.parent / "raw", **topts)
    if model:
        preflight.check_model(model, seq_len=seq_len if model.startswith("gpt") else None)
    data = resolve_data(data, dataset_factory)[0]
    _check_transform(transform)
    target = target_samples_per_s
    if model:
        from dataperf.step import StepOptions, measure_step

        st = measure_step(StepOptions(model=model, batch_size=batch_size, seq_len=seq_len, device=device,
                                      image_size=image_size, optimizer=optimizer, amp=amp, input=input_kind))
        records.append(out, st)
        target = st.samples_per_s * headroom
        report.console.print(f"target: {target:.0f} samples/s ({model} step {st.samples_per_s:.0f} x {headroom:g})")
    if fmt == "auto":
        fmt = data.format
    windows = data.format in ("tokens-bin", "npy")
    base = LoaderConfig(format=fmt, batch_size=batch_size, decode=decode, image_size=image_size, cache=cache,
                        transform=transform, seq_len=seq_len if windows else None)

    def show(step):
        records.append(out, step.result)
        report.print_tune_step(step)

    outcome = Tuner(data, base, topts_, target, min_gain, max_workers,
                    on_trial=show).run()
    report.print_tune(outcome)
    if not outcome.met and target is not None:
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
    from dataperf import records, report
    from dataperf.memory import measure_memory

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
    report.print_memory(rows)
    report.console.print(f"results: {out}")


@cli.command("report")
@click.argument("results", type=click.Path(path_type=Path))
@click.option("--headroom", type=float, default=1.2, show_default=True)
@click.option("--plot", type=click.Path(path_type=Path), default=None, help="heatmap PNG")
def report_cmd(results, headroom, plot) -> None:
    """Tables, heatmap and the input-bound verdict from a saved results file."""
    from dataperf import preflight, records, report

    preflight.writable_file(plot, "--plot")
    recs = records.current(records.load(results))
    if not recs:
        raise UserError(f"{results} holds no records; run `dataperf sweep --out {results}` first")
    step = report.latest_step(recs)
    report.print_env(recs)
    printers = {"e2e": report.print_e2e, "lengths": report.print_lengths, "profile": report.print_profile,
                "diagnose": report.print_diagnose}
    for r in recs:
        if r.kind in printers and r.status == "ok":
            printers[r.kind](r)
    if any(r.kind == "watch" for r in recs):
        report.print_watch(recs)
    loaders = [r for r in recs if r.kind == "loader"]
    if loaders:
        report.console.print(report.loader_table(recs, step, headroom))
    report.print_failures(recs)
    for line in [report.idle_warning(recs), *report.verdict_caveats(recs, step)]:
        if line:
            report.console.print(line)
    if step is not None:
        report.print_step(step)
    mem = [r for r in recs if r.kind == "memory"]
    if mem:
        report.print_memory(mem)
    if plot:
        png = report.heatmap(recs, plot)
        report.console.print(f"heatmap: {png}" if png else "no heatmap: no successful webdataset/files trials")
    if loaders:
        report.console.print(report.recommendation(recs, step, headroom))


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
    from dataperf import records, report
    from dataperf.watch import launch, results

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
    with report.to_stderr():
        report.print_watch(recs)
        report.console.print(f"results: {out} ({len(recs)} watch record(s)); per-step hook lines: {w.hook_dir}")
    if w.exit_code is not None:
        sys.exit(w.exit_code)


def main() -> None:
    cli(prog_name="dataperf")
