import hashlib
import io
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import webdataset as wds
from click.testing import CliRunner
from PIL import Image

from dataperf.cli import cli
from dataperf.data.make import generate
from dataperf.data.make.generate import ImageSpec, TokenSpec, samples, token_lengths, write_dataset
from dataperf.data.manifest import read_manifest
from dataperf.errors import UserError


def read_shards(root):
    m = read_manifest(root)
    ds = wds.WebDataset([str(root / s) for s in m.shards], shardshuffle=False, empty_check=False)
    return list(ds)


def test_webdataset_round_trip_every_sample(tmp_path):
    spec = ImageSpec(48, 32, 80)
    m = write_dataset(tmp_path / "d", "image", "webdataset", 30, seed=3, image=spec, shard_mb=0.02)
    got = read_shards(tmp_path / "d")
    want = list(samples("image", 30, 3, spec, TokenSpec()))
    assert len(got) == len(want) == m.count == 30
    for g, w in zip(got, want, strict=True):
        assert g["__key__"] == w.key
        assert g["jpg"] == w.payload
        assert int(g["cls"]) == w.label
    assert len(m.shards) > 1, "a 0.02 MB target must split 30 JPEGs over several shards"
    assert m.total_bytes == sum(len(w.payload) for w in want)


def test_jpegs_are_real_and_not_blank(tmp_path):
    write_dataset(tmp_path / "d", "image", "files", 4, seed=0, image=ImageSpec(40, 24, 90))
    m = read_manifest(tmp_path / "d")
    for name in m.files:
        img = Image.open(tmp_path / "d" / name)
        assert img.format == "JPEG" and img.size == (40, 24)
        arr = np.asarray(img)
        assert arr.std() > 10


def test_token_lengths_have_a_long_tail():
    lengths = token_lengths(np.random.default_rng(0), TokenSpec(median_len=512, sigma=0.9), 20000)
    p50, p99 = np.percentile(lengths, [50, 99])
    assert 450 < p50 < 580
    assert p99 > 5 * p50


def test_token_samples_round_trip_through_shards(tmp_path):
    spec = TokenSpec(median_len=32, max_len=300)
    m = write_dataset(tmp_path / "t", "tokens", "webdataset", 20, seed=5, tokens=spec, shard_mb=0.01)
    got = read_shards(tmp_path / "t")
    assert [len(np.load(io.BytesIO(g["npy"]))) for g in got] == m.token_lengths
    arr = np.load(io.BytesIO(got[0]["npy"]))
    assert arr.dtype == np.int32 and arr.max() < spec.vocab
    assert b"length" in got[0]["json"]


def digest(root):
    h = hashlib.sha256()
    for p in sorted(root.glob("*.tar")):
        h.update(p.read_bytes())
    return h.hexdigest()


def test_deterministic_given_seed(tmp_path):
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        write_dataset(tmp_path / name, "tokens", "webdataset", 10, seed=seed, shard_mb=0.01)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert digest(tmp_path / "a") != digest(tmp_path / "c")


@pytest.mark.parametrize("count", [0, -3])
def test_bad_counts_rejected(tmp_path, count):
    with pytest.raises(UserError, match="--count"):
        write_dataset(tmp_path / "d", "image", "files", count)


def test_non_empty_output_needs_overwrite(tmp_path):
    write_dataset(tmp_path / "d", "image", "files", 2)
    with pytest.raises(UserError, match="--overwrite"):
        write_dataset(tmp_path / "d", "image", "files", 3)
    m = write_dataset(tmp_path / "d", "image", "files", 3, overwrite=True)
    assert read_manifest(tmp_path / "d").count == m.count == 3
    assert len(list((tmp_path / "d").glob("*.jpg"))) == 3


def test_crash_mid_write_leaves_nothing_that_looks_finished(tmp_path, monkeypatch):
    real = generate.samples

    def exploding(*a, **k):
        for i, s in enumerate(real(*a, **k)):
            if i == 5:
                raise RuntimeError("disk on fire")
            yield s

    monkeypatch.setattr(generate, "samples", exploding)
    with pytest.raises(RuntimeError):
        write_dataset(tmp_path / "d", "image", "webdataset", 20)
    assert list(tmp_path.iterdir()) == []


# --- shards make: parameters, out folders and manifests it refuses ---------------------------------------------

def _make(args):
    from click.testing import CliRunner

    from dataperf.cli import cli

    return CliRunner().invoke(cli, ["shards", "make", *map(str, args)])


def test_token_generation_parameters_out_of_range_are_refused(tmp_path):
    for args, needle in ((["--vocab", "0"], "--vocab"), (["--sigma", "-1"], "--sigma")):
        r = _make(["--kind", "tokens", "--count", "10", *args, "--out", tmp_path / "m1"])
        assert r.exit_code == 2 and r.output.startswith(f"error: {needle}"), r.output


def test_a_dangling_symlink_as_out_is_refused_up_front(tmp_path):
    (tmp_path / "dangling").symlink_to(tmp_path / "nonexistent")
    r = _make(["--count", "10", "--image-size", "16", "--out", tmp_path / "dangling"])
    assert r.exit_code == 2 and "dangling symlink" in r.output
    assert [p.name for p in tmp_path.iterdir()] == ["dangling"]


