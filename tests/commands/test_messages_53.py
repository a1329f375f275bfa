"""Messages that did not name their fix (issue 53): DATA options joined with '&', `compare` of two watch runs
without `--label`, a truncated shard under `--on-corrupt skip`."""

from __future__ import annotations

import json
import os
import shutil
import sys

from click.testing import CliRunner

from dataperf.cli import cli


def _one_error(r, *needles: str) -> str:
    assert r.exit_code == 2 and r.output.count("\n") == 1 and r.output.startswith("error: "), r.output
    for n in needles:
        assert n in r.output, r.output
    return r.output


def test_data_options_joined_with_an_ampersand_name_the_comma(tmp_path):
    (tmp_path / "code.jsonl").write_text("".join(json.dumps({"content": "x = 1\n" * i}) + "\n" for i in range(1, 40)))
    spec = f"{tmp_path / 'code.jsonl'}#tokenizer=bytes&field=content"
    _one_error(CliRunner().invoke(cli, ["lengths", spec]), "join them with a comma",
               f"{tmp_path / 'code.jsonl'}#tokenizer=bytes,field=content")


def test_compare_of_two_watch_runs_names_label(tmp_path):
    """Each watch record is keyed by its command line: two runs of train.py with other arguments match nothing."""
    for name, arg in (("a", "1"), ("b", "2")):
        r = CliRunner().invoke(cli, ["watch", "--out", str(tmp_path / f"{name}.jsonl"), "--", sys.executable,
                                     "-c", "import sys", arg])
        assert r.exit_code == 0, r.output
    _one_error(CliRunner().invoke(cli, ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]),
               "watch both runs with the same --label")


def test_a_truncated_shard_says_the_others_can_be_measured(tmp_path, datasets):
    d = tmp_path / "trunc"
    shutil.copytree(datasets["image-webdataset"], d)
    shard = sorted(d.glob("*.tar"))[-1]
    os.truncate(shard, shard.stat().st_size // 2)
    (d / "manifest.json").unlink()  # shards as a user's ShardWriter leaves them
    r = CliRunner().invoke(cli, ["bench", str(d), "--batch-size", "8", "--on-corrupt", "skip"])
    _one_error(r, shard.name, "measure the other shards with a glob or brace pattern that leaves it out",
               "--on-corrupt skip drops samples that do not decode, not a shard that cannot be read")


def test_every_command_prints_the_same_data_line(tmp_path):
    """One reading of DATA, said one way (issue 53): a nanoGPT folder (train.bin and val.bin, numpy memmaps) as
    bench, shards inspect and lengths read it."""
    import numpy as np

    for name, n in (("train.bin", 8192), ("val.bin", 1024)):
        np.memmap(tmp_path / name, np.uint16, "w+", shape=(n,))[:] = 7
    said = set()
    for args in (["bench", str(tmp_path), "--seq-len", "64", "--batch-size", "8", "--repeats", "1", "--no-collect"],
                 ["shards", "inspect", str(tmp_path)], ["lengths", str(tmp_path), "--seq-len", "64"]):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, r.output
        said |= {ln for ln in r.output.splitlines() if ln.startswith("data: ")}
    assert said == {f"data: 1 tokens-bin token files from {tmp_path.name}/; left out: val.bin (another split)"}
