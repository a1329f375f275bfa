"""The scan cache (data/facts.py): a second resolve is served from it, a changed file is learnt again,
nothing is written into the user's data, and a cache that cannot be read or written never fails a command."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dataperf.cli import cli
from dataperf.data import facts, resolve
from dataperf.data.manifest import read_manifest

PAST_NS = int((time.time() - 3600) * 1e9)  # settled: older than the racy window


def age(root: Path, when_ns: int = PAST_NS) -> None:
    """Give every file and folder under root (root too) an mtime an hour ago, as data at rest has."""
    for p in [*root.rglob("*"), root]:
        os.utime(p, ns=(when_ns, when_ns))


def snapshot(root: Path) -> dict[str, tuple[int, int, bool]]:
    """Every entry under root with its size, mtime and kind: what "nothing written here" must keep equal."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, p.is_dir()) for p in root.rglob("*")}


def aged_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    age(dst)
    return dst


@pytest.fixture()
def shards(user_data, tmp_path) -> Path:
    return aged_copy(user_data["shards"], tmp_path / "shards")


@pytest.fixture()
def folder(user_data, tmp_path) -> Path:
    return aged_copy(user_data["imagefolder"], tmp_path / "imagefolder")


def forbid(monkeypatch, name: str) -> None:
    def boom(*a, **k):
        raise AssertionError(f"{name} ran: the cache was not used")

    monkeypatch.setattr(facts, name, boom)


def test_counts_match_the_writers(datasets, shards):
    """Counting from headers gives what was written: 3 x 16 TarWriter samples, and our generator's manifest."""
    assert resolve(str(shards)).count == 48
    ours = datasets["image-webdataset"]
    m = read_manifest(ours)
    assert sum(facts.count_tar_samples(ours / s) for s in m.shards) == m.count


@pytest.mark.parametrize("form", ["folder", "glob", "brace"])
def test_second_resolve_of_shards_is_served_from_the_cache(shards, monkeypatch, form):
    spec = {"folder": str(shards), "glob": f"{shards}/*.tar", "brace": f"{shards}/train-{{0000..0002}}.tar"}[form]
    first = resolve(spec)
    forbid(monkeypatch, "count_tar_samples")
    if form == "folder":
        forbid(monkeypatch, "_list")
    again = resolve(spec)
    assert (again.count, again.urls(), again.total_bytes) == (first.count, first.urls(), first.total_bytes) \
        and first.count == 48


def test_second_resolve_of_an_image_folder_is_served_from_the_cache(folder, monkeypatch):
    first = resolve(str(folder))
    forbid(monkeypatch, "_list")
    again = resolve(str(folder))
    assert (again.urls(), again.labels, again.classes, again.total_bytes) == \
        (first.urls(), first.labels, first.classes, first.total_bytes)


def test_touching_a_shard_recounts_that_shard_only(shards, monkeypatch):
    resolve(str(shards))
    counted: list[str] = []
    real = facts.count_tar_samples
    monkeypatch.setattr(facts, "count_tar_samples", lambda p: counted.append(p.name) or real(p))
    touched = shards / "train-0001.tar"
    os.utime(touched, ns=(PAST_NS + 10**9, PAST_NS + 10**9))
    assert resolve(str(shards)).count == 48
    assert counted == ["train-0001.tar"]
    resolve(str(shards))
    assert counted == ["train-0001.tar"]  # learnt again once, then cached


def test_adding_or_rewriting_files_invalidates(folder):
    first = resolve(str(folder))
    new = folder / "cat" / "new.jpg"
    shutil.copy(folder / "cat" / "0.jpg", new)
    added = resolve(str(folder))
    assert added.count == first.count + 1 and str(new) in added.urls()
    os.utime(folder / "cat", ns=(PAST_NS + 5 * 10**9, PAST_NS + 5 * 10**9))
    dog0 = folder / "dog" / "0.jpg"
    dog0.write_bytes(dog0.read_bytes() + b"\0" * 1000)  # rewritten: a new size, a new mtime, same folder mtime
    os.utime(folder / "dog", ns=(PAST_NS, PAST_NS))
    grown = resolve(str(folder))
    assert grown.total_bytes == added.total_bytes + 1000


def test_recent_data_is_not_cached_until_settled(user_data, tmp_path):
    """A folder changed within the racy window could change again in the same mtime tick: not kept. (Its
    mtimes are set an hour ahead, not to now: "now" would turn settled if the machine stalled 2 s.)"""
    d = tmp_path / "fresh"
    shutil.copytree(user_data["imagefolder"], d)
    age(d, PAST_NS + 2 * 3600 * 10**9)
    resolve(str(d))
    assert not facts.entry_path(f"walk|{d.resolve()}").exists()
    age(d)
    resolve(str(d))
    assert facts.entry_path(f"walk|{d.resolve()}").exists()


@pytest.mark.parametrize("form", ["imagefolder", "shards"])
def test_nothing_is_written_into_the_users_data(form, folder, shards, tmp_path, monkeypatch):
    """A whole bench run (resolve, cold-cache eviction, a trial) leaves every entry's size and mtime as it
    was, and adds nothing, while the cache entry appears under DATAPERF_CACHE_DIR."""
    monkeypatch.setenv("DATAPERF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    root = folder if form == "imagefolder" else shards
    before = snapshot(root)
    r = CliRunner().invoke(cli, ["bench", str(root), "--decode", "--image-size", "16", "--batch-size", "4",
                                 "--max-batches", "5", "--cache", "cold", "--no-collect", "--out",
                                 str(tmp_path / "r.jsonl")])
    assert r.exit_code == 0, r.output
    assert snapshot(root) == before
    assert any((tmp_path / "cache" / "facts").glob("*.json"))


def test_unwritable_cache_dir_falls_back_to_scanning(shards, tmp_path, monkeypatch):
    """A cache folder that cannot be made (its parent is a file, which stops root too) costs nothing."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("DATAPERF_CACHE_DIR", str(blocker / "cache"))
    assert resolve(str(shards)).count == 48
    assert resolve(str(shards)).count == 48


@pytest.mark.parametrize("damage", ["{not json", "[1, 2]", json.dumps({"version": 1, "key": "other"}),
                                    json.dumps({"version": 999, "dirs": {}, "files": {}})])
def test_corrupt_cache_entry_is_rescanned_and_replaced(shards, monkeypatch, damage):
    d = resolve(str(shards))
    for key in (f"walk|{shards.resolve()}", f"tars|{shards.resolve()}"):
        facts.entry_path(key).write_text(damage)
    counted: list[str] = []
    real = facts.count_tar_samples
    monkeypatch.setattr(facts, "count_tar_samples", lambda p: counted.append(p.name) or real(p))
    assert resolve(str(shards)).count == d.count
    assert len(counted) == 3  # rescanned
    fixed = json.loads(facts.entry_path(f"tars|{shards.resolve()}").read_text())
    assert fixed["version"] == facts.VERSION and len(fixed["files"]) == 3


def test_a_corrupt_shard_is_one_error_line(tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "x.tar").write_bytes(b"\x01" * 700)
    r = CliRunner().invoke(cli, ["bench", str(d)])
    assert r.exit_code == 2 and r.output.startswith("error: corrupt or unreadable tar shard"), r.output
    assert len(r.output.strip().splitlines()) == 1
