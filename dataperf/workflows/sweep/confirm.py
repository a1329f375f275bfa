"""The model fed from the leading configs (sweep --confirm, tune's fed check), and the verdict written down as a
decision record."""

from __future__ import annotations

import time
from dataclasses import asdict, replace

from dataperf import verdict
from dataperf.data import as_data
from dataperf.errors import UserError, describe_failure
from dataperf.measure.step import StepOptions, measure_step
from dataperf.results import DecisionResult, E2EResult, LoaderConfig, LoaderResult, Record, StepResult
from dataperf.workflows import budget
from dataperf.workflows.sweep.plan import ConfirmOptions
from dataperf.workflows.sweep.state import SweepState

Fed = tuple[LoaderResult, LoaderConfig]  # a loader trial and the config it is fed in (itself or a variant)


def confirm(state: SweepState, copts: ConfirmOptions, left_s: float | None = None) -> tuple[list[E2EResult],
                                                                                           str | None]:
    """The fed loop (e2e) on the K configs verdict.confirm_candidates names and on the variants of the first
    (verdict.variants: pin_memory on CUDA, persistent workers where start-up is over 5% of an epoch), in
    interleaved rounds (A B, then B A, ...), each run recorded with its round and compared with its loader trial
    and the step alone at its batch size (e2e.compare: the prediction and the effects, a starved training process
    among them); run_e2e's warm-up covers the batches the workers queue ahead. The verdict then picks by the fed
    rate (verdict.recommend). With left_s (--budget), only the runs that fit it (budget.fit_confirm); the second
    value says what was cut."""
    step, sopts = state.step, state.step_opts
    cands = verdict.confirm_candidates(state.records, step, state.headroom, copts.k)
    fed = fed_order(cands, sopts.device, copts.fullest_only)
    rounds, cut = copts.rounds, None
    if left_s is not None and fed:
        fit = _fit(fed, step, sopts, copts, left_s)
        fed, rounds, cut = fed[:fit.k], fit.rounds, fit.cut
    if not fed:
        return [], cut
    return _feed(state, fed, rounds, copts), cut


def fed_order(cands: list[LoaderResult], device: str, fullest_only: bool = False) -> list[Fed]:
    """What the fed loop runs, in order: with fullest_only (tune: its search chose the knobs), each candidate
    once in its fullest variant; else the first's fullest variant, each other candidate's fullest, then the
    first's other variants and its own config, each config once."""
    fed: list[Fed] = [(t, t.loader_config) for t in cands]
    if fullest_only:
        return [(t, verdict.fullest(t, device)) for t in cands]
    if not cands:
        return fed
    more = [(cands[0], v) for v in verdict.variants(cands[0], device)]
    # the fullest variant first: where the budget leaves one or two fed configs, feed what a GPU script runs,
    # pinned and persistent (the H200, ResNet-50: pinning gained 17-36% fed at 16 workers, persistent workers
    # 2-4% on top; a budget that fed the pinned one alone answered persistent_workers=False beside a note
    # saying "use --persistent-workers", at 0.945 of the best)
    kept = [x for x in more if x[1].persistent_workers and not cands[0].config.get("persistent_workers")]
    pinned = [x for x in more if x[1].pin_memory and not cands[0].config.get("pin_memory") and x not in kept]
    # then every other candidate, fullest too, before the leader's other variants: a cut budget compares
    # worker counts like with like, not one count's knobs (the H100, WebDataset, ResNet-50 bf16: a budget
    # that fed 16 workers pinned and pinned persistent answered 16, at 0.931 of the 12 it never fed)
    lead = (kept + pinned + fed)[:1]
    others = [(t, verdict.fullest(t, device)) for t in cands[1:]]
    by_key: dict[str, Fed] = {}
    for x in lead + others + kept + pinned + fed[:1] + more:
        by_key.setdefault(x[1].key(), x)  # each config once, where it first comes
    return list(by_key.values())


def _fit(fed: list[Fed], step: StepResult, sopts: StepOptions, copts: ConfirmOptions,
         left_s: float) -> budget.ConfirmFit:
    """How many of the fed configs, in how many rounds, fit left_s (a step measured alone at each other batch
    size counts once)."""
    once, seen = [], {step.batch_size}
    for _, cfg in fed:
        once.append(0.0 if cfg.batch_size in seen else budget.step_remeasure_s(cfg.batch_size, step, sopts))
        seen.add(cfg.batch_size)
    return budget.fit_confirm([budget.fed_run_s(cfg, step, copts.steps, copts.repeats, copts.warmup,
                                                t.samples_per_s_median, t.startup_s_median, t.epoch_samples)
                               for t, cfg in fed], copts.rounds, left_s, once)


