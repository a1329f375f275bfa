import webdataset as wds
from click.testing import CliRunner

from dataperf.cli import cli
from dataperf.formats.dataset_dir import read_manifest
from dataperf.formats.inspect import inspect_dataset, length_histogram


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


def test_inspect_reports_counts_sizes_and_token_tail(datasets):
    ins = inspect_dataset(datasets["tokens-webdataset"])
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