def test_datasets_follow_the_umask(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        r = _make(["--count", "4", "--image-size", "16", "--out", tmp_path / "p18"])
    finally:
        os.umask(old)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "p18").stat().st_mode & 0o777 == 0o755


def test_a_manifest_with_extra_keys_is_read_and_a_newer_version_or_wrong_types_refused(tmp_path, datasets):
    import json
    import shutil

    import pytest

    from dataperf.data.manifest import read_manifest
    from dataperf.errors import UserError

    d = tmp_path / "man"
    shutil.copytree(datasets["image-webdataset"], d)
    mp = d / "manifest.json"
    orig = json.loads(mp.read_text())
    mp.write_text(json.dumps({**orig, "added_by_a_newer_version": 1}))
    assert read_manifest(d).count == orig["count"]  # extra keys are not damage
    mp.write_text(json.dumps({**orig, "manifest_version": 99}))
    with pytest.raises(UserError, match="manifest_version 99"):
        read_manifest(d)
    mp.write_text(json.dumps({**orig, "shards": "shard-000000.tar"}))
    with pytest.raises(UserError, match="shards must be a list of str"):
        read_manifest(d)


def test_a_dataset_larger_than_the_free_disk_is_refused_before_writing(tmp_path):
    import shutil

    free = shutil.disk_usage(tmp_path).free
    count = free // 3000 + 1  # each shard sample takes at least three 1 KiB-aligned tar members
    with pytest.raises(UserError, match="GiB free"):
        write_dataset(tmp_path / "big", "image", "webdataset", count, image=ImageSpec(16, 16, 90))
    assert not any(tmp_path.iterdir())


def make(*args: str):
    """`dataperf shards make` as a person runs it."""
    return CliRunner().invoke(cli, ["shards", "make", *args])


def one_error(r, *needles: str) -> str:
    assert r.exit_code == 2, r.output
    errs = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(errs) == 1 and "Traceback" not in r.output, r.output
    for n in needles:
        assert n in errs[0], errs[0]
    return errs[0]


@pytest.mark.parametrize("side", ["0", "-16"])
def test_image_size_zero_or_negative_is_refused(tmp_path, side):
    one_error(make("--count", "4", "--image-size", side, "--out", str(tmp_path / "m")), "--image-size", side)
    assert not (tmp_path / "m").exists()


def test_missing_parent_folders_are_made(tmp_path):
    out = tmp_path / "mk2" / "a" / "b"
    r = make("--count", "4", "--image-size", "16", "--format", "files", "--out", str(out))
    assert r.exit_code == 0, r.output
    assert read_manifest(out).count == 4


def test_a_file_in_the_way_is_named(tmp_path):
    (tmp_path / "afile").write_text("x")
    one_error(make("--count", "4", "--image-size", "16", "--out", str(tmp_path / "afile" / "a" / "b")),
              f"{tmp_path / 'afile'}", "is a file, not a folder")


@pytest.fixture
def tmpfs(tmp_path):
    """A 2 MiB tmpfs (mounting needs root), read-only on request: a small or read-only disk as users have."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = []

    def mount(*opts: str) -> Path:
        d = tmp_path / f"fs{len(mounted)}"
        d.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(["size=2m", *opts]), "tmpfs", str(d)], check=True)
        mounted.append(d)
        return d

    yield mount
    for d in mounted:
        subprocess.run(["umount", str(d)], check=False)


def test_a_read_only_disk_is_named_as_one(tmpfs):
    ro = tmpfs("ro")
    one_error(make("--count", "4", "--image-size", "16", "--out", str(ro / "a" / "b")), f"cannot write under {ro}",
              "read-only file system")


def test_disk_space_below_a_gib_is_said_in_mib(tmpfs):
    small = tmpfs()
    err = one_error(make("--count", "2000", "--image-size", "32", "--out", str(small / "big")), "MiB")
    assert "0.0 GiB" not in err and "needs at least 6.5 MiB" in err and "2.0 MiB free" in err, err
    assert [generate.size_text(n) for n in (512, 3 * 2**20, 5 * 2**30)] == ["0.5 KiB", "3.0 MiB", "5.0 GiB"]


@pytest.mark.parametrize("fmt, says", [("parquet", "says format 'parquet',"),
                                       ("files", "says format 'files' but its 'files' list is empty")])
def test_a_manifest_whose_format_does_not_match_the_files_says_so(tmp_path, datasets, fmt, says):
    import json
    import shutil

    d = tmp_path / "mf"
    shutil.copytree(datasets["image-webdataset"], d)
    m = json.loads((d / "manifest.json").read_text())
    shards = len(m["shards"])
    (d / "manifest.json").write_text(json.dumps({**m, "format": fmt}))
    for args in (["bench", str(d), "--repeats", "1", "--no-collect"], ["shards", "inspect", str(d)]):
        err = one_error(CliRunner().invoke(cli, args), f"{d / 'manifest.json'} {says}", f"{shards} .tar files")
        assert "batches per repeat" not in err
