"""Every DATA form through bench, sweep, e2e, diagnose and tune, through the real CLI, on real files."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dataperf.cli import cli
from tests.data.servers import HttpServer

FORMS = ["imagefolder", "shards-glob", "shards-brace", "bin", "npy", "jsonl", "http", "user-dataset"]
COMMANDS = ["bench", "sweep", "e2e", "diagnose", "tune"]
FAST = ["--no-collect", "--max-batches", "5"]


@pytest.fixture(scope="module")
def http_shards(user_data):
    with HttpServer(user_data["shards"]) as srv:
        yield srv.url + "/train-{0000..0002}.tar"


def data_args(form: str, user_data, http_url: str) -> tuple[list[str], str]:
    """(DATA arguments, model) for one form."""
    d = user_data
    return {
        "imagefolder": ([str(d["imagefolder"])], "cnn-small"),
        "shards-glob": ([f"{d['shards']}/*.tar"], "cnn-small"),
        "shards-brace": ([f"{d['shards']}/train-{{0000..0002}}.tar"], "cnn-small"),
        "bin": ([str(d["bin"])], "gpt-tiny"),
        "npy": ([str(d["npy"])], "gpt-tiny"),
        "jsonl": ([f"{d['jsonl']}#tokenizer=bytes"], "gpt-tiny"),
        "http": ([http_url], "cnn-small"),
        "user-dataset": (["--dataset", "userds:build", "--input", "image"], "cnn-small"),
    }[form]


def command(cmd: str, data: list[str], model: str, out: str) -> list[str]:
    common = ["--batch-size", "4", "--image-size", "16"]
    if cmd == "bench":
        return ["bench", *data, *common, *FAST, "--decode", "--seq-len", "32", "--out", out]
    if cmd == "sweep":
        return ["sweep", *data, *common, *FAST, "--decode", "--num-workers", "0,1", "--prefetch-factor", "2",
                "--seq-len", "32", "--out", out]
    if cmd == "e2e":
        return ["e2e", *data, *common, "--model", model, "--num-workers", "1", "--steps", "3", "--repeats", "1",
                "--warmup", "1", "--no-predict", "--seq-len", "32", "--out", out]
    if cmd == "diagnose":
        return ["diagnose", *data, *common, *FAST, "--model", model, "--num-workers", "0", "--seq-len", "32",
                "--out", out]
    return ["tune", *data, *common, *FAST, "--target-samples-per-s", "1", "--seq-len", "32", "--out", out]


def strip_input(args: list[str], cmd: str) -> list[str]:
    """--input is a model option: bench has no model, so it has none."""
    if cmd == "bench" and "--input" in args:
        i = args.index("--input")
        return args[:i] + args[i + 2:]
    return args


@pytest.mark.slow
@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("form", FORMS)
def test_form_runs_through_command(form, cmd, user_data, http_shards, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data, model = data_args(form, user_data, http_shards)
    out = tmp_path / "r.jsonl"
    r = CliRunner().invoke(cli, strip_input(command(cmd, data, model, str(out)), cmd))
    assert r.exit_code == 0, r.output
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert recs and all(x["status"] == "ok" for x in recs), recs
    loaders = [x for x in recs if x["kind"] == "loader"]
    for x in loaders:
        assert x["samples_per_repeat"] >= 5 * 4
        if form == "http":
            assert x["cache_mode"] == "remote" and x["cache_verified"] is None
            assert len(x["network_recv_mib_per_repeat"]) == x["repeats"]
        if form == "user-dataset":
            assert x["cache_mode"] == "unmanaged"