def _feed(state: SweepState, fed: list[Fed], rounds: int, copts: ConfirmOptions) -> list[E2EResult]:
    """The fed runs in interleaved rounds, each kept in the state (and --out) as it ends."""
    from dataperf.workflows.e2e import TAIL_CI, compare, run_e2e

    sopts, alone = state.step_opts, {state.step.batch_size: state.step}
    runs: list[E2EResult] = []
    with state.bar(f"confirm ({len(fed)} configs x {rounds} rounds, fed)", len(fed) * rounds) as advance:
        for rnd in range(1, rounds + 1):
            for t, cfg in fed if rnd % 2 else fed[::-1]:
                if cfg.batch_size not in alone:
                    alone[cfg.batch_size] = measure_step(replace(sopts, batch_size=cfg.batch_size))
                # a run extended for its tail (TAIL_CI) takes no more than its share of the budget left
                topts = replace(state.opts, collect=False)
                if state.opts.deadline is not None:
                    share = (state.opts.deadline - time.monotonic()) / (len(fed) * rounds - len(runs))
                    topts = replace(topts, deadline=time.monotonic() + share)
                try:
                    r = run_e2e(state.datas.get(t.data) or as_data(t.data), cfg, sopts, copts.steps, copts.repeats,
                                copts.warmup, predict=False, topts=topts, until_ci=TAIL_CI)
                    compare(r, t, alone[cfg.batch_size])
                except (KeyboardInterrupt, UserError):
                    raise
                except Exception as e:  # a worker crash mid-run: that config is not confirmed, the rest go on
                    r = E2EResult(data=t.data, config=asdict(cfg), config_key=cfg.key(), model=sopts.model,
                                  status="failed", error=describe_failure(e))
                r.confirm_round = rnd
                r.variant_of = t.config_key if cfg.key() != t.config_key else None
                state.add(r)
                runs.append(r)
                advance(1)
    return runs


def decision_record(command: str, rec: verdict.Recommendation, recs: list[Record], wall_s: float,
                    budget_s: float | None) -> DecisionResult:
    """The recommendation as a record (DecisionResult): the pick, the verdict, the rates it expects, and each
    fed config's predicted rate beside its measured one."""
    pick, cfg = rec.pick, rec.pick_config
    step = verdict.latest_step(recs)
    d = DecisionResult(command=command, data=pick.data if pick else "", config=asdict(cfg) if cfg else {},
                       config_key=cfg.key() if cfg else "", outcome=rec.outcome, input_bound=rec.input_bound,
                       binding_limit=rec.binding_limit or "", model=step.model if step else "",
                       device=step.device if step else "", confirmed=rec.confirmed,
                       lower_bound=rec.lower_bound, lower_bound_why=rec.lower_bound_why,
                       trials=len(verdict.ok_loaders(recs)), wall_s=wall_s, budget_s=budget_s,
                       answer="\n".join(verdict.answer(rec)))
    if step is not None:
        d.step_samples_per_s = step.samples_per_s
    if rec.predicted_samples_per_s is not None:
        d.predicted_samples_per_s = rec.predicted_samples_per_s
        d.predicted_stall_fraction = rec.predicted_stall_fraction
    for k in ("steady_samples_per_s", "steady_stall_fraction", "epoch_start_s", "epoch_start_fraction",
              "epoch_samples"):
        v = getattr(rec, k)
        if v is not None:
            setattr(d, k, v)
    win = next((f for f in rec.fed if f.trial is pick and cfg is not None and f.config.key() == cfg.key()), None)
    if win is not None:
        d.fed_samples_per_s, d.fed_stall_fraction = win.samples_per_s, win.stall_fraction
        d.fed_samples_per_s_rounds = win.rounds_samples_per_s
    if rec.outcome == "no_trials":
        d.status, d.error = "failed", "no trial succeeded: nothing to decide on"
    if rec.lower_bound and rec.input_bound:
        d.input_bound = None  # not settled: the configs that could feed the model were not all measured
    if step is not None:
        d.predictions = [{"config": f.config.key(), "predicted": verdict.predicted_fed(f.trial, step, f.config),
                          "measured": f.samples_per_s, "kind": "fed"} for f in rec.fed]
    return d
