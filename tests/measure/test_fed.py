"""The step measured alone is shaped like the batches the loader feeds it: a user's Dataset or transform makes
its own images, and the synthetic batch takes their shape and dtype (measure.fed.loader_image)."""

import pytest
import torch

from dataperf.data import as_data, user_dataset
from dataperf.measure.fed import StartSplit, StepTimes, loader_image, shape_for_model, shape_step
from dataperf.measure.step import StepOptions, Trainer, measure_step
from dataperf.measure.trial import Arrival
from dataperf.results import LoaderConfig

STEP_S = 0.05


@pytest.fixture
def paced_env(monkeypatch, one_thread):
    monkeypatch.setenv("PACED_T", "0.001")
    monkeypatch.setenv("PACED_SIZE", "8")
    monkeypatch.setenv("PACED_STEP_S", str(STEP_S))


def test_a_user_datasets_images_shape_the_step_alone_and_it_reads_its_known_length(paced_env):
    """paced:sleep_map gives 3 x 8 x 8 float images whatever --image-size says (224 here): the step alone is
    measured on those, and its fixed 50 ms step reads 50 ms (on 224-px bytes, which the model would have had to
    convert as it never does fed, a 100 ms step read 104-111 ms on the loaded 2-core box)."""
    data = user_dataset("paced:sleep_map")
    cfg = LoaderConfig(backend=data.format, batch_size=8, image_size=224)
    _, sopts = shape_for_model(data, cfg, StepOptions(model="paced:fixed_step_model", repeats=2, steps=8))
    assert (sopts.image_shape, sopts.image_dtype) == ((3, 8, 8), "float32")
    x, _ = Trainer(sopts).synthetic_batch()
    assert x.shape == (8, 3, 8, 8) and x.dtype == torch.float32
    r = measure_step(sopts)
    assert r.image_shape == [3, 8, 8] and r.image_dtype == "float32" and r.image_size is None
    assert "S=3x8x8:float32" in r.config_key
    assert r.step_ms_mean == pytest.approx(STEP_S * 1000, rel=0.05), r.step_ms_repeats


def test_a_user_transform_over_image_files_shapes_the_step(paced_env, datasets):
    """paced:sleep_transform turns each decoded file into a 3 x 8 x 8 float tensor: that, not --image-size."""
    data = as_data(datasets["image-files"])
    cfg = LoaderConfig(backend="files", batch_size=4, image_size=32, transform="paced:sleep_transform")
    assert loader_image(data, cfg) == ((3, 8, 8), "float32")
    sopts = shape_step(StepOptions(model="paced:fixed_step_model", input="image"), [(data, cfg)])
    assert sopts.image_shape == (3, 8, 8)


def test_dataperfs_own_decode_keeps_the_image_size(datasets):
    """dataperf's decode gives 3 x image_size^2 uint8 by construction: no sample is read, the step keeps its
    side, and its key reads as before."""
    data = as_data(datasets["image-files"])
    cfg = LoaderConfig(backend="files", batch_size=4, image_size=32, transform="imagenet-train")
    assert loader_image(data, cfg) is None
    _, sopts = shape_for_model(data, cfg, StepOptions(model="paced:fixed_step_model"))
    assert sopts.image_shape is None and sopts.image_size == 32
    x, _ = Trainer(sopts).synthetic_batch()
    assert x.shape == (4, 3, 32, 32) and x.dtype == torch.uint8


def broken_first_sample():
    return Broken()


class Broken(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int):
        raise ValueError("sample 0 is damaged")


def test_a_sample_that_fails_leaves_the_step_as_configured_for_the_trials_to_name():
    """The probe is no place to report a broken sample: the trials read the same sample and name it."""
    data = user_dataset("tests.measure.test_fed:broken_first_sample")
    assert loader_image(data, LoaderConfig(backend=data.format, batch_size=2)) is None


def test_host_time_between_steps_holds_what_the_hook_after_each_step_took(paced_env, monkeypatch):
    """Known answer for between_ms: a hook after each step that sleeps 30 ms, one worker giving a batch of 4
    paced 50 ms samples every 200 ms, a step busy 50 ms. Each step after the first has the hook's 30 ms in its
    between_ms (a sleep never returns early: a bound load cannot break)."""
    import time

    from dataperf.measure.fed import EpochStream, train_loop
    from dataperf.measure.trial import TrialOptions, make_batches

    monkeypatch.setenv("PACED_T", "0.05")
    data = user_dataset("paced:sleep_map")
    cfg, sopts = shape_for_model(data, LoaderConfig(backend=data.format, batch_size=4, num_workers=1),
                                 StepOptions(model="paced:fixed_step_model", batch_size=4))
    times, _ = train_loop(EpochStream(make_batches(data, cfg, TrialOptions())), Trainer(sopts), 4,
                          on_step=lambda: time.sleep(0.03))
    assert len(times.between_ms) == 4, times.between_ms
    assert all(b >= 30 for b in times.between_ms[1:]), times.between_ms


