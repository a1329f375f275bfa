"""Find a loader config that sustains a target rate without running the whole grid: grow workers until the
gain flattens, then prefetch, then batch size; stop as soon as the target is met or gains stop.

Every trial it runs is returned and recorded; the pick is always one of them (never an extrapolation)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dataperf import verdict
from dataperf.records import LoaderConfig, LoaderResult, StepResult
from dataperf.runner import TrialOptions, run_trial, worker_ladder
from dataperf.step import StepOptions, measure_step


@dataclass
class TuneStep:
    result: LoaderResult
    phase: str
    why: str


@dataclass
class TuneOutcome:
    steps: list[TuneStep] = field(default_factory=list)
    pick: LoaderResult | None = None
    target_samples_per_s: float | None = None
    met: bool = False
    stop_reason: str = ""
    # with a model: the verdict over every trial tune ran (which feeds the model, by how much)
    recommendation: verdict.Recommendation | None = None


def target_from_model(sopts: StepOptions, headroom: float) -> tuple[StepResult, float]:
    """The rate to sustain for a model: its measured step rate times the headroom."""
    step = measure_step(sopts)
    return step, step.samples_per_s * headroom


class Tuner:
    def __init__(self, data, base: LoaderConfig, opts: TrialOptions, target: float | None = None,
                 min_gain: float = 0.10, max_workers: int | None = None, max_batch_doublings: int = 2,
                 on_trial: Callable[[TuneStep], None] | None = None,
                 trial: Callable[..., LoaderResult] = run_trial, step: StepResult | None = None,
                 headroom: float = 1.2):
        self.data, self.base, self.opts, self.target = data, base, opts, target
        self.step, self.headroom = step, headroom
        self.min_gain = min_gain
        self.max_workers = max_workers if max_workers is not None else max(worker_ladder())
        self.max_batch_doublings = max_batch_doublings
        self.on_trial = on_trial
        self.trial = trial
        self.out = TuneOutcome(target_samples_per_s=target)
        self.best: LoaderResult | None = None

    def _run(self, cfg: LoaderConfig, phase: str) -> LoaderResult:
        r = self.trial(self.data, cfg, self.opts)
        if r.status != "ok":
            why = f"failed: {r.error}"
        elif self.best is None:
            why = "first measurement"
        else:
            gain = r.samples_per_s_median / self.best.samples_per_s_median - 1
            why = f"{gain * 100:+.0f}% vs best so far"
        step = TuneStep(r, phase, why)
        self.out.steps.append(step)
        if self.on_trial:
            self.on_trial(step)
        return r

    def _met(self, r: LoaderResult) -> bool:
        return self.target is not None and r.status == "ok" and r.samples_per_s_median >= self.target

    def _better(self, r: LoaderResult) -> bool:
        """Keep r only if it beats the best by the minimum gain (noise-sized gains are not worth a worker)."""
        if r.status != "ok":
            return False
        if self.best is None or r.samples_per_s_median >= self.best.samples_per_s_median * (1 + self.min_gain):
            self.best = r
            return True
        return False

    def _finish(self, reason: str, met: bool) -> TuneOutcome:
        self.out.stop_reason, self.out.met = reason, met
        self.out.pick = self.best
        if self.step is not None:
            self.out.recommendation = verdict.recommend([s.result for s in self.out.steps], self.step, self.headroom)
        return self.out

    def _try(self, cfg: LoaderConfig, phase: str) -> tuple[bool, bool]:
        """Run one trial: (target met, kept as the new best)."""
        r = self._run(cfg, phase)
        if self._met(r):
            self.best = r
            return True, True
        return False, self._better(r)

    def _target_met(self) -> TuneOutcome:
        return self._finish(f"target met by {self.best.loader_config.short()}", True)

    def run(self) -> TuneOutcome:
        cfg = self.base
        # 1. workers, with prefetch at torch's default. One worker often only matches the main process (it
        # does the same work elsewhere), so the ladder stops after two steps in a row without a gain.
        misses = 0
        for w in worker_ladder(self.max_workers):
            had_best = self.best is not None
            met, kept = self._try(replace(cfg, num_workers=w, prefetch_factor=None,
                                          persistent_workers=cfg.persistent_workers and w > 0).explicit(), "workers")
            if met:
                return self._target_met()
            misses = 0 if kept or not had_best else misses + 1
            if misses >= 2:
                break
        if self.best is None:
            return self._finish("every trial failed", False)
        cfg = self.best.loader_config
        # 2. prefetch depth (only meaningful with workers): try each, keep the best
        if cfg.num_workers > 0:
            for pf in (4, 8):
                if self._try(replace(cfg, prefetch_factor=pf), "prefetch")[0]:
                    return self._target_met()
            cfg = self.best.loader_config
        # 3. batch size: per-batch overhead shrinks with size, so every doubling is tried
        start = cfg
        for k in range(1, self.max_batch_doublings + 1):
            if self._try(replace(start, batch_size=start.batch_size * 2**k), "batch_size")[0]:
                return self._target_met()
        cfg = self.best.loader_config
        # 4. larger batches can use more workers: one more rung of the ladder at the new batch size
        if cfg.batch_size != start.batch_size and 0 < cfg.num_workers * 2 <= self.max_workers:
            if self._try(replace(cfg, num_workers=cfg.num_workers * 2), "refine")[0]:
                return self._target_met()
        if self.target is None:
            return self._finish("gains stopped (no target given: best found)", False)
        return self._finish(f"gains stopped below the target of {self.target:.0f} samples/s", False)
