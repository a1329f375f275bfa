"""The `next:` line of `dataperf watch` on real, unmodified training scripts (stand-ins under tests/watch/, a
torchvision stand-in on the job's PYTHONPATH): one command that runs as printed, on the data the training
loader read, at the batch size the loop really got, with worker counts the data can run and the script's
transform; every remark on a `note:` line of its own after it."""

from __future__ import annotations

import glob
import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from dataperf import results
from dataperf.results import LoaderResult, WatchResult

pytestmark = pytest.mark.slow  # the slow tier: training jobs under `dataperf watch`, then the commands they print

HERE = Path(__file__).parent
STANDIN = HERE / "standin"
TRAIN, VAL, BS = 24, 16, 4  # ImageFolder images; the val loader (batch 1) delivers more batches than train's 6
SHARDS, PER_SHARD, WDS_BATCH = 4, 10, 5


def env(standin: bool) -> dict[str, str]:
    path = [str(STANDIN)] if standin else []
    path += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(path))


def watch(tmp_path: Path, *cmd: str) -> tuple[subprocess.CompletedProcess, WatchResult]:
    out = tmp_path / "watch.jsonl"
    p = subprocess.run([sys.executable, "-m", "dataperf", "watch", "--out", str(out), "--", sys.executable, *cmd],
                       capture_output=True, text=True, env=env(standin=True), cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    (r,) = results.load(out)
    return p, r


def unwrap(stderr: str) -> list[str]:
    """The output's lines with wrapped ones joined back: a continuation starts with two spaces (after a ` \\`
    where it continues a command)."""
    out: list[str] = []
    for ln in stderr.splitlines():
        if ln.startswith("  ") and out and not out[-1].startswith(("┃", "│", "┏", "┡", "└")):
            out[-1] = out[-1].removesuffix(" \\") + " " + ln.strip()
        else:
            out.append(ln)
    return out


def next_block(stderr: str) -> tuple[str, list[str]]:
    """The one `next:` command and the lines after it, each of which must be a `note:` (a wrapped line joined
    back)."""
    lines = unwrap(stderr)
    at = [i for i, ln in enumerate(lines) if ln.startswith("next:")]
    assert len(at) == 1, stderr
    after = lines[at[0] + 1:]
    after = after[:next(i for i, ln in enumerate(after) if ln.startswith("results:"))]
    assert after and all(ln.startswith("note: ") for ln in after), after
    return lines[at[0]].removeprefix("next: "), after


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def run_as_printed(tmp_path: Path, cmd: str) -> list[LoaderResult]:
    """The command exactly as printed, shortened by options appended after it (the last one given wins)."""
    args = shlex.split(cmd)
    assert args[:2] == ["dataperf", "sweep"], cmd
    out = tmp_path / "sweep.jsonl"
    p = subprocess.run([sys.executable, "-m", "dataperf", *args[1:], "--repeats", "3", "--repeat-seconds", "1",
                        "--out", str(out)], capture_output=True, text=True, env=env(standin=False), cwd=tmp_path,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    trials = [r for r in results.load(out) if isinstance(r, LoaderResult)]
    assert trials and all(r.status == "ok" for r in trials), [(r.config_key, r.error) for r in trials]
    return trials


@pytest.fixture(scope="module")
def imagefolder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("imagefolder")
    for split, n in (("train", TRAIN), ("val", VAL)):
        for c in ("cat", "dog"):
            (root / split / c).mkdir(parents=True)
            for i in range(n // 2):
                Image.new("RGB", (40, 36), (i * 10, 60, 90)).save(root / split / c / f"{i}.jpg")
    return root


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    import webdataset as wds

    root = tmp_path_factory.mktemp("shards")
    for s in range(SHARDS):
        with wds.TarWriter(str(root / f"train-{s:04d}.tar")) as w:
            for i in range(PER_SHARD):
                b = io.BytesIO()
                Image.new("RGB", (20, 20), (i * 20, 0, 0)).save(b, "JPEG")
                w.write({"__key__": f"{s}-{i}", "jpg": b.getvalue(), "cls": str(i).encode()})
    (root / "README.txt").write_text("not a shard")
    return root


def test_imagefolder_read_in_place_train_loader_runs_as_printed(tmp_path, imagefolder):
    """4 workers on 6 batches an epoch (an infeasible proposal before), a val loader that delivers more
    batches than train, RandomResizedCrop + flip, a torchvision model: the command sweeps the train folder in
    place at batch 4 with the imagenet-train preset, at most 2 workers, and every trial of it runs."""
    p, r = watch(tmp_path, str(HERE / "train_images.py"), str(imagefolder), "--workers", "4")
    assert "pack it first" not in p.stderr and "shards convert" not in p.stderr
    cmd, notes = next_block(p.stderr)
    assert "#" not in cmd and "`" not in cmd
    args = shlex.split(cmd)
    assert args[2] == str(imagefolder / "train") == r.data_path, "the training loader's folder, not val's"
    assert flag(args, "--batch-size") == str(BS), "the train loader's batch, not val's"
    assert flag(args, "--transform") == "imagenet-train" and flag(args, "--image-size") == "32"
    cap = TRAIN // (BS * 3)
    assert "--num-workers" not in args, "the sweep sizes its ladder by the cores and the data, and goes past it"
    assert any("your 4 workers cannot each get 3 batches" in n for n in notes), notes
    (model,) = [n for n in notes if "for a verdict" in n]
    assert "--model torchvision.models:tinynet --input image --confirm 2" in model and "20% slower" in model
    assert not any("transform" in n for n in notes if "for a verdict" not in n), "the transform is passed"
    trials = run_as_printed(tmp_path, cmd)
    assert max(t.config["num_workers"] for t in trials) <= cap


def test_zero_workers_serial_with_the_step(tmp_path, imagefolder):
    """num_workers=0, Resize + CenterCrop, pinned memory: the ladder keeps 0 only as the script's baseline
    and the model-rate note asks for a config with workers above it."""
    p, r = watch(tmp_path, str(HERE / "train_images.py"), str(imagefolder), "--workers", "0", "--transform", "val",
                 "--pin-memory")
    cmd, notes = next_block(p.stderr)
    args = shlex.split(cmd)
    assert "--num-workers" not in args
    assert flag(args, "--transform") == "imagenet-val" and flag(args, "--image-size") == "32"
    assert flag(args, "--pin-memory") == "on"
    (fed,) = [n for n in notes if "when fed" in n]
    assert "with workers (>0)" in fed and "serial with every step" in fed and "your script's setting" in fed
    assert f"above {1.2 * r.model_samples_per_s:,.0f} samples/s" in fed


def test_webloader_batched_real_batch_size_and_transform_note(tmp_path, shards):
    """wds.WebLoader(batch_size=None) over `.batched(5)`: batch 5 (not 32), the job's shard list as one
    glob (the folder also holds a README), workers capped by the data, the unseen transform noted; runs."""
    pattern = str(shards / f"train-{{0000..{SHARDS - 1:04d}}}.tar")
    p, r = watch(tmp_path, str(HERE / "train_shards.py"), pattern, str(WDS_BATCH))
    cmd, notes = next_block(p.stderr)
    args = shlex.split(cmd)
    assert "*" in args[2] and sorted(glob.glob(args[2])) == sorted(map(str, shards.glob("*.tar"))), args[2]
    assert flag(args, "--batch-size") == str(WDS_BATCH)
    assert "--transform" not in args
    (tf,) = [n for n in notes if "transform" in n and "for a verdict" not in n]
    assert "not visible" in tf and "--transform yourpkg.data:build_transform" in tf
    cap = SHARDS * PER_SHARD // (WDS_BATCH * 3)
    assert "--num-workers" not in args
    assert max(t.config["num_workers"] for t in run_as_printed(tmp_path, cmd)) <= cap


def test_transform_without_preset_is_noted(tmp_path, imagefolder):
    """Resize + ColorJitter: no preset does that, so no --transform, and a note (one line, though the
    transform's repr spans several) says what the sweep does instead and how to pass the script's own."""
    p, _ = watch(tmp_path, str(HERE / "train_images.py"), str(imagefolder), "--transform", "jitter")
    cmd, notes = next_block(p.stderr)
    assert "--transform" not in shlex.split(cmd)
    (tf,) = [n for n in notes if "matches no preset" in n]
    assert "Compose( Resize(size=(32, 32)) ColorJitter(brightness=0.4) ToTensor() )" in tf
    assert "--transform yourpkg.data:build_transform" in tf


def test_dataset_without_path_gets_no_command(tmp_path):
    """A Dataset that keeps no path: no `next:` at all (nothing runnable), and a note with the --dataset form
    of the sweep at the script's settings."""
    p, _ = watch(tmp_path, str(HERE / "train_images.py"), "memory")
    assert not any(ln.startswith("next:") for ln in p.stderr.splitlines())
    # a note wraps to the console's width, its continuation indented (_render.say): read it whole
    lines = p.stderr.replace("\n  ", " ").splitlines()
    (none,) = [ln for ln in lines if ln.startswith("note: no next command")]
    assert "keeps no path" in none
    assert "dataperf sweep --dataset yourpkg.data:build --batch-size 4 --prefetch-factor " in none
