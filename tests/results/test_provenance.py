"""Provenance: every written record says which machine, filesystem, versions, commit and command made it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataperf import results
from dataperf.cli import cli
from dataperf.results import LoaderResult, StepResult, provenance


def test_written_records_carry_machine_versions_and_command(tmp_path):
    p = tmp_path / "r.jsonl"
    results.append(p, LoaderResult(data=str(tmp_path)))
    (line,) = [json.loads(x) for x in p.read_text().splitlines()]
    env = line["env"]
    assert env["cpu_count"] == os.cpu_count() and env["python"] == ".".join(map(str, sys.version_info[:3]))
    import torch

    assert env["torch"] == torch.__version__ and env["command"].startswith("dataperf")
    assert env["kernel"] == os.uname().release and env["host"] == os.uname().nodename
    assert env["fs_type"]  # the tmp folder lives on some mounted filesystem


def test_commit_is_the_checkouts_head():
    src = Path(__file__).resolve().parents[2]  # this test file -> the checkout, found apart from provenance
    if not (src / ".git").exists():
        pytest.skip("dataperf is not running from a git checkout")
    head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert provenance.machine_and_software()["dataperf_commit"].split("-")[0] == head


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_filesystem_under_the_data_is_the_mount_that_holds_it(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "dataperf-test", str(mnt)]).returncode != 0:
        pytest.skip("tmpfs cannot be mounted here")
    try:
        (mnt / "d").mkdir()
        s = provenance.storage(str(mnt / "d"))
        assert s == {"fs_type": "tmpfs", "fs_device": "dataperf-test"}
        assert provenance.storage("https://example.invalid/x.tar") == {"fs_type": None, "fs_device": None}
    finally:
        subprocess.run(["umount", str(mnt)])


def test_schema_1_records_are_upgraded_on_read(tmp_path):
    p = tmp_path / "old.jsonl"
    p.write_text(json.dumps({"kind": "step", "schema_version": 1, "model": "m", "step_ms_median": 2.0}) + "\n")
    (r,) = results.load(p)
    assert isinstance(r, StepResult) and r.schema_version == results.SCHEMA_VERSION and r.env == {}


def _with_env(path: Path, **changes) -> None:
    rec = StepResult(model="m", config_key="k", step_ms_repeats=[1.0, 1.0, 1.0], step_ms_median=1.0)
    rec.env = {**provenance.collect(), **changes}
    results.append(path, rec)


def test_compare_and_report_warn_when_machines_differ(tmp_path):
    base, head = tmp_path / "b.jsonl", tmp_path / "h.jsonl"
    _with_env(base)
    _with_env(head, cpu_model="Other CPU", torch="9.9.9")
    r = CliRunner().invoke(cli, ["compare", str(base), str(head), "--metrics", "step_ms"])
    assert r.exit_code == 0, r.output
    assert "base and head differ in cpu_model" in r.output and "differ in torch" in r.output
    r = CliRunner().invoke(cli, ["compare", str(base), str(base), "--metrics", "step_ms"])
    assert "differ in" not in r.output
    _with_env(base, host="elsewhere")
    r = CliRunner().invoke(cli, ["report", str(base)])
    assert r.exit_code == 0, r.output
    assert "machine:" in r.output and "mixes results from different host" in r.output


def test_a_record_that_reads_no_storage_does_not_mix_filesystems():
    """A step or a decision reads no data (fs_type None) beside loader records on overlay: not "different
    fs_type" (the quickstart's own file warned of different machines); two filesystems still differ."""
    env = provenance.collect()
    on_disk = {**env, "fs_type": "ext4", "fs_device": "/dev/sda1"}
    no_data = {**env, "fs_type": None, "fs_device": None}
    assert provenance.differences(on_disk, no_data) == []
    assert [k for k, _, _ in provenance.differences(on_disk, {**on_disk, "fs_type": "nfs"})] == ["fs_type"]
