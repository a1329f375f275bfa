"""--transform presets: shapes, normalisation and the crop box of RandomResizedCrop (PIL/torch or v2)."""

from __future__ import annotations

import random

import pytest
from click.testing import CliRunner
from PIL import Image

from dataperf.cli import cli
from dataperf.sources import transforms


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
