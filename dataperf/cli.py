"""Click commands only: parse options, call the package, hand results to report. No logic lives here."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click

from dataperf.errors import UserError


def user_errors(fn):
    """Turn UserError into one clear line on stderr and exit code 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(e.exit_code)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
@click.option("--image-size", type=int, default=256, show_default=True, help="JPEG width and height in pixels")
@click.option("--quality", type=click.IntRange(1, 100), default=90, show_default=True, help="JPEG quality")
@click.option("--median-len", type=int, default=512, show_default=True, help="median token sequence length")
@click.option("--sigma", type=float, default=0.9, show_default=True, help="lognormal shape of token lengths")
@click.option("--min-len", type=int, default=8, show_default=True)
@click.option("--max-len", type=int, default=8192, show_default=True)
@click.option("--vocab", type=int, default=32000, show_default=True)
@click.option("--overwrite", is_flag=True, help="replace a non-empty output folder")
@user_errors
def shards_make(kind, fmt, count, out, seed, shard_mb, image_size, quality, median_len, sigma, min_len, max_len,
                vocab, overwrite) -> None:
    """Generate a synthetic dataset: JPEG images or token sequences with a long-tailed length distribution."""
    from dataperf import report
    from dataperf.formats.generate import ImageSpec, TokenSpec, write_dataset

    out = out or Path("shards") / f"{kind}-{fmt}"
    with report.progress_bar(f"writing {count} {kind} samples", count) as advance:
        m = write_dataset(out, kind, fmt, count, seed,
                          ImageSpec(image_size, image_size, quality),
                          TokenSpec(median_len, sigma, min_len, max_len, vocab),
                          shard_mb, overwrite, advance)
    report.print_made(out, m)


@shards.command("convert")
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--shard-mb", type=float, default=64.0, show_default=True)
@click.option("--overwrite", is_flag=True, help="replace a non-empty output folder")
@user_errors
def shards_convert(src, out, shard_mb, overwrite) -> None:
    """Pack a folder of per-sample files (grouped by basename, like WebDataset keys) into tar shards."""
    from dataperf import report
    from dataperf.formats.convert import convert

    with report.progress_bar("packing", None) as advance:
        m = convert(src, out, shard_mb, overwrite, advance)
    report.print_made(out, m)


@shards.command("inspect")
@click.argument("data", type=click.Path(path_type=Path))
@user_errors
def shards_inspect(data) -> None:
    """Sample count, sizes and shard count; for tokens the length histogram and p99."""
    from dataperf import report
    from dataperf.formats.inspect import inspect_dataset

    report.print_inspection(inspect_dataset(data))


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