def _waves(handover_s: float, steps: int, first: int, wave_s: float = 1.0, workers: int = 4, b: int = 8,
           busy_s: float = 0.05) -> list[tuple[float, float]]:
    """(wait, busy) of each step fed by `workers` that share the cores and finish a batch each together every
    wave_s (workers x b / wave_s samples/s), from batch `first`, the window starting as that batch's wave comes
    (a warm-up that ended on a wait); each batch's hand-over takes handover_s."""
    out, now = [], (first // workers + 1) * wave_s
    for j in range(first, first + steps):
        ready = max(now, (j // workers + 1) * wave_s) + handover_s
        out.append((ready - now, busy_s))
        now = ready + busy_s
    return out


def _times(steps: list[tuple[float, float]], b: int, starts: set[int] = frozenset()) -> tuple[StepTimes, float]:
    t, now = StepTimes(), 0.0
    for i, (wait, busy) in enumerate(steps):
        t.asks_s.append(now)
        t.wait_s.append(wait)
        t.arrivals.append(Arrival(now + wait, 0, b, 0))
        t.starts.append(i in starts)
        now += wait + busy
    return t, now


@pytest.mark.parametrize("handover_s", [0.0, 0.03])
def test_the_steady_rate_counts_whole_waves_of_workers_that_deliver_together(handover_s):
    """4 workers deliver 4 batches of 8 together every second (32 samples/s); the window starts as a wave comes,
    the model (50 ms a step) eats its 3 ready batches at once and ends inside a later wave: 10 steps over two
    repeats hold 2 waits and 10 batches, a plain count reads 36 samples/s (x1.14); whole waves read 32 exactly,
    whatever each batch's hand-over (the usual wait) costs."""
    steps = _waves(handover_s, 10, first=1)
    plain = 8 * len(steps) / sum(w + b for w, b in steps)
    assert plain > 1.1 * 32  # the bias the cut removes
    split = StartSplit()
    for part in (steps[:5], steps[5:]):  # two repeats, one run: training goes on between them
        split.add(*_times(part, 8), workers=4, cuda=False)
    assert split.steady_samples_per_s == pytest.approx(32, rel=1e-9)
    assert split.steady_idle_fraction == pytest.approx(1 - 4 * 0.05 / 1.0, rel=1e-9)
    assert split.waves_counted() == 1  # the run's two waits bound one whole wave: what the record says
    walls, waits = split.trace_ms()
    assert len(walls) == len(waits) == 10 and waits[3] == pytest.approx(1000 * steps[3][0], abs=0.01)


def test_a_fed_runs_steady_steps_are_kept_whole_and_an_epoch_start_is_its_own_window():
    """The loader ahead (no step waits beyond the usual): every steady step counts, at the model's 160 samples/s;
    an epoch start's first `workers` steps are its window, not steady."""
    steps = [(0.0, 0.05)] * 10
    steps[4] = (0.4, 0.05)  # the epoch start: a fresh worker's first batch
    split = StartSplit()
    split.add(*_times(steps, 8, starts={4}), workers=2, cuda=False)
    assert split.steady_samples_per_s == pytest.approx(160)
    assert split.windows == [pytest.approx((0.5, 16))]
    assert split.start_costs_s() == [pytest.approx(0.4)]


def test_a_fed_runs_hiccups_are_not_waves_and_the_run_counts_whole():
    """The loader ahead, two 20-ms hiccups three steps apart in twenty 50-ms steps (waits 3.8% of the wall, under
    AHEAD_SHARE): no waves. Cut to the span between them, as waves would be, one hiccup counts over 3 steps'
    wall: 11.8% idle, INPUT-BOUND where the run idled 3.8%."""
    steps = [(0.0, 0.05)] * 20
    steps[8] = steps[11] = (0.02, 0.05)
    split = StartSplit()
    split.add(*_times(steps, 8), workers=2, cuda=False)
    assert split.steady_samples_per_s == pytest.approx(160 / 1.04)
    assert split.steady_idle_fraction == pytest.approx(0.04 / 1.04)
    assert split.waves_counted() == 0
