"""Step 2 of tune (dataperf.workflows.tune): the config the probe's limits point to, the batch size the main
process needs, then the fewest workers that reach the lowest other ceiling or the target; and whether the
probe's ceilings stand for the pick's, so they are not measured twice."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from dataperf import verdict
from dataperf.results import LimitsResult, LoaderConfig

MAIN_MARGIN = 1.5  # predict a batch at which the main process takes this multiple of what the workers give
INLINE_MARGIN = 1.2  # with a fixed target: no workers when one stream gives this multiple of it


@dataclass
class Prediction:
    """The config the limits point to, the rate they predict for it, and the arithmetic as a sentence."""

    num_workers: int
    batch_size: int
    samples_per_s: float
    why: str


def _ok(v: float | None) -> bool:
    return v is not None and math.isfinite(v) and v > 0


def loader_ceiling(lim: LimitsResult) -> float:
    """The lowest of the ceilings that no worker count moves: CPU decode and storage (inf when unmeasured)."""
    return min([v for v in (lim.decode_samples_per_s, lim.storage_samples_per_s) if _ok(v)], default=math.inf)


def predict_batch(lim: LimitsResult, start: int, max_batch: int, target: float | None = None) -> tuple[int, str]:
    """The main process pays per batch (receive, unpickle, pin), so its ceiling grows with the batch: the
    smallest doubling of the starting batch at which it would take MAIN_MARGIN x what the workers can give
    (the decode and storage ceilings, or the target when lower), assuming its cost is all per batch."""
    main, goal = lim.main_process_samples_per_s, min(loader_ceiling(lim), target or math.inf)
    if not (_ok(main) and math.isfinite(goal)):
        return start, f"batch {start} kept (main-process or loader ceilings not measured)"
    if main >= MAIN_MARGIN * goal:
        return start, (f"batch {start} kept: the main process takes {main:,.0f} samples/s, {main / goal:.1f}x "
                       f"the {goal:,.0f} the workers need to give")
    b = start
    while b * 2 <= max_batch and main * b / start < MAIN_MARGIN * goal:
        b *= 2
    return b, (f"batch {b}: at batch {start} the main process takes {main:,.0f} samples/s, under "
               f"{MAIN_MARGIN:g}x the {goal:,.0f} the workers need to give, and it pays per batch")


def predict_workers(lim: LimitsResult, batch: int, start: int, choices: list[int], cap: int | None,
                    target: float | None = None, inline: bool = True) -> Prediction:
    """The fewest workers whose summed rate (active workers x one worker's rate) reaches what the other ceilings
    allow (decode, storage, the main process scaled to the batch), or the target when lower; no more than
    have work. Where a sample keeps its core busy (CPU-bound decode), workers past the usable cores share
    them and add nothing: the H200's probe ran 16 workers at 151 samples/s each, 20 were predicted to reach a
    target of 2,640 and gave 1,915 (fed, 1,564 against 16 workers' 1,613). When no count reaches the goal,
    the fewest that give the most. Without a measured worker rate: the cores. `inline` False (a model is the
    target): never no workers, whose loading is serial with the model's step, so that one stream's rate alone
    says nothing of what it feeds (the 2026-12-06 audit's S1b: 0 predicted from a loader rate of 53 against a
    target of 18, fed 12 with the model idle 21%, where one worker fed it fully)."""
    r1 = lim.per_worker_samples_per_s
    main = lim.main_process_samples_per_s * batch / start if _ok(lim.main_process_samples_per_s) else math.inf
    ceiling = min(loader_ceiling(lim), main)
    usable = [w for w in choices if cap is None or w <= max(cap, 1)] or choices[:1]
    if not _ok(r1):
        w = min((w for w in usable if w >= verdict.machine_cores()), default=usable[-1])
        return Prediction(w, batch, math.nan, f"{w} workers (the cores): one worker's rate was not measured")
    goal = min(ceiling, target or math.inf)
    cores = lim.usable_cores or verdict.machine_cores()
    cpu, wall = lim.decode_cpu_ms_per_sample, lim.decode_wall_ms_per_sample
    cpu_bound = verdict.cpu_bound(lim)

    def gives(w: int) -> float:  # w workers with work (num_workers=0: the main process, one stream)
        n = min(max(w, 1), cap or max(w, 1))
        return min(n, cores) * r1 if cpu_bound else n * r1

    if inline and target is not None and 0 in usable and r1 >= INLINE_MARGIN * target:
        w = 0
    else:
        counts = [w for w in usable if w > 0] or usable
        most = max(gives(w) for w in counts)
        w = next((w for w in counts if gives(w) >= min(goal, most)), counts[-1])
    what = f"the target {goal:,.0f}" if target is not None and goal == target else f"the ceiling {goal:,.0f}"
    rate = min(gives(w), ceiling)
    if gives(w) >= goal:
        reach = f"reach {what} samples/s"
    elif cap is not None and w >= cap:
        reach = f"fall short of {what} samples/s (only {cap} can have work)"
    elif cpu_bound and w >= cores:
        reach = (f"fall short of {what} samples/s (decode keeps a core busy, {cpu:.2f} ms CPU of {wall:.2f} ms a "
                 f"sample: more workers than the {cores} cores share them)")
    else:
        reach = f"fall short of {what} samples/s"
    return Prediction(w, batch, rate, f"{w} workers x {r1:,.0f} samples/s each {reach}: "
                                      f"predicted {rate:,.0f} samples/s at batch {batch}")


def same_ceilings(probe: LimitsResult, cfg: LoaderConfig) -> bool:
    """Whether the probe's ceilings are cfg's: the same workers and batch size (storage readers, the worker's rate,
    the main process's batches and the copies all follow those two; prefetch and persistence move none), the same
    pinning. The H200's tune measured them twice, 16 s more, for a pick that differed in prefetch alone."""
    c = probe.config
    return (c.get("num_workers"), c.get("batch_size"), c.get("pin_memory")) == \
        (cfg.num_workers, cfg.batch_size, cfg.pin_memory)


def as_pick(probe: LimitsResult, cfg: LoaderConfig) -> LimitsResult:
    """The probe's ceilings recorded for the pick (the verdict finds limits by config), saying where they came
    from."""
    was = LoaderConfig(**probe.config).short()
    return replace(probe, config=asdict(cfg), config_key=cfg.key(),
                   workers_how=f"{probe.workers_how}; measured on the probe config {was} (the same workers, batch "
                               "size and pinning: the same ceilings)")
