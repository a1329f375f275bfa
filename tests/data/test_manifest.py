"""A dataperf dataset's manifest.json: read as data, so it cannot point dataperf outside its folder."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from dataperf.cli import cli


@pytest.mark.parametrize("kind, entry", [("image-webdataset", "../../outside/shard-000000.tar"),
                                         ("image-webdataset", "/etc/passwd"),
                                         ("image-files", "../../../../etc/hostname")])
def test_a_manifest_entry_outside_its_dataset_folder_is_refused(tmp_path, datasets, kind, entry):
    """The review's f7-f10: such entries were read (exit 0), and /etc/passwd was opened and parsed as a tar."""
    d = tmp_path / "ds"
    shutil.copytree(datasets[kind], d)
    (tmp_path / "outside").mkdir()
    shutil.copy(sorted(d.glob("*.tar"))[0] if kind == "image-webdataset" else next(d.rglob("*.jpg")),
                tmp_path / "outside" / "shard-000000.tar")
    m = json.loads((d / "manifest.json").read_text())
    key = "shards" if kind == "image-webdataset" else "files"
    m[key][0] = entry
    (d / "manifest.json").write_text(json.dumps(m))
    r = CliRunner().invoke(cli, ["bench", str(d), "--no-collect"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert r.output.startswith(f"error: {d / 'manifest.json'} lists {entry!r}, which is outside the dataset folder")


def test_a_manifest_entry_in_a_subfolder_is_inside():
    from dataperf.data.manifest import _outside

    assert not _outside("train/shard-0.tar") and not _outside("a/../b.tar") and _outside("a/../../b.tar")
