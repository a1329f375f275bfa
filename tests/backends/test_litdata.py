"""The litdata backend on the tiny datasets (skipped where it is not installed)."""

import pytest

from tests.backends.backend_cases import FAST, bench_and_sweep, same_samples, trial_ok

pytestmark = pytest.mark.slow  # the slow tier: the LitData backend: an install of its own (scripts/install_backends.sh)

pytest.importorskip("litdata", reason="litdata not installed")


@pytest.mark.parametrize("worker_type", [None])
@pytest.mark.parametrize("name", ["image-webdataset", "image-files", "tokens-files"])
def test_reads_the_same_samples_as_the_dataloader(datasets, name, worker_type):
    same_samples(datasets[name], "litdata", worker_type)


@pytest.mark.parametrize("worker_type", [None])
def test_trial_records_backend_and_footprint(datasets, worker_type):
    trial_ok(datasets["image-webdataset"], "litdata", worker_type)


def test_bench_and_sweep(datasets, tmp_path):
    bench_and_sweep(datasets["image-webdataset"], "litdata", tmp_path)


def test_a_users_image_folder_is_converted_into_the_cache_not_beside_it(tmp_path):
    """`--backend litdata` on a user's own ImageFolder (no dataperf manifest, issue 29): converted once into
    dataperf's cache (never written into the user's folder), then read back, every image once an epoch."""
    import numpy as np

    from dataperf.measure.trial import run_trial
    from dataperf.results import LoaderConfig
    from tests.conftest import jpeg

    rng = np.random.default_rng(0)
    for c in ("cat", "dog"):
        (tmp_path / "imgs" / c).mkdir(parents=True)
        for i in range(12):
            (tmp_path / "imgs" / c / f"{i}.jpg").write_bytes(jpeg(rng, 40, 32))
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "imgs").rglob("*"))
    r = run_trial(tmp_path / "imgs", LoaderConfig(backend="litdata", batch_size=4, num_workers=2, decode=True,
                                                  image_size=16), FAST)
    assert r.status == "ok", r.error
    assert r.samples_per_repeat == 24
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "imgs").rglob("*")) == before


def test_converting_leaves_the_processs_signal_handlers_as_they_were(datasets, tmp_path):
    """litdata's optimize() installs a SIGINT handler that ends the process with os._exit(0) and keeps it: after
    a conversion a Ctrl-C would have ended a sweep with exit 0 and no interrupted record. The conversion puts the
    handlers back (a trial's watchdog restores them too, at its end: this checks the conversion itself)."""
    import signal

    from dataperf.backends import litdata as lit
    from dataperf.backends.samples import sample_refs
    from dataperf.data.manifest import read_manifest

    root = datasets["image-files"]
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    lit._write(sample_refs(root, read_manifest(root)), tmp_path / "lit")
    assert (tmp_path / "lit" / "index.json").is_file()
    assert {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} == before