def trial_options(fn):
    """Options of how a trial measures, shared by bench, sweep and tune."""
    for opt in reversed([
        click.option("--repeats", type=int, default=3, show_default=True, help="measured repeats (>= 3)"),
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

    return TrialOptions(repeats=repeats, warmup_batches=warmup_batches, max_batches=max_batches,
                        min_batches=min_batches, drop_caches=drop_caches, collect=not no_collect, ebpf=ebpf,
                        raw_dir=raw_dir, seed=seed, **dist)


@cli.command()
@click.argument("data", required=False)
@data_options
@click.option("--format", "fmt", type=click.Choice(["auto", "files", "webdataset", "dali"]), default="auto",
              show_default=True, help="loader backend; auto = the dataset's own format")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--num-workers", type=int, default=0, show_default=True)
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
@trial_options
@user_errors
def bench(data, dataset_factory, transform, fmt, batch_size, num_workers, prefetch_factor, pin_memory,
          persistent_workers, decode, image_size, cap_tokens, seq_len, cache, dali_threads, dali_queue, dali_decode,
          out, **topts) -> None:
    """Time one DataLoader configuration: samples/s, MiB/s, time to first batch, batch-wait p50/p99."""
    from dataperf import records, report
    from dataperf.runner import run_trial

    data = resolve_data(data, dataset_factory)[0]
    cfg = make_config(data, fmt, batch_size, num_workers, prefetch_factor, pin_memory, persistent_workers,
                      image_size, cap_tokens, cache, dali_threads, dali_queue, dali_decode, decode=decode,
                      transform=transform, seq_len=seq_len)
    raw = out.parent / "raw" if out else None
    r = run_trial(data, cfg, make_opts(raw_dir=raw, **topts))
    if out:
        records.append(out, r)
    report.print_trial(r)
    if r.status != "ok":
        sys.exit(1)


@cli.command()
@click.argument("data", nargs=-1, required=False)
@data_options
@click.option("--config", "config_file", type=click.Path(path_type=Path), default=None,
              help="TOML/YAML file of sweep axes (overrides the axis options)")
@click.option("--format", "formats", callback=str_list, default="auto", show_default=True,
              help="comma list of backends: auto,files,webdataset,dali")
@click.option("--num-workers", callback=int_list, default=None, help="comma list [0,1,2,4,.. up to 2x cores]")
@click.option("--prefetch-factor", callback=int_list, default="2,4,8", show_default=True)
@click.option("--batch-size", callback=int_list, default="32", show_default=True)
@click.option("--pin-memory", type=click.Choice(["off", "on", "both"]), default="off", show_default=True)
@click.option("--persistent-workers", type=click.Choice(["off", "on", "both"]), default="off", show_default=True)
@click.option("--decode/--no-decode", default=False, show_default=True)
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
@trial_options
@user_errors
def sweep(data, dataset_factory, transform, config_file, formats, num_workers, prefetch_factor, batch_size,
          pin_memory, persistent_workers, decode, image_size, cap_tokens, cache, dali_threads, dali_queue,
          dali_decode, out, resume, overwrite, plot, model, model_batch_size, seq_len, device, optimizer, amp,
          input_kind, headroom, nproc, **topts) -> None:
    """Grid over loader settings; a table fastest first, a heatmap, a recommendation (and a verdict)."""
    from dataperf import distributed, report
    from dataperf import sweep as sw

    if nproc:
        sys.exit(distributed.launch_self(nproc, sys.argv[1:]))
    datas = resolve_data(data, dataset_factory)
    _check_transform(transform)
    windows = any(d.format in ("tokens-bin", "npy") for d in datas)
    both = {"off": [False], "on": [True], "both": [False, True]}
    grid = sw.Grid(formats=formats, num_workers=num_workers or sw.default_workers(),
                   prefetch_factor=prefetch_factor, batch_size=batch_size, pin_memory=both[pin_memory],
                   persistent_workers=both[persistent_workers], decode=[decode],
                   cache=["warm", "cold"] if cache == "both" else [cache], image_size=image_size,
                   cap_tokens=cap_tokens, transform=transform, seq_len=seq_len if windows else None,
                   dali_num_threads=dali_threads, dali_prefetch_queue_depth=dali_queue,
                   dali_decode_device=dali_decode)
    if config_file:
        grid, file_opts = sw.load_grid_file(config_file)
        topts.update(file_opts)
    ctx = distributed.init_from_env()
    trials = sw.plan(datas, grid)
    if ctx.rank == 0:
        sw.prepare_out(out, resume, overwrite)
    if ctx.barrier:
        ctx.barrier()  # no rank reads --out before rank 0 has cleared it
    skip = sw.finished_ids(out) if resume else set()
    opts = make_opts(raw_dir=out.parent / "raw", **topts, rank=ctx.rank, world_size=ctx.world_size,
                     barrier=ctx.barrier, gather=ctx.gather)
    try:
        with report.progress_bar(f"sweep ({len(trials)} trials)", len(trials), enabled=ctx.rank == 0) as advance:
            results = sw.run_sweep(trials, opts, out, skip, on_result=lambda r: advance(1))
    except KeyboardInterrupt:
        kept = len(sw.finished_ids(out)) if ctx.rank == 0 else 0
        click.echo(f"interrupted: {kept} finished trials are kept in {out}; run the same command with --resume "
                   "to skip them", err=True)
        sys.exit(130)
    ctx.close()
    if ctx.rank != 0:
        return
    from dataperf import records

    step = None
    if model:
        from dataperf.step import StepOptions, measure_step

        step = measure_step(StepOptions(model=model, batch_size=model_batch_size or batch_size[0],
                                        seq_len=seq_len, device=device, image_size=image_size,
                                        optimizer=optimizer, amp=amp, input=input_kind))
        records.append(out, step)
    all_results = records.load(out)
    report.console.print(report.loader_table(all_results, step, headroom))
    report.print_failures(all_results)
    png = report.heatmap(all_results, plot or out.with_suffix(".png"))
    if png:
        report.console.print(f"heatmap: {png}")
    report.console.print(report.recommendation(all_results, step, headroom))
    report.console.print(f"results: {out} ({len(results)} new trials)")


def step_options(fn):
    """Options that describe the model step, shared by step, e2e, profile, diagnose and tune."""
    for opt in reversed([
        click.option("--model", default="gpt-small", show_default=True,
                     help="gpt-small | gpt-tiny | cnn-small | MODULE:FACTORY"),
        click.option("--seq-len", type=int, default=512, show_default=True),
        click.option("--device", default="cpu", show_default=True, help="cpu | cuda | cuda:N"),
        click.option("--optimizer", type=click.Choice(["adamw", "adam8bit", "adamw-cpu-offload", "zero"]),
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
@click.option("--repeats", type=int, default=3, show_default=True)
@click.option("--steps", type=int, default=10, show_default=True, help="timed steps per repeat")
@click.option("--warmup", type=int, default=3, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="append the record to this .jsonl")
@user_errors
def step(model, seq_len, device, optimizer, amp, input_kind, deterministic, batch_size, image_size, repeats, steps,
         warmup, out) -> None:
    """Median ms/step, samples/s and peak memory of a real train step on synthetic in-memory data."""
    from dataperf import records, report
    from dataperf.step import StepOptions, measure_step

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
        click.option("--format", "fmt", type=click.Choice(["auto", "files", "webdataset", "dali"]), default="auto",
                     show_default=True),
        click.option("--batch-size", type=int, default=32, show_default=True),
        click.option("--num-workers", type=int, default=2, show_default=True),
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
    ]):
        fn = opt(fn)
    return fn


def _check_transform(transform: str | None) -> None:
    from dataperf.sources import transforms

    transforms.check(transform)


def make_config(data, fmt, batch_size, num_workers, prefetch_factor, pin_memory, persistent_workers, image_size,
                cap_tokens, cache, dali_threads, dali_queue, dali_decode, device="cpu", decode=True, transform=None,
                seq_len=None, dataset_factory=None):
    """One LoaderConfig from the options; `data` is the resolved sources.Data (its format is what auto means)."""
    from dataperf.records import LoaderConfig

    _check_transform(transform)
    if fmt == "auto":
        fmt = data.format
    dali = fmt == "dali"
    return LoaderConfig(format=fmt, batch_size=batch_size, num_workers=0 if dali else num_workers,
                        prefetch_factor=None if dali else prefetch_factor,
                        pin_memory=str(device).startswith("cuda") if pin_memory is None else pin_memory,
                        persistent_workers=persistent_workers and not dali, decode=decode, cache=cache,
                        image_size=image_size, cap_tokens=cap_tokens, transform=transform, seq_len=seq_len,
                        dali_num_threads=dali_threads if dali else None,
                        dali_prefetch_queue_depth=dali_queue if dali else None,
                        dali_decode_device=dali_decode if dali else None)


@cli.command()
@click.argument("data", required=False)
@loader_options
@step_options
@click.option("--steps", type=int, default=20, show_default=True, help="fed steps per repeat")
@click.option("--repeats", type=int, default=3, show_default=True)
@click.option("--warmup", type=int, default=3, show_default=True)
@click.option("--no-predict", is_flag=True, help="skip the separate loader and step measurements")
@click.option("--nan-guard", "nan_guard_dir", type=click.Path(path_type=Path), default=None,
              help="check every step for NaN/inf; checkpoint into this folder and stop on the first")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="append the record to this .jsonl")
@user_errors
def e2e(data, model, seq_len, device, optimizer, amp, input_kind, deterministic, steps, repeats, warmup, no_predict,
        nan_guard_dir, out, **loader) -> None:
    """The loader feeding the real step: data-wait vs compute per step, and the data-stall fraction."""
    from dataperf import records, report
    from dataperf.e2e import run_e2e
    from dataperf.step import StepOptions

    data = resolve_data(data, loader["dataset_factory"])[0]
    cfg = make_config(data, device=device, **loader)
    from dataperf.guards import NonFiniteError

    sopts = StepOptions(model=model, seq_len=seq_len, device=device, optimizer=optimizer, amp=amp,
                        input=input_kind, results_dir=out.parent if out else None, deterministic=deterministic,
                        nan_guard_dir=nan_guard_dir)
    try:
        r = run_e2e(data, cfg, sopts, steps, repeats, warmup, predict=not no_predict)
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
@user_errors
def profile_cmd(data, model, seq_len, device, optimizer, amp, input_kind, deterministic, out_dir, top, nsys, out,
                **loader) -> None:
    """torch.profiler (wait=1, warmup=1, active=3) around the fed loop: Chrome trace, top ops, time split."""
    from dataperf import records, report
    from dataperf.profile import nsys_wrap, run_profile
    from dataperf.step import StepOptions

    data = resolve_data(data, loader["dataset_factory"])[0]
    cfg = make_config(data, device=device, **loader)
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
              help="comma list: samples_per_s, step_ms, peak_mem_mib, read_mib_s, data_stall_fraction")
@click.option("--threshold", default="5%", show_default=True, help="smallest change that counts")
@user_errors
def compare(base, head, metrics, threshold) -> None:
    """Base vs head result files: medians, % change, noise-aware verdict; exit 1 on a regression."""
    from dataperf import compare as cmp
    from dataperf import report

    changes = cmp.compare(base, head, metrics, cmp.parse_threshold(threshold))
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
@user_errors
def lengths(data, batch_size, cap, model, device, out) -> None:
    """Per-batch token-length histogram and p99 (OOM risk from length variance), and what --cap changes."""
    from dataperf import records, report
    from dataperf.lengths import analyse, measure_cap_memory
    from dataperf.step import StepOptions

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
@user_errors
def diagnose(data, model, seq_len, device, optimizer, amp, input_kind, deterministic, throttle_mib_s,
             page_cache_gib, out, repeats, warmup_batches, max_batches, min_batches, drop_caches, no_collect, ebpf,
             seed, **loader) -> None:
    """Where data stalls come from: prep (CPU decode) vs fetch (storage), as shares of step time."""
    from dataperf import records, report
    from dataperf.diagnose import diagnose as run_diagnose
    from dataperf.step import StepOptions

    data = resolve_data(data, loader["dataset_factory"])[0]
    cfg = make_config(data, device=device, **loader)
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
@user_errors
def tune(data, dataset_factory, transform, target_samples_per_s, model, seq_len, device, optimizer, amp, input_kind,
         headroom, fmt, batch_size, decode, image_size, cache,
         min_gain, max_workers, out, **topts) -> None:
    """Find a config that sustains a target (or the model's step rate with headroom) without the whole grid."""
    from dataperf import records, report
    from dataperf.records import LoaderConfig
    from dataperf.tune import Tuner

    if (target_samples_per_s is None) == (model is None):
        raise UserError("give exactly one of --target-samples-per-s or --model")
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

    outcome = Tuner(data, base, make_opts(raw_dir=out.parent / "raw", **topts), target, min_gain, max_workers,
                    on_trial=show).run()
    report.print_tune(outcome)
    if not outcome.met and target is not None:
        sys.exit(1)


@cli.command("report")
@click.argument("results", type=click.Path(path_type=Path))
@click.option("--headroom", type=float, default=1.2, show_default=True)
@click.option("--plot", type=click.Path(path_type=Path), default=None, help="heatmap PNG")
@user_errors
def report_cmd(results, headroom, plot) -> None:
    """Tables, heatmap and the input-bound verdict from a saved results file."""
    from dataperf import records, report

    recs = records.load(results)
    step = report.latest_step(recs)
    report.console.print(report.loader_table(recs, step, headroom))
    report.print_failures(recs)
    if step is not None:
        report.print_step(step)
    if plot:
        report.heatmap(recs, plot)
        report.console.print(f"heatmap: {plot}")
    report.console.print(report.recommendation(recs, step, headroom))


def main() -> None:
    cli(prog_name="dataperf")
