"""Past the top of the worker ladder: whether the best config's answer is settled, and if not, the next worker
count to try (or why the answer stays a lower bound)."""

from __future__ import annotations

from dataclasses import replace

from dataperf import backends, verdict
from dataperf.data import Data
from dataperf.measure import preflight
from dataperf.measure.trial import STEADY_BATCHES, next_rung, worker_cap
from dataperf.results import LoaderConfig, Record, StepResult
from dataperf.workflows.sweep.plan import data_id

MIN_GAIN = 0.05  # a worker count past the top of the ladder is tried while the top beat the rung below by this


def edge_trial(recs: list[Record], trials: list[tuple[Data, LoaderConfig]], step: StepResult | None,
               headroom: float, fed: verdict.FedRate | None = None) -> tuple[tuple[Data, LoaderConfig] | None, str]:
    """The next worker count to try when the best config is the largest count tried with its other settings and
    the answer is not settled there: it still beat the count below by MIN_GAIN (a plateau is settled: on the H200
    20 workers' training rate was 16's, 1,904 against 1,903, and 20 fed 9% less), and with a model it does not
    feed it. The next rung of the ladder, if the data can give it STEADY_BATCHES batches a worker and
    it is within the workers a command accepts, and the best's workers left cores idle (verdict.cores_full: more
    workers would only share the same cores) and wait on nothing they share (verdict.contention: a lock or a
    rate-limited store, where more workers only wait longer). One rung at a time: the pick can land on any rung
    (the 2026-12-06 audit's S2: 2 -> 6 -> 8 skipped the 3-4 that reached a lock's cap). (None, why not) when
    there is nothing to try; (None, "") when it is settled. `fed`: the config fed best, once the fed loop
    measured it: its fed idle mid-epoch outranks the prediction (the audit's S3: 11% idle fed at the largest
    count tried, the prediction said it fed, and no more workers were tried)."""
    ok = [r for r in verdict.judged(recs).trials if step is None or r.config.get("decode")]
    if not ok:
        return None, ""
    best = fed.trial if fed is not None else \
        (verdict.by_prediction(recs, step)[0] if step is not None else ok[0])
    cfg = best.loader_config
    if cfg.backend in backends.ONE_STREAM:
        return None, ""
    same = [r for r in ok if replace(r.loader_config, num_workers=0, prefetch_factor=None,
                                      persistent_workers=False).key()
            == replace(cfg, num_workers=0, prefetch_factor=None, persistent_workers=False).key()]
    top = max(r.config["num_workers"] for r in same)
    if cfg.num_workers != top:
        return None, ""
    if fed is not None:
        if fed.steady_stall_fraction <= verdict.FED_STALL:
            return None, ""
    elif step is not None and verdict.feeds(best, step, headroom):
        return None, ""
    below = [r for r in same if r.config["num_workers"] < top]
    if (step is None and not below) or \
            (below and verdict.rank_rate(best) < (1 + MIN_GAIN) * max(map(verdict.rank_rate, below))):
        return None, ""
    if verdict.cores_full(best) or verdict.cores_taken(best, verdict.latest_limits(recs, best)) or \
            verdict.contention(ok, best) is not None:
        return None, ""
    data = next((d for d, _ in trials if data_id(d.spec) == data_id(best.data)), None)
    if data is None:
        return None, ""
    nxt = next_rung(top)
    cap = worker_cap(data, cfg.batch_size)
    if cap is not None and top >= cap:
        return None, (f"{nxt} workers cannot each get {STEADY_BATCHES} batches of this data at batch "
                      f"{cfg.batch_size} (at most {cap})")
    if top >= preflight.max_workers():
        return None, f"{top} workers is the most dataperf runs on this machine"
    # no further than the data can run (the H200's 16,000 images at batch 256: 20, where the ladder said 24) nor
    # than a command accepts
    nxt = min(nxt, cap or nxt, preflight.max_workers())
    return (data, replace(cfg, num_workers=nxt, prefetch_factor=cfg.prefetch_factor or None)), ""


def lower_bound(recs: list[Record], trials: list[tuple[Data, LoaderConfig]], step: StepResult | None,
                headroom: float, extend: bool, rec: verdict.Recommendation) -> str:
    """Why the answer is a lower bound ("" when it is settled): the best config (fed, where the fed loop measured
    it) is the largest worker count tried, it does not feed the model (without one: it still gained on the count
    below), and the next count was not tried: the budget ended first, the worker counts were the user's, or the
    data or the machine cannot run it. A fed best below the largest count tried is settled: more workers fed
    less (CI's 2 cores: 0 workers fed 517 samples/s, 1 fed 231)."""
    nxt, why = edge_trial(recs, trials, step, headroom, fed_best(rec))
    if nxt is not None:
        n = nxt[1].num_workers
        return (f"{n} workers were not tried (the budget ended first)" if extend else
                f"the best is the largest of the --num-workers given; try {n} and more")
    return why


def fed_best(rec: verdict.Recommendation) -> verdict.FedRate | None:
    """The config fed fastest, where the verdict rests on fed runs (its fed figures outrank the predictions)."""
    return verdict.fastest(rec.fed) if rec.confirmed and rec.fed else None
