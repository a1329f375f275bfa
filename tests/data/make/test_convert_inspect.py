import pytest
import webdataset as wds
from click.testing import CliRunner

from dataperf.cli import cli
from dataperf.data import resolve
from dataperf.data.make.inspect import inspect_dataset, length_histogram
from dataperf.data.manifest import read_manifest


def test_convert_groups_by_basename_and_round_trips(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    expected = {}
    for i in range(7):
        key = f"sub/s{i:03d}"
        (src / f"{key}.jpg").write_bytes(bytes([i]) * (100 + i))
        (src / f"{key}.cls").write_bytes(str(i % 3).encode())
        expected[key] = (bytes([i]) * (100 + i), str(i % 3).encode())
    r = CliRunner().invoke(cli, ["shards", "convert", str(src), str(tmp_path / "out"), "--shard-mb", "0.0003"])
    assert r.exit_code == 0, r.output
    m = read_manifest(tmp_path / "out")
    assert m.count == 7 and len(m.shards) >= 2
    got = list(wds.WebDataset([str(tmp_path / "out" / s) for s in m.shards], shardshuffle=False))
    assert {g["__key__"]: (g["jpg"], g["cls"]) for g in got} == expected


def test_convert_refuses_a_symlink_out_of_its_source_folder_and_packs_one_inside(tmp_path):
    """The review's f13: a link zzpasswd.jpg -> /etc/passwd was packed as an image sample. A link to a file inside
    the source folder is packed as that file."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.jpg").write_bytes(b"\xff\xd8a")
    (src / "b.jpg").symlink_to("a.jpg")
    r = CliRunner().invoke(cli, ["shards", "convert", str(src), str(tmp_path / "ok")])
    assert r.exit_code == 0 and read_manifest(tmp_path / "ok").count == 2, r.output
    (src / "zzpasswd.jpg").symlink_to("/etc/passwd")
    r = CliRunner().invoke(cli, ["shards", "convert", str(src), str(tmp_path / "out")])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert "zzpasswd.jpg is a symlink to /etc/passwd, outside the source folder" in r.output
    assert not (tmp_path / "out").exists()


def test_inspect_reports_counts_sizes_and_token_tail(datasets):
    ins = inspect_dataset(resolve(str(datasets["tokens-webdataset"])))
    m = read_manifest(datasets["tokens-webdataset"])
    assert ins.count == 96 and ins.shard_count == len(m.shards)
    assert ins.token_lengths == m.token_lengths
    assert ins.token_p99 > ins.token_p50
    assert ins.sample_bytes_p99 >= ins.sample_bytes_p50
    hist = length_histogram(ins.token_lengths)
    assert sum(c for _, _, c in hist) == 96


def test_inspect_cli_prints_histogram(datasets):
    r = CliRunner().invoke(cli, ["shards", "inspect", str(datasets["tokens-files"])])
    assert r.exit_code == 0, r.output
    assert "tokens_p99" in r.output and "token length" in r.output


def test_corrupt_tar_is_one_clear_error(tmp_path, datasets):
    import shutil

    d = tmp_path / "bad"
    shutil.copytree(datasets["image-webdataset"], d)
    shard = sorted(d.glob("*.tar"))[0]
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2 + 100])
    r = CliRunner().invoke(cli, ["shards", "inspect", str(d)])
    assert r.exit_code == 2
    assert "corrupt" in r.output and shard.name in r.output
    assert "Traceback" not in r.output


def test_missing_paths_are_exit_2(tmp_path):
    runner = CliRunner()
    for args in (["shards", "inspect", str(tmp_path / "nope")],
                 ["shards", "convert", str(tmp_path / "nope"), str(tmp_path / "o")],
                 ["shards", "make", "--count", "0", "--out", str(tmp_path / "o")]):
        r = runner.invoke(cli, args)
        assert r.exit_code == 2, (args, r.output)
        assert r.output.startswith("error: ") and len(r.output.strip().splitlines()) == 1


# --- damaged samples: named, skipped on request, listed by inspect ---------------------------------------------

def _damage(src_dir, dst, how):
    """Copy a webdataset and damage one .jpg member of its first shard (half of it, or all of it)."""
    import io
    import shutil
    import tarfile

    shutil.copytree(src_dir, dst)
    shard = sorted(dst.glob("*.tar"))[0]
    with tarfile.open(shard) as tf:
        members = [(m, tf.extractfile(m).read()) for m in tf]
    bad_key = None
    with tarfile.open(shard, "w") as out:
        for m, data in members:
            if m.name.endswith(".jpg") and bad_key is None and members.index((m, data)) > 3:
                bad_key = m.name.rpartition(".")[0]
                data = data[: len(data) // 2] if how == "half" else b""
            m.size = len(data)
            out.addfile(m, io.BytesIO(data))
    return shard, bad_key


@pytest.mark.slow
def test_a_corrupt_sample_is_named_skipped_and_listed(tmp_path, datasets):
    from dataperf import results

    shard, key = _damage(datasets["image-webdataset"], tmp_path / "bad", "half")
    base = ["sweep", str(tmp_path / "bad"), "--decode", "--image-size", "16", "--num-workers", "0,1",
            "--prefetch-factor", "2", "--batch-size", "8", "--repeats", "1", "--min-batches", "2",
            "--warmup-batches", "0", "--no-collect"]
    r = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "f.jsonl")])
    assert r.exit_code == 2 and key in r.output and shard.name in r.output, r.output
    r = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "s.jsonl"), "--on-corrupt", "skip"])
    assert r.exit_code == 0, r.output
    recs = [x for x in results.load(tmp_path / "s.jsonl") if x.kind == "loader"]
    assert [x.corrupt_samples for x in recs] == [1, 1]
    r = CliRunner().invoke(cli, ["shards", "inspect", "--verify", str(tmp_path / "bad")])
    assert r.exit_code == 2 and f"corrupt: {shard.name}: {key}" in r.output


def test_a_zero_byte_member_fails_plain_inspect(tmp_path, datasets):
    shard, key = _damage(datasets["image-webdataset"], tmp_path / "zero", "empty")
    r = CliRunner().invoke(cli, ["shards", "inspect", str(tmp_path / "zero")])
    assert r.exit_code == 2 and key in r.output and "0 bytes" in r.output


def test_a_corrupt_npy_is_named_by_its_sample_in_inspect_and_lengths(tmp_path):
    import io

    import numpy as np

    src = tmp_path / "src"
    src.mkdir()
    for i in range(20):
        b = io.BytesIO()
        np.save(b, np.arange(10 + i, dtype=np.int32))
        (src / f"{i:04d}.npy").write_bytes(b.getvalue()[:20] if i == 7 else b.getvalue())
    assert CliRunner().invoke(cli, ["shards", "convert", str(src), str(tmp_path / "tb")]).exit_code == 0
    for args in (["shards", "inspect", str(tmp_path / "tb")], ["lengths", str(tmp_path / "tb"), "--batch-size", "4"]):
        r = CliRunner().invoke(cli, args)
        errors = [ln for ln in r.output.splitlines() if ln.startswith("error: ")]  # after lengths' data: line
        assert r.exit_code == 2 and len(errors) == 1 and errors[0].startswith("error: corrupt sample 0007"), r.output


@pytest.mark.parametrize("layout", ["imagefolder", "flat"])
def test_inspect_verify_lists_the_bad_files_of_an_image_folder(tmp_path, layout):
    """bench's corrupt-sample error sends users to `shards inspect --verify`: it reads the same image folder and
    lists every bad file (no object reprs), exit 2 with one error line."""
    from PIL import Image

    root = tmp_path / "ifold"
    for c in ("cat", "dog"):
        (root / c).mkdir(parents=True)
        for i in range(20):
            Image.new("RGB", (32, 32)).save(root / c / f"{i}.jpg")
    (root / "dog" / "zero.jpg").write_bytes(b"")
    (root / "cat" / "bad.jpg").write_bytes(b"not a jpeg")
    if layout == "flat":
        for p in list(root.rglob("*.jpg")):
            p.rename(root / f"{p.parent.name}-{p.name}")
    names = ("cat/bad.jpg", "dog/zero.jpg") if layout == "imagefolder" else ("cat-bad.jpg", "dog-zero.jpg")
    r = CliRunner().invoke(cli, ["bench", str(root), "--decode", "--image-size", "16", "--batch-size", "4",
                                 "--repeats", "1", "--min-batches", "2", "--warmup-batches", "0", "--no-collect"])
    assert r.exit_code == 2 and "shards inspect --verify" in r.output, r.output
    r = CliRunner().invoke(cli, ["shards", "inspect", "--verify", str(root)])
    assert r.exit_code == 2, r.output
    assert f"corrupt: {names[0]}: jpg does not decode (not an image PIL can read)" in r.output, r.output
    assert f"corrupt: {names[1]}: jpg is empty (0 bytes)" in r.output and "object at 0x" not in r.output
    errs = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert errs == [f"error: 2 corrupt sample(s) in {root} (listed above); replace or remove those files, or "
                    "measure with --on-corrupt skip"], r.output
    r = CliRunner().invoke(cli, ["shards", "inspect", str(root)])
    assert r.exit_code == 0 and "files" in r.output and "42" in r.output, r.output


def test_convert_packs_an_imagenet_folder_with_its_labels(tmp_path):
    """ImageNet's own `.JPEG` is an image whatever its case (bench reads it), the class folders become `.cls`
    labels in torchvision ImageFolder's order, and a val/ beside train/ is left out and said, as bench does."""
    from PIL import Image

    src = tmp_path / "imagenet"
    for split, n in (("train", 5), ("val", 2)):
        for c in ("n01440764", "n01443537", "n01484850"):
            (src / split / c).mkdir(parents=True)
            for i in range(n):
                Image.new("RGB", (16, 16), (i, 0, 0)).save(src / split / c / f"{c}_{i}.JPEG", "JPEG")
    Image.new("RGB", (16, 16)).save(src / "train" / "n01484850" / "extra.png")
    (src / "train" / "n01440764" / "Thumbs.db").write_bytes(b"x")
    r = CliRunner().invoke(cli, ["shards", "convert", str(src), str(tmp_path / "out"), "--shards", "2"])
    assert r.exit_code == 0, r.output
    assert "wrote 16 image samples" in r.output
    assert "labels: 3 classes" in r.output and "left out val/ (another split)" in r.output
    assert "left out 1 files that belong to no image sample (Thumbs.db)" in r.output
    m = read_manifest(tmp_path / "out")
    got = list(wds.WebDataset([str(tmp_path / "out" / s) for s in m.shards], shardshuffle=False))
    labels = {g["__key__"]: int(g["cls"]) for g in got}
    assert labels["n01440764/n01440764_0"] == 0 and labels["n01484850/extra"] == 2
    assert sum(1 for g in got if "jpeg" in g) == 15
