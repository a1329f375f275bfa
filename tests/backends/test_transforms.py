"""--transform presets: shapes, normalisation and the crop box of RandomResizedCrop (PIL/torch or v2)."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner
from PIL import Image

from dataperf.backends import transforms
from dataperf.cli import cli


@pytest.mark.parametrize("preset", ["imagenet-train", "imagenet-val"])
def test_preset_gives_normalized_square(preset):
    img = Image.new("RGB", (400, 300), (124, 116, 104))  # the ImageNet mean colour
    x = transforms.build(preset, 32)(img)
    assert tuple(x.shape) == (3, 32, 32) and x.dtype.is_floating_point
    assert x.abs().max() < 0.05  # mean colour normalises to ~0


def test_random_resized_crop_box_respects_scale_and_ratio():
    t = transforms.TrainPreset(224)
    random.seed(0)
    for _ in range(200):
        left, top, right, bottom = t.box(400, 300)
        w, h = right - left, bottom - top
        assert 0 <= left and 0 <= top and right <= 400 and bottom <= 300
        assert 0.08 * 400 * 300 * 0.9 <= w * h or (w, h) == (400, 300)


def test_resize_is_todays_behaviour():
    assert transforms.build("resize", 32) is None and transforms.build(None, 32) is None


def test_bench_with_transform_preset(user_data):
    r = CliRunner().invoke(cli, ["bench", str(user_data["imagefolder"]), "--decode", "--transform", "imagenet-train",
                                 "--image-size", "32", "--batch-size", "4", "--max-batches", "5", "--no-collect"])
    assert r.exit_code == 0, r.output


def test_bad_transform_factory_is_error_line(user_data):
    r = CliRunner().invoke(cli, ["bench", str(user_data["imagefolder"]), "--transform", "nomod_xyz:make"])
    assert r.exit_code == 2 and r.output.startswith("error: cannot import module")
    r = CliRunner().invoke(cli, ["bench", str(user_data["imagefolder"]), "--transform", "imagenet-tran"])
    assert r.exit_code == 2 and r.output == ("error: unknown --transform preset 'imagenet-tran'; choose resize, "
                                             "imagenet-train, imagenet-val, or give your own as MODULE:FACTORY\n")


N12_TRANSFORMS = """
def raises():
    def f(img):
        raise ValueError("transform broke")
    return f


def returns_str():
    return lambda img: "x"


def returns_none():
    return lambda img: None
"""


@pytest.mark.parametrize("workers", ["0", "1"])
@pytest.mark.parametrize("factory,says", [
    ("raises", "raised ValueError: transform broke on sample "),
    ("returns_str", "returned a str ('x') on sample "),
    ("returns_none", "returned None on sample "),
])
def test_a_transforms_own_failure_is_named_as_the_transforms_not_as_corrupt_data(tmp_path, monkeypatch, datasets,
                                                                                workers, factory, says):
    """Valid images through a broken --transform: that was "corrupt sample ..." (and --on-corrupt skip skipped
    every sample) or a bare "AttributeError: 'str' object has no attribute 'dim'". Now the transform is named,
    with what it raised or returned and on which sample, with or without --on-corrupt skip."""
    (tmp_path / "n12_transforms.py").write_text(N12_TRANSFORMS)
    monkeypatch.syspath_prepend(str(tmp_path))
    for skip in ([], ["--on-corrupt", "skip"]):
        r = CliRunner().invoke(cli, ["bench", str(datasets["image-webdataset"]), "--decode", "--transform",
                                     f"n12_transforms:{factory}", "--num-workers", workers, "--batch-size", "8",
                                     "--no-collect", "--repeats", "3", "--repeat-seconds", "1", *skip])
        errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
        assert r.exit_code == 2 and len(errors) == 1 and "Traceback" not in r.output, r.output
        assert f"--transform n12_transforms:{factory} {says}" in errors[0] and " in " in errors[0], errors[0]
        assert "corrupt" not in errors[0] and "AttributeError" not in errors[0], errors[0]
