"""`shards make --like imagenet`: the size distribution, JPEG bytes and image statistics against their targets
(docs/synthetic-data.md), and the same bytes whatever the number of processes."""

from __future__ import annotations

import hashlib
import io

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from dataperf.cli import cli
from dataperf.data.make import natural
from dataperf.data.make.generate import like_samples, write_dataset

# targets: ImageNet-1k train means (469x387 px; 147,897,477,120-byte train tar / 1,281,167 images -> ~110 KB)
MEAN_W, MEAN_H, MEAN_JPEG_BYTES = 469, 387, 110_000


@pytest.fixture(scope="module")
def made():
    """240 images as the generator writes them (two processes): their decoded size and their bytes."""
    out = []
    for s in like_samples(240, seed=11, quality=90, jobs=2):
        with Image.open(io.BytesIO(s.payload)) as img:
            out.append((img.size, len(s.payload), img))
            img.load()
    return out


def test_size_distribution_targets():
    """20,000 draws (sizes only, no pixels): means within 3% of ImageNet's 469x387 (standard error of the
    mean here is under 0.3%), most photos 500 px on the longer side, landscape 4:3 the median shape, a portrait
    minority, and aspect ratios and sizes that vary widely (tails both ways)."""
    rng = np.random.default_rng(0)
    wh = np.array([natural.image_size(rng) for _ in range(20_000)])
    w, h = wh[:, 0], wh[:, 1]
    aspect = w / h
    assert abs(w.mean() / MEAN_W - 1) < 0.03 and abs(h.mean() / MEAN_H - 1) < 0.03, (w.mean(), h.mean())
    assert 0.7 < (np.maximum(w, h) == 500).mean() < 0.9
    assert np.median(aspect) == pytest.approx(4 / 3, abs=0.01)
    assert 0.1 < (aspect < 1).mean() < 0.3
    p5, p95 = np.percentile(aspect, [5, 95])
    assert p5 <= 0.7 and p95 >= 1.7  # widely varying aspect ratios, portrait and landscape
    assert np.percentile(np.maximum(w, h), 1) < 250 and np.percentile(np.maximum(w, h), 99) > 900
    assert w.min() >= natural.MIN_SIDE and h.min() >= natural.MIN_SIDE and wh.max() <= natural.MAX_SIDE


@pytest.mark.slow
def test_generated_jpegs_hit_size_and_byte_targets(made):
    """The written JPEGs themselves (decoded dimensions, not the plan): 240 images give means within 8% of
    469x387 (the standard error of the mean width here is about 2%), a mean JPEG within 15% of 110 KB (its
    standard error here is about 6%), and sizes that spread like photos' (p90 over p10 at least 2x)."""
    w = np.array([s[0][0] for s in made])
    h = np.array([s[0][1] for s in made])
    b = np.array([s[1] for s in made])
    assert abs(w.mean() / MEAN_W - 1) < 0.08 and abs(h.mean() / MEAN_H - 1) < 0.08, (w.mean(), h.mean())
    assert abs(b.mean() / MEAN_JPEG_BYTES - 1) < 0.15, b.mean()
    p10, p90 = np.percentile(b, [10, 90])
    assert p90 / p10 >= 2, (p10, p90)
    assert len({(x, y) for x, y in zip(w, h, strict=True)}) > 20  # many distinct sizes, not one


def amplitude_slope(gray: np.ndarray) -> float:
    """Log-log slope of the radially averaged amplitude spectrum between 1/100 and 1/4 cycles per pixel."""
    g = gray - gray.mean()
    g = g * np.outer(np.hanning(g.shape[0]), np.hanning(g.shape[1]))
    amp = np.abs(np.fft.fft2(g))
    f = np.hypot(np.fft.fftfreq(g.shape[0])[:, None], np.fft.fftfreq(g.shape[1])[None, :])
    edges = np.geomspace(0.01, 0.25, 12)
    idx = np.digitize(f, edges)
    means = [amp[idx == i].mean() for i in range(1, len(edges))]
    return float(np.polyfit(np.log(np.sqrt(edges[1:] * edges[:-1])), np.log(means), 1)[0])


def derivative_kurtosis(gray: np.ndarray) -> float:
    """Kurtosis of horizontal differences: 3 for Gaussian texture, far above for images with sharp edges."""
    d = np.diff(gray, axis=1).ravel()
    d = d - d.mean()
    return float((d**4).mean() / (d**2).mean() ** 2)


def test_natural_image_statistics(made):
    """Photos have an amplitude spectrum falling about as 1/f (slope near -1, measured -0.8 to -1.5 across
    natural scenes) and sparse, heavy-tailed derivatives from object edges. White noise, the control, has a
    flat spectrum (slope ~0) and Gaussian-like differences: both checks fail on it."""
    grays = [np.asarray(img.convert("L"), dtype=np.float64) for (_, _, img) in made[:12]]
    slopes = [amplitude_slope(g) for g in grays]
    kurts = [derivative_kurtosis(g) for g in grays]
    assert -1.6 < np.median(slopes) < -0.8, slopes
    assert np.median(kurts) > 8, kurts
    noise = np.random.default_rng(0).integers(0, 256, (375, 500)).astype(np.float64)
    assert amplitude_slope(noise) > -0.2 and derivative_kurtosis(noise) < 4


def digest(root):
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(root.glob("*.tar")))).hexdigest()


@pytest.mark.slow
def test_same_bytes_whatever_the_number_of_processes(tmp_path):
    """40 images span three work chunks: one process and two must write byte-identical shards."""
    ms = [write_dataset(tmp_path / str(j), "image", "webdataset", 40, seed=5, like="imagenet", jobs=j)
          for j in (1, 2)]
    assert digest(tmp_path / "1") == digest(tmp_path / "2")
    assert ms[0].sample_bytes == ms[1].sample_bytes and ms[0].count == 40
    other = write_dataset(tmp_path / "s6", "image", "webdataset", 40, seed=6, like="imagenet", jobs=1)
    assert other.sample_bytes != ms[0].sample_bytes  # the seed matters


def test_cli_reports_the_generation_rate(tmp_path):
    r = CliRunner().invoke(cli, ["shards", "make", "--like", "imagenet", "--count", "8", "--jobs", "1",
                                 "--format", "files", "--out", str(tmp_path / "d")])
    assert r.exit_code == 0, r.output
    assert "images/s" in r.output and "MiB/s" in r.output and "1 process" in r.output
    assert len(list((tmp_path / "d").glob("*.jpg"))) == 8


@pytest.mark.parametrize("args, words", [
    (["--like", "imagenet", "--image-size", "64"], "drop --image-size"),
    (["--jobs", "2"], "add --like imagenet"),
    (["--like", "imagenet", "--kind", "tokens"], "--kind image"),
    (["--like", "imagenet", "--jobs", "0"], "--jobs must be at least 1"),
])
def test_like_option_mistakes_are_one_error_line(tmp_path, args, words):
    r = CliRunner().invoke(cli, ["shards", "make", "--count", "4", "--out", str(tmp_path / "x"), *args])
    assert r.exit_code == 2 and r.output.startswith("error:") and words in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()
