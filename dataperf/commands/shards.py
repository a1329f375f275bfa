"""`dataperf shards make|convert|inspect`: the dataset tooling, and what each wrote or found."""

from __future__ import annotations

from pathlib import Path

import click

from dataperf.commands import _render
from dataperf.data.manifest import Manifest
from dataperf.errors import UserError
from dataperf.results import MIB


@click.group()
def shards() -> None:
    """Generate, convert and inspect datasets."""


@shards.command("make")
@click.option("--kind", type=click.Choice(["image", "tokens"]), default="image", show_default=True,
              help="JPEG images, or token sequences (.npy)")
@click.option("--format", "fmt", type=click.Choice(["files", "webdataset"]), default="webdataset", show_default=True,
              help="one file a sample, or WebDataset tar shards")
@click.option("--count", type=int, default=1000, show_default=True, help="number of samples")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="output folder [shards/KIND-FORMAT]")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the generated data")
@click.option("--shard-mb", type=float, default=64.0, show_default=True, help="target tar shard size, in MB")
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
@click.option("--min-len", type=int, default=8, show_default=True, help="shortest token sequence, in tokens")
@click.option("--max-len", type=int, default=8192, show_default=True, help="longest token sequence, in tokens")
@click.option("--vocab", type=int, default=32000, show_default=True, help="token ids drawn below this")
@click.option("--overwrite", is_flag=True, help="replace a non-empty output folder")
def shards_make(kind, fmt, count, out, like, image_size, **kw) -> None:
    """Generate a synthetic dataset: JPEG images (fixed-size, or --like imagenet) or token sequences with a
    long-tailed length distribution."""
    from dataperf.data.make.generate import ImageSpec, TokenSpec, generate_dataset

    if like and image_size is not None:
        raise UserError(f"--like {like} draws each image's size; drop --image-size")
    side = 256 if image_size is None else image_size  # 0 is a value to refuse, not "the default"
    out = out or Path("shards") / f"{kind}-{fmt}"
    tokens = TokenSpec(kw["median_len"], kw["sigma"], kw["min_len"], kw["max_len"], kw["vocab"])
    with _render.progress_bar(f"writing {count} {kind} samples", count) as advance:
        g = generate_dataset(out, kind, fmt, count, kw["seed"], ImageSpec(side, side, kw["quality"]), tokens,
                             kw["shard_mb"], kw["overwrite"], advance, shards=kw["n_shards"], like=like,
                             jobs=kw["jobs"])
    print_made(out, g.manifest, g)


@shards.command("convert")
@click.argument("src", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--shard-mb", type=float, default=64.0, show_default=True, help="target tar shard size, in MB")
@click.option("--shards", "n_shards", type=int, default=None,
              help="exact shard count instead of --shard-mb (at least workers x ranks: extra workers idle)")
@click.option("--overwrite", is_flag=True, help="replace a non-empty output folder")
def shards_convert(src, out, shard_mb, n_shards, overwrite) -> None:
    """Pack a folder of per-sample files (grouped by basename, like WebDataset keys) into tar shards."""
    from dataperf.data.make.convert import convert

    with _render.progress_bar("packing", None) as advance:
        m = convert(src, out, shard_mb, overwrite, advance, shards=n_shards)
    print_made(out, m)


@shards.command("inspect")
@click.argument("data")
@click.option("--verify", is_flag=True, help="decode every sample and list the bad ones (exit 2 if any)")
def shards_inspect(data, verify) -> None:
    """Sample count, sizes and shard count; for tokens the length histogram and p99. DATA: anything bench
    reads (a folder, shards, a glob or brace pattern, token or text files, image Parquet, a LitData or MDS
    folder), read as bench reads it."""
    from dataperf.workflows.inspect_data import inspect_spec

    ins = inspect_spec(data, verify)
    if ins.data is not None:
        _render.print_data([ins.data], verify)
    print_inspection(ins)
    if verify:
        _render.console.print(f"verified: {ins.count + len(ins.corrupt):,} samples decoded, {len(ins.corrupt)} bad")
    if ins.corrupt:
        for c in ins.corrupt:
            _render.console.print(f"corrupt: {c}")
        fix = "replace or remove those files" if ins.format == "files" else "regenerate or re-convert those shards"
        raise UserError(f"{len(ins.corrupt)} corrupt sample(s) in {data} (listed above); {fix}, or measure with "
                        "--on-corrupt skip")


def print_made(out: Path, m: Manifest, made=None) -> None:
    """What was written; with `made` (data.make.generate.Generated) also how fast, over its wall time."""
    extra = f", {len(m.shards)} shards" if m.format == "webdataset" else ""
    _render.console.print(f"wrote {m.count} {m.kind} samples ({m.total_bytes / MIB:.1f} MiB{extra}) to {out}")
    gen = m.generator or {}
    if classes := gen.get("class_names"):
        shown = ", ".join(classes[:3]) + (", ..." if len(classes) > 3 else "")
        _render.console.print(f"labels: {len(classes)} classes from the class folders ({shown}), as .cls")
    if splits := gen.get("splits_left_out"):
        _render.console.print(f"read {Path(gen['converted_from']).name}/ only; left out {', '.join(splits)}")
    if left := gen.get("left_out"):
        shown = ", ".join(left[:3]) + (", ..." if len(left) > 3 else "")
        _render.console.print(f"left out {len(left)} files that belong to no image sample ({shown})")
    if made is not None:
        unit = "images/s" if m.kind == "image" else "samples/s"
        _render.console.print(f"generated at {made.samples_per_s:.1f} {unit}, {made.mib_per_s:.1f} MiB/s "
                              f"({made.wall_s:.1f} s, {made.jobs} process{'es' if made.jobs > 1 else ''})")


def print_inspection(ins) -> None:
    """A dataset's figures and, for tokens, its length histogram."""
    from dataperf.data.make.inspect import length_histogram

    rows = [
        ("format", ins.format), ("kind", ins.kind), ("samples", str(ins.count)),
        ("total_mib", f"{ins.total_bytes / MIB:.2f}"), ("shards", str(ins.shard_count)),
        ("sample_bytes_mean", f"{ins.sample_bytes_mean:.0f}"), ("sample_bytes_p50", f"{ins.sample_bytes_p50:.0f}"),
        ("sample_bytes_p99", f"{ins.sample_bytes_p99:.0f}"),
    ]
    if ins.token_lengths:
        rows += [("tokens_p50", f"{ins.token_p50:.0f}"), ("tokens_p99", f"{ins.token_p99:.0f}"),
                 ("tokens_max", str(max(ins.token_lengths)))]
    _render.console.print(_render.figure_table(f"dataset {ins.path}", rows))
    if ins.token_lengths:
        _render.print_histogram("token length (tokens)", length_histogram(ins.token_lengths))
