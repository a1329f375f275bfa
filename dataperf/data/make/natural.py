"""Synthetic photos shaped like ImageNet-1k train (`shards make --like imagenet`): sizes drawn from its size
distribution and content with natural-image statistics, so JPEG decode cost and file sizes resemble the real
data. White noise decodes and compresses unlike photos; a fixed 256x256 image has none of the size spread
that makes resize cost and batch time vary.

Content is a dead-leaves picture (opaque shapes with power-law sizes occluding each other: the classic model
whose spectrum falls as 1/f, with the sharp object edges photos have), each leaf filled with its own colour
and a 1/f-spectrum texture, plus a little sensor grain. Every image draws from its own generator seeded by
(seed, index), so the output for a seed is the same whatever the number of processes that make it.
docs/synthetic-data.md gives the targets and where their numbers come from.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

# --- the size distribution (docs/synthetic-data.md: targets and sources) --------------------------------------
LONG_SIDE = 500  # Flickr's "medium" size: most ImageNet photos were collected with a 500-pixel longer side
P_LONG_SIDE_500 = 0.79
P_SMALLER = 0.15  # longer side below 500 (small originals); the rest (0.06) are larger originals
SMALLER_SIGMA = 0.5  # log-scale spread below 500
LARGER_SIGMA = 0.6  # log-scale spread above 500 (a tail to several thousand pixels)
MIN_SIDE, MAX_SIDE = 32, 4000
# longer/shorter side: the camera ratios, and a log-uniform remainder up to 3:1 (panoramas, crops)
ASPECTS = ((4 / 3, 0.46), (3 / 2, 0.25), (1.0, 0.08), (5 / 4, 0.05), (16 / 9, 0.04))
MAX_ASPECT = 3.0
P_PORTRAIT = 0.2  # of the non-square images
# --- content ---------------------------------------------------------------------------------------------
LEAVES = 200  # shapes per image (label map is 8-bit: at most 255)
NOISE_TILE = 512  # 1/f texture is made at most this size and tiled (the FFT field is periodic: no seams)
DETAIL_LOG_MEDIAN, DETAIL_LOG_SIGMA = 0.0, 0.45  # per-image texture strength: smooth skies to foliage
TEXTURE_STD = 19.0  # grey levels of 1/f texture at detail 1
GRAIN_STD = 3.0  # grey levels of per-pixel sensor grain at detail 1
IMAGENET_MEAN_RGB = (124.0, 116.0, 104.0)
CLASSES = 1000


@dataclass(frozen=True)
class Like:
    """One generated image: its size, label and JPEG bytes."""

    width: int
    height: int
    label: int
    jpeg: bytes


def image_size(rng: np.random.Generator) -> tuple[int, int]:
    """(width, height) drawn from the ImageNet-like size distribution."""
    u = rng.random()
    if u < P_LONG_SIDE_500:
        long_side = float(LONG_SIDE)
    elif u < P_LONG_SIDE_500 + P_SMALLER:
        long_side = LONG_SIDE * float(np.exp(-abs(rng.normal(0.0, SMALLER_SIGMA))))
    else:
        long_side = LONG_SIDE * float(np.exp(abs(rng.normal(0.0, LARGER_SIGMA))))
    long_px = int(min(max(round(long_side), MIN_SIDE), MAX_SIDE))
    v, acc, aspect = rng.random(), 0.0, None
    for ratio, p in ASPECTS:
        acc += p
        if v < acc:
            aspect = ratio
            break
    if aspect is None:
        aspect = float(np.exp(rng.uniform(0.0, np.log(MAX_ASPECT))))
    short_px = max(int(round(long_px / aspect)), MIN_SIDE)
    portrait = aspect != 1.0 and rng.random() < P_PORTRAIT
    return (short_px, long_px) if portrait else (long_px, short_px)


def pink_noise(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Three unit-variance channels whose amplitude spectrum falls as 1/f, shape (h, w, 3), float32."""
    fy = np.fft.fftfreq(h).astype(np.float32)[:, None]
    fx = np.fft.rfftfreq(w).astype(np.float32)[None, :]
    f = np.sqrt(fx * fx + fy * fy)
    f[0, 0] = np.inf  # no DC: each leaf's colour sets the mean
    shape = (3, h, w // 2 + 1)
    z = (rng.standard_normal(shape, dtype=np.float32) + 1j * rng.standard_normal(shape, dtype=np.float32)) / f
    x = np.fft.irfft2(z.astype(np.complex64), s=(h, w), axes=(1, 2)).astype(np.float32)
    x /= x.std(axis=(1, 2), keepdims=True) + 1e-6
    return np.moveaxis(x, 0, -1)


def leaves(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    """Dead-leaves label map (h, w) uint8: shapes with radii of density ~ r^-3 (scale invariance), drawn
    back to front over a full-frame background leaf 0."""
    img = Image.new("L", (w, h), 0)
    draw = ImageDraw.Draw(img)
    s = max(w, h)
    rmin, rmax = 0.02 * s, 0.5 * s
    u = rng.random(LEAVES)
    radii = rmin * (1 - u * (1 - (rmin / rmax) ** 2)) ** -0.5
    radii = -np.sort(-radii)  # big shapes first: small ones land on top, as in a cluttered scene
    for k, r in enumerate(radii, start=1):
        cx, cy = rng.random() * w, rng.random() * h
        if rng.random() < 0.5:
            ry = r * rng.uniform(0.4, 1.0)
            draw.ellipse([cx - r, cy - ry, cx + r, cy + ry], fill=k)
        else:
            n = int(rng.integers(3, 8))
            ang = np.sort(rng.random(n)) * 2 * np.pi
            rad = r * rng.uniform(0.5, 1.0, n)
            points = [(float(cx + a * np.cos(t)), float(cy + a * np.sin(t))) for a, t in zip(rad, ang, strict=True)]
            draw.polygon(points, fill=k)
    return np.asarray(img)


def render(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    """One photo-like RGB image (h, w, 3) uint8. Built channel by channel in place: about 40 bytes per pixel
    at the peak (a 4000 x 3000 image, the largest the distribution draws, needs ~0.5 GB while it is made)."""
    detail = float(np.exp(rng.normal(DETAIL_LOG_MEDIAN, DETAIL_LOG_SIGMA)))
    th, tw = min(h, NOISE_TILE), min(w, NOISE_TILE)
    tex = pink_noise(rng, th, tw)
    lab = leaves(rng, w, h)
    mean = np.asarray(IMAGENET_MEAN_RGB, dtype=np.float32)
    # leaf colours: a shared brightness and a weaker colour cast, as photo colours are correlated
    palette = mean + rng.normal(0, 45, (LEAVES + 1, 1)) + rng.normal(0, 25, (LEAVES + 1, 3))
    gain = TEXTURE_STD * detail * rng.uniform(0.2, 1.0, LEAVES + 1)
    out = palette.astype(np.float32)[lab]
    g = gain.astype(np.float32)[lab]
    del lab

    def tiled(c: int) -> np.ndarray:  # the periodic texture repeated over the image: no seams
        ch = tex[..., c]
        return ch if (th, tw) == (h, w) else np.tile(ch, (-(-h // th), -(-w // tw)))[:h, :w]

    # texture: luminance, plus two weaker opponent-colour channels (summing to zero over R, G, B)
    luma, a, b = tiled(0), tiled(1), tiled(2)
    for c, chroma in enumerate((a, b, -a - b)):
        out[..., c] += g * (luma + 0.25 * chroma)
    del luma, a, b, g
    grain = rng.standard_normal((h, w, 3), dtype=np.float32)
    grain *= np.float32(GRAIN_STD * detail)
    out += grain
    return np.clip(out, 0, 255, out=out).astype(np.uint8)


def make(seed: int, index: int, quality: int) -> Like:
    """Image `index` of the dataset for `seed`: the same bytes in any process, in any order."""
    rng = np.random.default_rng([seed, index])
    w, h = image_size(rng)
    label = int(rng.integers(0, CLASSES))
    buf = io.BytesIO()
    # 4:4:4: most ImageNet JPEGs are not chroma subsampled (docs/synthetic-data.md), and subsampling would halve
    # chroma decode
    Image.fromarray(render(rng, w, h)).save(buf, format="JPEG", quality=quality, subsampling=0)
    return Like(w, h, label, buf.getvalue())


def make_chunk(seed: int, start: int, stop: int, quality: int) -> list[Like]:
    """Images [start, stop): the unit of work a generation process takes."""
    return [make(seed, i, quality) for i in range(start, stop)]
