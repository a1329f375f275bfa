import pytest

from dataperf.diagnose import diagnose, predicted_stall, stall_split
from dataperf.formats.generate import ImageSpec, write_dataset
from dataperf.records import LoaderConfig
from dataperf.runner import TrialOptions
from dataperf.step import StepOptions

OPTS = TrialOptions(repeats=3, warmup_batches=1, min_batches=3, collect=False)


def test_stall_split_adds_up():
    c, p, f = stall_split(step_sps=100, warm_sps=50, cold_sps=25)
    assert (c, p, f) == pytest.approx((0.25, 0.25, 0.5))
    assert stall_split(100, 500, 400) == pytest.approx((1, 0, 0))


def test_what_if_cache_fraction():
    assert predicted_stall(100, 200, 50, 0.0) == pytest.approx(0.5)
    assert predicted_stall(100, 200, 50, 1.0) == 0
    assert predicted_stall(100, 200, 50, 0.5) == pytest.approx(1 - 80 / 100)


@pytest.fixture(scope="module")
def big_jpegs(tmp_path_factory):
    p = tmp_path_factory.mktemp("big") / "img"
    write_dataset(p, "image", "webdataset", 48, seed=2, image=ImageSpec(384, 384, 95), shard_mb=1)
    return p


def test_names_prep_on_decode_heavy_images_without_workers(big_jpegs):
    cfg = LoaderConfig(format="webdataset", batch_size=8, num_workers=0, image_size=32)
    r = diagnose(big_jpegs, cfg, StepOptions(model="tiny_models:tiny"), OPTS)
    assert r.bottleneck == "prep", r.sentence
    assert r.prep_stall_fraction > 0.5
    assert "prep" in r.sentence and any("workers" in a for a in r.advice)


def test_names_fetch_when_cold_reads_are_slow(datasets):
    cfg = LoaderConfig(format="files", batch_size=8, num_workers=0, image_size=16)
    r = diagnose(datasets["image-files"], cfg, StepOptions(model="tiny_models:tiny"), OPTS, throttle_mib_s=0.3,
                 page_cache_gib=1.0)
    assert r.bottleneck == "fetch", r.sentence
    assert r.fetch_stall_fraction > r.prep_stall_fraction
    assert any("shards" in a for a in r.advice)
    assert r.what_if[-1]["cached_fraction"] == 1.0 and r.what_if[-1]["predicted_stall_fraction"] < \
        r.what_if[0]["predicted_stall_fraction"]
