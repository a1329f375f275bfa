"""Data too small for the batch size asked: refused before measuring, naming a batch size that works (issue 53:
120 images at the default batch of 32 failed every trial after 29 s), and a trial whose data ran out never
names a --max-batches the epoch cannot reach."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dataperf.cli import cli


@pytest.fixture(scope="module")
def imagenet120(tmp_path_factory):
    """120 ImageNet-style `.JPEG`s in 4 class folders, written by PIL."""
    from PIL import Image

    root = tmp_path_factory.mktemp("small") / "train"
    for c in range(4):
        (root / f"n0{c}").mkdir(parents=True)
        for i in range(30):
            Image.new("RGB", (24, 20), (i, c, 0)).save(root / f"n0{c}" / f"n0{c}_{i}.JPEG", "JPEG")
    return root


@pytest.mark.parametrize("command", [["bench"], ["sweep"], ["tune"]])
def test_a_batch_too_big_for_the_data_is_refused_before_measuring(imagenet120, tmp_path, command):
    r = CliRunner().invoke(cli, [*command, str(imagenet120), "--batch-size", "32", "--out",
                                 str(tmp_path / "r.jsonl")])
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1 and r.output.startswith("error: ")
    assert "holds 120 samples: 4 batches of 32 an epoch, fewer than the 5 a trial measures" in r.output
    assert r.output.rstrip().endswith("use --batch-size 24 or smaller")
    assert not (tmp_path / "r.jsonl").exists()


def test_too_many_workers_for_the_data_name_the_batch_size_or_fewer_workers(imagenet120):
    r = CliRunner().invoke(cli, ["bench", str(imagenet120), "--batch-size", "16", "--num-workers", "4"])
    assert r.exit_code == 2, r.output
    assert "8 batches of 16 an epoch, fewer than the 12 a trial measures (3 for each of 4 workers)" in r.output
    assert "use --batch-size 10 or smaller, or fewer workers (--batch-size 24 or smaller at 0 or 1)" in r.output


@pytest.mark.slow
def test_workers_whose_data_ran_out_are_not_told_to_raise_max_batches(imagenet120):
    """A sweep's w=4 trial on an 8-batch epoch: the fix named is one the data allows (the review saw
    `--max-batches 12 or more` for an 8-batch epoch)."""
    from dataperf.data import resolve
    from dataperf.measure.trial import TrialOptions, run_trial
    from dataperf.results import LoaderConfig

    cfg = LoaderConfig(backend="files", batch_size=16, num_workers=4, decode=True, image_size=16)
    r = run_trial(resolve(str(imagenet120)), cfg, TrialOptions(repeats=1, warmup_batches=0, collect=False))
    assert r.status == "failed" and "--max-batches" not in r.error, r.error
    assert "the data held 8 batches of 16 a repeat: --batch-size 10 or smaller" in r.error


def test_the_refusal_says_what_was_left_out(tmp_path):
    """32 JPEGs beside 64 .bmp/.tif files: the refusal at batch 8 names the 64 left out (the review's 37b: the
    cause was hidden)."""
    from PIL import Image

    root = tmp_path / "train" / "n01"
    root.mkdir(parents=True)
    for i in range(32):
        Image.new("RGB", (8, 8)).save(root / f"{i}.JPEG", "JPEG")
    for i in range(32):
        Image.new("RGB", (8, 8)).save(root / f"b{i}.bmp")
        Image.new("RGB", (8, 8)).save(root / f"t{i}.tif")
    r = CliRunner().invoke(cli, ["bench", str(tmp_path / "train"), "--batch-size", "8"])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "holds 32 samples (left out: 64 files that are not jpg/jpeg/png/webp images" in r.output
