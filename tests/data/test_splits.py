"""What DATA is read and what is left out: a folder of splits is read as its training split, stray files are named,
and folders another loader's writer made are refused with the reader that reads them (issue 29)."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from dataperf.cli import cli
from dataperf.data import resolve
from dataperf.data.local import split_of
from dataperf.data.manifest import read_manifest
from dataperf.errors import UserError
from tests.conftest import jpeg


def _image_folder(root, classes=("cat", "dog"), n=8, seed=0):
    rng = np.random.default_rng(seed)
    for c in classes:
        (root / c).mkdir(parents=True)
        for i in range(n):
            (root / c / f"{i}.jpg").write_bytes(jpeg(rng, 40, 32))
    return root


@pytest.mark.parametrize("name, split", [
    ("train", "train"), ("train.bin", "train"), ("imagenet-train-000000.tar", "train"),
    ("train-00000-of-00002.parquet", "train"), ("val", "other"), ("validation-00000-of-00001.parquet", "other"),
    ("val.bin", "other"), ("test", "other"), ("shard-000000.tar", None), ("cat", None), ("strain.bin", None),
])
def test_split_of_reads_the_name_only_where_it_says_a_split(name, split):
    assert split_of(name) == split


def test_a_folder_of_train_and_val_is_read_as_train_and_says_so(tmp_path):
    """Before: the parent of train/ and val/ was measured as one dataset of 152 images."""
    _image_folder(tmp_path / "train", n=8)
    _image_folder(tmp_path / "val", n=3, seed=1)
    d = resolve(str(tmp_path))
    assert d.count == 16 and d.classes == ["cat", "dog"]
    assert all("/train/" in f.path for f in d.files)
    assert d.summary() == "16 images in 2 classes from train/; left out: val/ (another split)"
    assert any("left out val/" in n for n in d.notes)  # carried into every trial's record


def test_nanogpt_folder_reads_train_bin_not_val_bin(tmp_path):
    rng = np.random.default_rng(0)
    rng.integers(0, 1000, 4096, dtype=np.uint16).tofile(tmp_path / "train.bin")
    rng.integers(0, 1000, 1024, dtype=np.uint16).tofile(tmp_path / "val.bin")
    (tmp_path / "meta.pkl").write_bytes(b"\x80\x04N.")
    d = resolve(str(tmp_path))
    assert [f.path.rsplit("/", 1)[1] for f in d.files] == ["train.bin"]
    assert "left out: val.bin (another split)" in d.summary()


def test_stray_files_in_an_image_folder_are_named_not_read(tmp_path):
    _image_folder(tmp_path, n=4)
    (tmp_path / "cat" / "Thumbs.db").write_bytes(b"\0" * 10)
    (tmp_path / "README.txt").write_text("hello")
    d = resolve(str(tmp_path))
    assert d.count == 8
    assert d.summary() == ("8 images in 2 classes from " + tmp_path.name + "/; left out: 2 files that are not "
                           "jpg/jpeg/png/webp images (README.txt, Thumbs.db)")


def test_litdata_and_mds_folders_without_their_reader_are_refused_naming_how_to_install_it(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",  # neither reader installed (streaming's own env has one)
                        lambda name, *a: None if name in ("litdata", "streaming") else real(name, *a))
    lit = tmp_path / "lit"
    lit.mkdir()
    (lit / "index.json").write_text(json.dumps({"chunks": [{"filename": "chunk-0-0.bin"}], "config": {}}))
    (lit / "chunk-0-0.bin").write_bytes(b"\1" * 1001)  # not a whole number of uint16 tokens: once misread
    with pytest.raises(UserError, match=r"LitData optimize\(\) output .*install_backends\.sh litdata"):
        resolve(str(lit))
    mds = tmp_path / "mds"
    mds.mkdir()
    (mds / "index.json").write_text(json.dumps({"version": 2, "shards": [{"format": "mds"}]}))
    (mds / "shard.00000.mds").write_bytes(b"\0" * 100)
    r = CliRunner().invoke(cli, ["bench", str(mds)])
    assert r.exit_code == 2 and r.output.count("\n") == 1
    assert "MosaicML MDS dataset" in r.output and "streaming_env.sh" in r.output


def _lit_sample(i: int) -> dict:
    import io

    from PIL import Image

    b = io.BytesIO()
    Image.fromarray(np.full((16, 16, 3), i % 255, np.uint8)).save(b, format="JPEG")
    return {"image": b.getvalue(), "class": i % 10}


def _benched_through(folder, reader: str, tmp_path) -> str:
    """Another loader's folder of 120 samples as DATA: resolved to that loader's reader, and benched through its
    StreamingDataset, every sample delivered each epoch: whole-epoch repeats (`--repeat-seconds 0`), since the
    default 5-s repeat cut one at 48 samples beside two busy loops (2026-12-06)."""
    d = resolve(str(folder))
    assert d.format == "user-dataset" and d.options == {"reader": reader}
    out = tmp_path / "r.jsonl"
    r = CliRunner().invoke(cli, ["bench", str(folder), "--num-workers", "2", "--batch-size", "8", "--repeats", "3",
                                 "--repeat-seconds", "0", "--no-collect", "--out", str(out)])
    assert r.exit_code == 0, r.output
    rec = json.loads(out.read_text().splitlines()[-1])
    assert rec["status"] == "ok" and rec["samples_per_repeat"] == 120, rec.get("error")
    assert f"read through {reader}.StreamingDataset" in r.output
    return r.output


@pytest.mark.slow
def test_a_litdata_folder_is_read_through_litdata(tmp_path):
    """Where litdata is installed, a user's optimize() output is benched through litdata.StreamingDataset, each
    sample as it gives it (issue 29): 120 samples an epoch, every one delivered."""
    litdata = pytest.importorskip("litdata", reason="litdata not installed")
    litdata.optimize(fn=_lit_sample, inputs=list(range(120)), output_dir=str(tmp_path / "lit"), chunk_bytes="1MB",
                     num_workers=1, start_method="fork")
    _benched_through(tmp_path / "lit", "litdata", tmp_path)


@pytest.mark.parametrize("encoding", ["bytes", "jpeg"])
def test_an_mds_folder_is_read_through_streaming(tmp_path, encoding):
    """Where mosaicml-streaming is installed (its own environment: bash scripts/streaming_env.sh), a user's MDS
    folder is benched through streaming.StreamingDataset, each sample as it gives it (issue 29): 120 samples an
    epoch, every one delivered. A `jpeg` column (MDS's documented image column: its reader gives PIL images,
    which torch's collate refused, issue 53) is made tensors as bench makes images, and `data:` says so."""
    streaming = pytest.importorskip("streaming", reason="mosaicml-streaming not installed: scripts/streaming_env.sh")
    from PIL import Image

    with streaming.MDSWriter(out=str(tmp_path / "mds"), columns={"image": encoding, "class": "int"}) as w:
        for i in range(120):
            s = _lit_sample(i)
            w.write(s if encoding == "bytes" else {**s, "image": Image.open(io.BytesIO(s["image"]))})
    out = _benched_through(tmp_path / "mds", "streaming", tmp_path)
    said = "120 images its reader decodes" if encoding == "jpeg" else "120 byte strings, timed undecoded"
    assert f"image: {said}" in out


def _lit_pil(i: int) -> dict:
    """A sample as LitData's docs write one: a PIL image and its class."""
    from PIL import Image

    return {"image": Image.fromarray(np.full((24, 20 + i % 3, 3), i % 255, np.uint8)), "class": i % 10}


def test_a_litdata_folder_of_pil_images_is_read_as_images(tmp_path):
    """optimize() of PIL images (LitData's documented way): `data:` counts the images and says they are made
    tensors; each sample the reader gives comes out a tensor at --image-size (torch's collate refused a PIL
    image, issue 53), its label beside it."""
    litdata = pytest.importorskip("litdata", reason="litdata not installed")
    from dataperf.backends.dataloader import make_dataset
    from dataperf.measure.trial import TrialOptions
    from dataperf.results import LoaderConfig

    litdata.optimize(fn=_lit_pil, inputs=list(range(16)), output_dir=str(tmp_path / "lit"), chunk_bytes="64KB",
                     num_workers=1, start_method="fork")
    d = resolve(str(tmp_path / "lit"))
    assert d.kind == "image" and d.count == 16
    assert d.summary(True) == ("16 images from lit/; image: 16 images its reader decodes, made tensors at "
                               "--image-size as bench makes images")
    cfg = LoaderConfig(backend="user-dataset", decode=True, image_size=16)
    sample = next(iter(make_dataset(d, cfg, TrialOptions())))
    assert tuple(sample["image"].shape) == (3, 16, 16) and sample["class"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pil", "bytes"])
def test_litdata_images_and_image_bytes_are_benched_decoded(tmp_path, kind):
    """bench on optimize() output, as the review ran it: PIL images are benched (label `decode`), and JPEG bytes
    with --decode are decoded, `data:` saying so with the count."""
    litdata = pytest.importorskip("litdata", reason="litdata not installed")
    litdata.optimize(fn=_lit_pil if kind == "pil" else _lit_sample, inputs=list(range(40)),
                     output_dir=str(tmp_path / "lit"), chunk_bytes="64KB", num_workers=1, start_method="fork")
    r = CliRunner().invoke(cli, ["bench", str(tmp_path / "lit"), "--decode", "--image-size", "16", "--batch-size",
                                 "8", "--repeats", "1", "--repeat-seconds", "0", "--no-collect"])
    assert r.exit_code == 0, r.output
    said = "40 images its reader decodes" if kind == "pil" else \
        "40 byte strings, decoded where they hold a JPEG/PNG/WebP image"
    assert f"image: {said}" in r.output and "bs=8 w=" in r.output and " decode " in r.output


def test_convert_leaves_out_files_that_belong_to_no_image_sample(tmp_path):
    """Before: Thumbs.db and README.txt became samples that every reader then refused."""
    src = _image_folder(tmp_path / "src", n=3)
    (src / "cat" / "Thumbs.db").write_bytes(b"\0" * 10)
    (src / "README.txt").write_text("hello")
    r = CliRunner().invoke(cli, ["shards", "convert", str(src), str(tmp_path / "out"), "--shards", "2"])
    assert r.exit_code == 0, r.output
    assert "wrote 6 image samples" in r.output
    assert "left out 2 files that belong to no image sample (README.txt, Thumbs.db)" in r.output
    assert read_manifest(tmp_path / "out").count == 6
    r = CliRunner().invoke(cli, ["shards", "inspect", str(tmp_path / "out"), "--verify"])
    assert r.exit_code == 0, r.output


def test_bench_prints_what_it_reads_and_what_it_left_out(tmp_path):
    _image_folder(tmp_path / "data" / "train", n=8)
    _image_folder(tmp_path / "data" / "val", n=2, seed=1)
    r = CliRunner().invoke(cli, ["bench", str(tmp_path / "data"), "--batch-size", "2", "--num-workers", "0",
                                 "--repeats", "1", "--repeat-seconds", "0.2"])
    assert r.exit_code == 0, r.output
    assert "data: 16 images in 2 classes from train/; left out: val/ (another split)" in r.output
    r = CliRunner().invoke(cli, ["bench", str(tmp_path / "data" / "train"), "--batch-size", "2", "--num-workers",
                                 "0", "--repeats", "1", "--repeat-seconds", "0.2"])
    assert "data: 16 images in 2 classes from train/\n" in r.output and "left out" not in r.output
    shutil.rmtree(tmp_path / "data" / "val")  # a lone train/ is not a split: an ImageFolder of one class
    assert resolve(str(tmp_path / "data")).summary() == "16 images in 1 class from data/"


@pytest.mark.slow
def test_dots_in_member_names_are_named_as_the_cause_by_bench_and_inspect(tmp_path):
    """Before: members n01440764_0.0002.jpg were refused with "has none of ('jpg', ...); keys:
    ['0002.cls', '0002.jpg']", the cause unnamed, and `shards inspect --verify` passed them."""
    import tarfile

    rng = np.random.default_rng(0)
    stage = tmp_path / "stage"
    stage.mkdir()
    names = []
    for i in range(12):
        (stage / f"n0144_{i}.0002.jpg").write_bytes(jpeg(rng, 32, 32))
        (stage / f"n0144_{i}.0002.cls").write_text("1")
        names += [f"n0144_{i}.0002.jpg", f"n0144_{i}.0002.cls"]
    shards = tmp_path / "dotted"
    shards.mkdir()
    with tarfile.open(shards / "train-0000.tar", "w") as tf:
        for n in names:
            tf.add(stage / n, arcname=n)
    r = CliRunner().invoke(cli, ["shards", "inspect", str(shards), "--verify"])
    assert r.exit_code == 2, r.output
    assert "hold a dot before the extension" in r.output and "'0002.jpg'" in r.output
    r = CliRunner().invoke(cli, ["bench", str(shards), "--decode", "--batch-size", "2", "--num-workers", "0",
                                 "--repeats", "1", "--repeat-seconds", "0.2"])
    assert r.exit_code == 2 and "hold a dot before the extension" in r.output, r.output
    assert "rename the tar members" in r.output
