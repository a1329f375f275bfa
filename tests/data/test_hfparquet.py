"""Image Parquet as Hugging Face `datasets` writes it (an `image` struct of bytes and path, an integer `label`)
is read as images, not handed to the tokenizer (issue 29: it failed on a tiktoken
download)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dataperf.cli import cli
from dataperf.data import resolve
from dataperf.measure.trial import TrialOptions, run_trial, worker_cap
from dataperf.results import LoaderConfig
from tests.conftest import jpeg

ROWS, GROUP = 48, 8  # 2 files x 3 row groups of 8 rows


def write_hf(folder, rows=ROWS, group=GROUP, label="label"):
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    half = rows // 2
    for k in range(2):
        images = [{"bytes": jpeg(rng, 40, 30), "path": f"img{k}_{i}.jpg"} for i in range(half)]
        cols = {"image": images, label: list(range(k * half, (k + 1) * half))}
        pq.write_table(pa.table(cols), folder / f"train-0000{k}-of-00002.parquet", row_group_size=group)
    return folder


def test_image_parquet_is_image_data_with_row_groups_as_units(tmp_path):
    d = resolve(str(write_hf(tmp_path / "hf" / "data")))
    assert (d.kind, d.format, d.count) == ("image", "hf-parquet", ROWS)
    assert d.row_groups == [[8, 8, 8], [8, 8, 8]] and d.options["label"] == "label"
    assert worker_cap(d, 2) == 6  # 6 row groups: no more workers than have one
    assert d.summary() == "48 images from data/"


@pytest.mark.parametrize("workers, shuffle", [(0, False), (2, True)])
def test_every_row_is_read_once_an_epoch_and_decoded(tmp_path, workers, shuffle):
    d = resolve(str(write_hf(tmp_path / "hf")))
    cfg = LoaderConfig(backend="hf-parquet", batch_size=4, num_workers=workers, decode=True, image_size=16,
                       shuffle=shuffle)
    from dataperf.backends.dataloader import make_loader

    labels, shapes = [], set()
    for b in make_loader(d, cfg, TrialOptions()):
        labels += b["y"].tolist()
        shapes.add(tuple(b["x"].shape[1:]))
    assert sorted(labels) == list(range(ROWS)) and shapes == {(3, 16, 16)}
    assert (labels != list(range(ROWS))) == shuffle or workers  # shuffled order differs from storage order
    r = run_trial(d, cfg, TrialOptions(repeats=2, warmup_batches=1, min_batches=3, collect=False))
    assert r.status == "ok", r.error


def test_bench_reads_image_parquet_and_names_the_label_it_lacks(tmp_path):
    write_hf(tmp_path / "hf", label="caption_id_not_a_label")
    r = CliRunner().invoke(cli, ["bench", str(tmp_path / "hf"), "--decode", "--batch-size", "4", "--num-workers",
                                 "0", "--repeats", "1", "--repeat-seconds", "0.2"])
    assert r.exit_code == 0, r.output
    assert "data: 48 images from hf/" in r.output and "every sample is labelled 0" in r.output
    r = CliRunner().invoke(cli, ["bench", f"{tmp_path / 'hf'}#image=nope", "--decode"])
    assert r.exit_code == 2 and "has no column 'nope'" in r.output


def test_idle_workers_on_parquet_are_told_to_use_smaller_row_groups_not_tar_shards(tmp_path):
    """A worker reads whole row groups: 2 row groups for 3 workers leave one reading nothing, and the fix is more,
    smaller row groups (pyarrow's row_group_size), not tar shards (the 2026-12-06 usability review)."""
    d = resolve(str(write_hf(tmp_path / "hf", rows=48, group=24)))  # 2 files x 1 row group of 24 rows
    cfg = LoaderConfig(backend="hf-parquet", batch_size=4, num_workers=3, decode=True, image_size=16)
    r = run_trial(d, cfg, TrialOptions(repeats=2, warmup_batches=1, min_batches=3, collect=False))
    assert r.status == "ok" and r.active_workers == 2, (r.error, r.active_workers)
    (note,) = [n for n in r.notes if n.startswith("warning: idle workers")]
    assert "2 Parquet row groups for 3 workers" in note and "row_group_size=16" in note
    assert "shards convert" not in note
