"""Find the fastest loader config (or the cheapest that sustains a target) without the grid.

1. limits: the ceilings of one probe config (the cores' worth of workers at the starting batch size): one
   worker's rate, CPU decode, storage, the main process (dataperf.measure.limits);
2. prediction: the batch size the main process needs (it pays per batch), then the fewest workers whose
   summed rate reaches the lowest other ceiling (or the target), no more than have work (shards, batches);
3. neighbours: one step either way on the worker ladder, then on batch size (climbing on while it gains at
   least min_gain; one larger batch that does not gain may be passed over), again from wherever that left
   the best until a pass leaves it in place (at most MAX_PASSES: on the H200, 16 and 32 workers tied at
   batch 32 and 32 won by 24% at batch 128), then a deeper prefetch; these search trials use short repeats;
4. confirmation: the fastest search trial and those its own repeats cannot tell from it (the two fastest at
   least, three at most; with a target the two cheapest that meet it) measured again with the full trial
   options in interleaved rounds (A B C, C B A, ...), so one noisy trial cannot decide; the fastest median
   wins, the cheaper when within 2%.

With a model, the target is the step rate x headroom at each candidate's own batch size (the step measured
there). Every trial is returned and recorded; the pick is always a measured config, never an extrapolation.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from dataperf import results, verdict
from dataperf.data import Data, as_data
from dataperf.measure import limits, preflight
from dataperf.measure.fed import shape_step
from dataperf.measure.limits import LimitsOptions, measure_limits
from dataperf.measure.step import StepOptions, measure_step
from dataperf.measure.trial import TrialOptions, run_trial, worker_cap, worker_ladder
from dataperf.results import DecisionResult, LimitsResult, LoaderConfig, LoaderResult, Record, StepResult
from dataperf.workflows.progress import Bar, no_bar
from dataperf.workflows.tune_predict import Prediction, as_pick, predict_batch, predict_workers, same_ceilings

SEARCH_REPEATS = 3  # repeats of a search trial (at most; the confirmation uses the full trial options)
BATCHES_PER_WORKER = 4  # a search repeat's batches per worker: each worker's steady window has 3 intervals
MAX_BATCH = 256
MAX_PASSES = 3  # passes over the worker and batch axes, each from the best the last one left
BATCH_PATIENCE = 1  # batch sizes passed over that do not gain before the climb stops
MAX_CANDIDATES = 3  # configs the confirmation measures at most (without a target)
SEARCH_SHARE = 0.6  # of a --budget: the search's; the rest for the pick's limits and the fed check


@dataclass
class TuneStep:
    result: LoaderResult
    phase: str  # predict | workers | batch_size | prefetch | confirm
    why: str


@dataclass
class TuneOutcome:
    steps: list[TuneStep] = field(default_factory=list)
    pick: LoaderResult | None = None  # the picked config's last confirmation trial
    pick_samples_per_s: float | None = None  # its median over the confirmation rounds
    confirmed: dict[str, list[float]] = field(default_factory=dict)  # config (short) -> each round's samples/s
    target_samples_per_s: float | None = None  # at the pick's batch size
    met: bool = False
    stop_reason: str = ""
    prediction: Prediction | None = None
    probe: LimitsResult | None = None  # the ceilings the prediction came from
    limits: LimitsResult | None = None  # the ceilings of the pick
    step: StepResult | None = None  # with a model: its step at the pick's batch size
    # with a model: the verdict on the pick (feeds or input-bound, by how much, its binding limit)
    recommendation: verdict.Recommendation | None = None
    # each rate predicted on the way beside what was measured: {"config", "predicted", "measured"}
    predictions: list[dict] = field(default_factory=list)
    pick_config: LoaderConfig | None = None  # the config to set: the pick's, or the fed variant that won
    records: list[Record] = field(default_factory=list)  # with a model: what the verdict judged (fed runs included)
    cut: str = ""  # what --budget cut short, said


@dataclass(frozen=True)
class TuneRequest:
    """What the user asked tune for: the data and the starting config, how a trial measures, the rate to sustain
    (a target, or a model's step rate x headroom) and the bounds of the search."""

    data: Data | Path | str
    base: LoaderConfig
    opts: TrialOptions
    target: float | None = None
    sopts: StepOptions | None = None  # the model, whose step rate x headroom is the target
    headroom: float = 1.2
    min_gain: float = 0.05  # the smallest gain that moves the search one more step
    max_workers: int | None = None  # None: preflight.max_workers()
    max_batch: int = MAX_BATCH
    rounds: int = 2  # confirmation rounds (at least 2)
    out: Path | None = None  # receives every record as it is made
    lopts: LimitsOptions | None = None
    fed_k: int = 2  # with a model: configs the fed loop confirms at the end (0: none)
    # with a model the training batch is the user's: varied only when asked (a batch is a training choice, not
    # a loader knob; the 2026-12-06 audit: tune --model turned batch 8 into 16, 128 and 256)
    vary_batch: bool = False
    budget_s: float | None = None  # the search stops when this is spent and ends with the best it measured
    epoch_samples: int | None = None  # the user's epoch, which the epoch start's share is of (None: the data's)


class Tuner:
    """One tuning run of a TuneRequest; `run()` returns the outcome. on_trial and on_prediction are told of each
    trial and of the prediction as they come, bar shows progress; trial, limits_of and step_of are the
    measurements (replaceable by tests)."""

    def __init__(self, req: TuneRequest, *, on_trial: Callable[[TuneStep], None] | None = None,
                 on_prediction: Callable[[Prediction, LimitsResult], None] | None = None, bar: Bar | None = None,
                 trial: Callable[..., LoaderResult] = run_trial,
                 limits_of: Callable[..., LimitsResult] = measure_limits,
                 step_of: Callable[[StepOptions], StepResult] = measure_step):
        # a real run resolves DATA once; tests that replace the measurements may pass any placeholder
        self.data = as_data(req.data) if trial is run_trial else req.data
        self.base, self.opts, self.fixed_target, self.sopts = req.base.explicit(), req.opts, req.target, req.sopts
        self.headroom, self.min_gain, self.rounds, self.out = req.headroom, req.min_gain, max(req.rounds, 2), req.out
        self.max_workers = req.max_workers if req.max_workers is not None else preflight.max_workers()
        keep = req.sopts is not None and not req.vary_batch
        self.max_batch = req.base.batch_size if keep else max(req.max_batch, req.base.batch_size)
        self.budget_s, self.epoch_samples = req.budget_s, req.epoch_samples
        self.deadline = time.monotonic() + req.budget_s if req.budget_s is not None else None
        self.on_trial, self.on_prediction = on_trial, on_prediction
        self.trial, self.limits_of, self.step_of, self.lopts = trial, limits_of, step_of, req.lopts
        self.bar = bar or no_bar
        self.fed_k = req.fed_k
        self.res = TuneOutcome()
        self.seen: dict[str, LoaderResult] = {}  # search trials by config key
        self.steps: dict[int, StepResult] = {}  # the model's step by batch size

    # --- measurements -------------------------------------------------------------------------------------

    def _record(self, r: Record) -> None:
        if self.out is not None:
            results.append(self.out, r)

    def step_at(self, batch: int) -> StepResult | None:
        """The model's step at this batch size, measured once."""
        if self.sopts is None:
            return None
        if batch not in self.steps:
            if not self.steps and isinstance(self.data, Data):  # images shaped as the user's code makes them
                self.sopts = shape_step(self.sopts, [(self.data, self.base)])
            self.steps[batch] = self.step_of(replace(self.sopts, batch_size=batch))
            self._record(self.steps[batch])
        return self.steps[batch]

    def target_at(self, batch: int) -> float | None:
        """The rate to sustain at this batch size: the given target, or the model's step rate x headroom."""
        st = self.step_at(batch)
        return st.samples_per_s * self.headroom if st is not None else self.fixed_target

    @property
    def targeted(self) -> bool:
        return self.fixed_target is not None or self.sopts is not None

    def met(self, r: LoaderResult, rate: float | None = None) -> bool:
        """Whether the trial sustains the target. With a model and no workers, loading is serial with the step:
        its fed rate (verdict.predicted_steady) must reach the model's, less the FED_STALL it may idle."""
        t = self.target_at(r.loader_config.batch_size)
        if t is None or r.status != "ok":
            return False
        step = self.step_at(r.loader_config.batch_size)
        if step is not None and not r.config.get("num_workers"):
            return verdict.predicted_steady(r, step) >= (1 - verdict.FED_STALL) * step.samples_per_s
        return (rate or verdict.rank_rate(r)) >= t

    def search_opts(self, cfg: LoaderConfig) -> TrialOptions:
        """Short repeats for the search: enough batches for every worker's steady window, at most 3 repeats."""
        w = max(cfg.num_workers, 1)
        short = max(self.opts.min_batches, BATCHES_PER_WORKER * w + w)
        most = self.opts.max_batches
        return replace(self.opts, repeats=min(self.opts.repeats, SEARCH_REPEATS),
                       max_batches=short if most is None else min(short, most))

    def _run(self, cfg: LoaderConfig, phase: str, why: str, opts: TrialOptions) -> LoaderResult:
        r = self.trial(self.data, cfg, opts)
        self._record(r)
        if r.status != "ok":
            why += f"; failed: {r.error}"
        step = TuneStep(r, phase, why)
        self.res.steps.append(step)
        if self.on_trial:
            self.on_trial(step)
        return r

    def search(self, cfg: LoaderConfig, phase: str, why: str) -> LoaderResult:
        """A search trial (short repeats), run once per config; none starts once the budget's search share is
        spent (_OutOfTime: the search ends with what it measured)."""
        cfg = cfg.explicit()
        if cfg.key() not in self.seen:
            if self.deadline is not None and self.best() is not None and \
                    time.monotonic() > self.deadline - (1 - SEARCH_SHARE) * self.budget_s:
                raise _OutOfTime
            best = self.best()
            r = self._run(cfg, phase, why, self.search_opts(cfg))
            if r.status == "ok" and best is not None:
                r_why = f"{verdict.rank_rate(r) / verdict.rank_rate(best) * 100 - 100:+.0f}% vs the best so far"
                self.res.steps[-1].why += f"; {r_why}"
            self.seen[cfg.key()] = r
        return self.seen[cfg.key()]

    def best(self) -> LoaderResult | None:
        ok = [r for r in self.seen.values() if r.status == "ok"]
        return max(ok, key=verdict.rank_rate) if ok else None

    # --- the search ---------------------------------------------------------------------------------------

    def cap(self, batch: int) -> int | None:
        """The most workers the data can give 3 batches each at this batch size (measure.trial.worker_cap)."""
        return worker_cap(self.data, batch, self.opts.world_size, self.opts.rank) if isinstance(self.data, Data) \
            else None

    def worker_choices(self, batch: int) -> list[int]:
        """The worker ladder up to max_workers, cut at the number that can have work (added when it is not on
        the ladder): more workers than that would idle."""
        ladder = worker_ladder(self.max_workers, dense=False) if self.max_workers > 0 else [0]
        cap = self.cap(batch)
        if cap is not None and cap < ladder[-1] and cap not in ladder:
            ladder.append(cap)
        return sorted(w for w in ladder if w <= self.max_workers and (cap is None or w <= cap))

    def predict(self) -> Prediction:
        """Measure the probe's limits, then predict batch size and workers (module functions above)."""
        probe_w = min(verdict.machine_cores(), self.max_workers)
        probe = replace(self.base, num_workers=probe_w, prefetch_factor=None).explicit()
        with self.bar(f"limits of the probe config {probe.short()}", 5) as advance:
            self.res.probe = lim = self.limits_of(self.data, probe, self.opts, lopts=self.lopts, advance=advance)
        self._record(lim)
        if self.max_batch == self.base.batch_size:
            batch, why_b = self.base.batch_size, f"batch {self.base.batch_size} kept (the training's own)"
        else:
            batch, why_b = predict_batch(lim, self.base.batch_size, self.max_batch, self.fixed_target)
        cap = self.cap(batch)
        p = predict_workers(lim, batch, self.base.batch_size, self.worker_choices(batch), cap, self.target_at(batch),
                            inline=self.sopts is None)
        p.why = f"{why_b}; {p.why}"
        if self.on_prediction:
            self.on_prediction(p, lim)
        return p

    def neighbours(self, axis: str, values: list[int], targeted: bool, patience: int = 0) -> None:
        """One step up and one down along `axis` from the best so far, climbing on in a direction while it
        gains min_gain over the best; without a target, `patience` steps up that do not gain may be passed
        over to the next one (batch size: on 2 cores 32 and 64 tied and 128 gained 9%). With a target: down
        (cheaper) while the target is still met, up only while it is not."""
        for direction in (1, -1):
            frm, misses = None, 0  # frm: a step that did not gain, stepped on from (patience)
            while True:
                best = self.anchor(targeted)
                cur = frm or best
                c = cur.loader_config
                i = values.index(getattr(c, axis)) if getattr(c, axis) in values else None
                if i is None or not 0 <= i + direction < len(values):
                    break
                if targeted and (direction == 1) == self.met(cur):
                    break  # met: only cheaper is worth a trial; not met: only more
                nxt = replace(c, **{axis: values[i + direction]})
                if axis == "num_workers":
                    nxt = replace(nxt, prefetch_factor=c.prefetch_factor if nxt.num_workers else None,
                                  persistent_workers=self.base.persistent_workers and nxt.num_workers > 0)
                was = verdict.rank_rate(best)
                r = self.search(nxt, axis if axis != "num_workers" else "workers",
                                f"one {'up' if direction > 0 else 'down'} from {c.short()}")
                if r.status != "ok":
                    break
                if targeted:
                    if not (self.met(r) if direction < 0 else verdict.rank_rate(r) >= was * (1 + self.min_gain)):
                        break
                elif verdict.rank_rate(r) >= was * (1 + self.min_gain):
                    frm, misses = None, 0
                elif direction > 0 and misses < patience:
                    frm, misses = r, misses + 1
                else:
                    break

    def anchor(self, targeted: bool) -> LoaderResult | None:
        """Where the next neighbour steps from: the cheapest config that met the target, else the fastest."""
        return (self.cheapest_met() if targeted else None) or self.best()

    def cheapest_met(self) -> LoaderResult | None:
        met = [r for r in self.seen.values() if self.met(r)]
        return min(met, key=verdict.cost_key) if met else None

    def candidates(self) -> list[LoaderResult]:
        """What the confirmation measures: the fastest search trial, and beside it the others whose medians its
        own repeats cannot tell from it (at or above its slowest repeat; up to MAX_CANDIDATES in all, else
        the second fastest): on 2 cores a lucky search trial at batch 32 [3126, 2793, 3231] left batch 128
        (2990) third and out of a top two, and the grid's best was not confirmed. With a target, the two
        cheapest that met it (the fastest other one beside a single one; the fastest two when none did)."""
        ok = sorted((r for r in self.seen.values() if r.status == "ok"), key=lambda r: -verdict.rank_rate(r))
        if not self.targeted:
            if not ok:
                return ok
            top = ok[0]
            spread = top.samples_per_s_min / top.samples_per_s_median if top.samples_per_s_median > 0 else 1.0
            low = verdict.rank_rate(top) * (spread if math.isfinite(spread) else 1.0)
            near = [r for r in ok[1:] if verdict.rank_rate(r) >= low]
            return [top, *(near or ok[1:2])[:MAX_CANDIDATES - 1]]
        met = sorted((r for r in ok if self.met(r)), key=verdict.cost_key)
        return (met + [r for r in ok if r not in met])[:2]

    def confirm(self, cands: list[LoaderResult]) -> tuple[LoaderResult, float]:
        """Interleaved rounds with the full trial options; the winner's last trial and its median."""
        rates: dict[str, list[float]] = {c.config_key: [] for c in cands}
        last: dict[str, LoaderResult] = {}
        for k in range(1, self.rounds + 1):
            for c in cands if k % 2 else cands[::-1]:
                r = self._run(c.loader_config, "confirm", f"round {k} of {self.rounds}", self.opts)
                if r.status == "ok":
                    rates[c.config_key].append(verdict.rank_rate(r))
                    last[c.config_key] = r
        med = {key: statistics.median(v) for key, v in rates.items() if v}
        if not med:
            raise _Failed("every confirmation trial failed")
        for key, v in rates.items():
            if v:
                self.res.confirmed[last[key].loader_config.short()] = v
        done = [last[k] for k in med]
        if self.targeted:
            met = [r for r in done if self.met(r, med[r.config_key])]
            if met:
                win = min(met, key=verdict.cost_key)
                return win, med[win.config_key]
        top = max(med.values())
        win = min((r for r in done if med[r.config_key] >= verdict.NEAR_CONFIRMED * top), key=verdict.cost_key)
        return win, med[win.config_key]

    def run(self) -> TuneOutcome:
        t0 = time.monotonic()
        try:
            self._run_all()
        except _Failed as e:
            self.res.stop_reason = str(e)
        self._record(self.decision(time.monotonic() - t0))
        return self.res

    def decision(self, wall_s: float) -> DecisionResult:
        """The outcome as a decision record (sweep.decision_record's), with the prediction's error beside it."""
        from dataperf.workflows.sweep import decision_record

        res = self.res
        rec = res.recommendation
        if rec is None:  # no model: the fastest confirmed (or nothing)
            rec = verdict.Recommendation("best_without_model" if res.pick else "no_trials", pick=res.pick,
                                         best=res.pick, pick_config=res.pick_config,
                                         predicted_samples_per_s=res.pick_samples_per_s)
        d = decision_record("tune", rec, res.records or self.trials(), wall_s, None)
        d.predictions = res.predictions + d.predictions
        return d

    def _run_all(self) -> TuneOutcome:
        try:
            self._search()
        except _OutOfTime:
            self.res.cut = (f"the search stopped at {SEARCH_SHARE:.0%} of the --budget of {self.budget_s:.0f} s, "
                            "with the best it had measured")
        top = self.best()
        if top is None:
            raise _Failed("every trial failed")
        cands = self.candidates()
        if self.sopts is not None and self.fed_k and self.out is not None:
            # the fed loop confirms (fed_check): loader-alone rounds first would only double the time (on the H200
            # they took tune past 5 minutes, the fed rounds included)
            pick = max(cands, key=verdict.rank_rate)
            self.finish(pick, verdict.rank_rate(pick), cands)
        else:
            pick, rate = self.confirm(cands)
            self.finish(pick, rate, cands)
        return self.res

    def _search(self) -> None:
        """The prediction, its trial (or fewer workers until one runs), then the neighbours pass by pass, then a
        deeper prefetch on the best."""
        p = self.res.prediction = self.predict()
        first = replace(self.base, num_workers=p.num_workers, batch_size=p.batch_size, prefetch_factor=None,
                        persistent_workers=self.base.persistent_workers and p.num_workers > 0).explicit()
        r = self.search(first, "predict", p.why)
        if r.status == "ok":
            # a loader rate (the limits' prediction) against the loader trial, not a fed rate: like with like, the
            # rate its batches stream at (steady, else flow: no start-up or tail, what one worker's rate x workers
            # models); the training rate only without either, and the record says which
            rate, basis = verdict.stream_rate(r)
            self.res.predictions.append({"config": first.key(), "predicted": p.samples_per_s,
                                         "measured": rate if rate > 0 else verdict.rank_rate(r),
                                         "measured_as": basis or "training", "kind": "loader"})
        for w in sorted((w for w in self.worker_choices(first.batch_size) if w < first.num_workers), reverse=True):
            if self.best() is not None:
                break  # the predicted config failed: fewer workers until one runs (a pick is always measured)
            self.search(replace(first, num_workers=w, prefetch_factor=None, persistent_workers=False),
                        "workers", f"the predicted {first.num_workers} workers failed: {w}")
        if self.best() is None:
            raise _Failed("every trial failed, the predicted config and every smaller worker count; see the errors "
                          "above")
        targeted = self.targeted
        sizes = [b for b in (self.base.batch_size * 2**k for k in range(12)) if b <= self.max_batch]
        start: str | None = None
        for _ in range(MAX_PASSES):
            cur = self.anchor(targeted)
            if cur is None or cur.config_key == start:
                break  # the last pass left the best where it found it
            start = cur.config_key
            self.neighbours("num_workers", self.worker_choices(cur.loader_config.batch_size), targeted)
            if len(sizes) > 1 and not (targeted and self.cheapest_met()):
                self.neighbours("batch_size", sizes, False, patience=BATCH_PATIENCE)
        top = self.best()
        c = top.loader_config if top is not None else None
        if c is not None and c.num_workers and not (targeted and self.cheapest_met()):
            self.search(replace(c, prefetch_factor=2 * (c.prefetch_factor or 2)), "prefetch",
                        f"deeper prefetch on {c.short()}")

    def finish(self, pick: LoaderResult, rate: float, cands: list[LoaderResult]) -> None:
        """The pick, whether it meets the target, its limits (the probe's when it is the probe config) and,
        with a model, the verdict on it; and why the search stopped."""
        res = self.res
        cfg = pick.loader_config
        res.pick, res.pick_samples_per_s = pick, rate
        res.target_samples_per_s = self.target_at(cfg.batch_size)
        res.step = self.step_at(cfg.batch_size)
        res.met = self.met(pick, rate)
        probe = res.probe
        if probe is not None and (probe.config_key == pick.config_key or same_ceilings(probe, cfg)):
            res.limits = probe if probe.config_key == pick.config_key else as_pick(probe, cfg)
            limits.put(res.limits, limits.model_ceiling(res.step))
            limits.bind(res.limits, pick)
        else:
            with self.bar(f"limits of the pick {cfg.short()}", 5) as advance:
                res.limits = self.limits_of(self.data, cfg, self.opts, step=res.step, best=pick, lopts=self.lopts,
                                            advance=advance)
        self._record(res.limits)
        if res.step is not None:
            self.fed_check(res)
        res.pick_config = res.recommendation.pick_config if res.recommendation and res.recommendation.confirmed \
            else cfg
        others = [c.loader_config.short() for c in cands if c.config_key != pick.config_key]
        against = f" against {' and '.join(others)}" if others else ""
        rounds = f"median of {self.rounds} interleaved rounds{against}"
        if res.target_samples_per_s is None:
            res.stop_reason = (f"no further neighbour gained {self.min_gain * 100:.0f}%; confirmed {cfg.short()} "
                               f"at {rate:,.0f} samples/s ({rounds})")
        elif res.met:
            res.stop_reason = (f"target met by {cfg.short()}: {rate:,.0f} >= {res.target_samples_per_s:,.0f} "
                               f"samples/s ({rounds})")
        else:
            rec = res.recommendation
            bound = (f"binding limit: {rec.binding_limit}" if rec is not None and rec.binding_limit else
                     f"lowest ceiling: {res.limits.binding_limit or 'none measured'}")
            res.stop_reason = (f"target of {res.target_samples_per_s:,.0f} samples/s not met: the best, "
                               f"{cfg.short()}, gives {rate:,.0f} ({rounds}); {bound}")


    def trials(self) -> list[LoaderResult]:
        """Every trial the search and the confirmation made, the last of each config."""
        last = {t.result.config_key: t.result for t in self.res.steps}
        return list(last.values())

    def fed_check(self, res: TuneOutcome) -> None:
        """With a model: the verdict over the search, and the fed loop (sweep --confirm's) on its two candidates
        in interleaved rounds, so the pick is the cheapest within 2% of the best fed rate, as sweep's is. Each is
        fed as a GPU script runs it (pinned on CUDA, persistent where the epoch's start counts), not beside each
        variant: what pinning and persistence gain fed is `sweep --confirm`'s to show, at twice the runs."""
        from dataperf.workflows.sweep import ConfirmOptions, SweepState, confirm

        recs: list[Record] = [*self.trials(), res.limits, res.step]
        if self.out is not None and self.fed_k and isinstance(self.data, Data):
            state = SweepState(self.out, self.opts, datas={self.data.spec: self.data}, step_opts=self.sopts,
                               headroom=self.headroom, written=list(recs), step=res.step, bar=self.bar)
            left = self.deadline - time.monotonic() if self.deadline is not None else None
            runs, cut = confirm(state, ConfirmOptions(self.fed_k, fullest_only=True), left)
            if cut:
                res.cut = "; ".join(x for x in (res.cut, cut) if x)
            recs += runs
        res.recommendation = verdict.recommend(recs, res.step, self.headroom, self.epoch_samples)
        res.records = recs


class _Failed(Exception):
    """The search cannot go on (every trial failed); its message is the stop reason."""


class _OutOfTime(Exception):
    """The budget's share for the search is spent: the search ends with what it measured."""
