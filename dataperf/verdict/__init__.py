"""The judging: which trials count, which config to use, and whether the model will wait on its data.

Everything here returns data (a Recommendation, a Fit, a record); the commands only format it, so `tune`, the
benchmarks and the tests read the decision itself instead of parsing a printed line. One module a question:
- rates.py: what a config gives the model (training rate, model rate fed, predicted fed rate, CPU cap, cost order);
- effects.py: why a fed run and the separate measurements can disagree;
- recommend.py: the pick (judged trials, --confirm's candidates, fed rates, the Recommendation);
- answer.py: the decision in the user's terms;
- findings.py: what a table of trials cannot show by itself (idle workers, the verdict's caveats);
- fits.py: each trial of the loader table against the model (its predicted fed rate, idle share, whether it feeds);
- limits.py: the limits table a limits record holds (its ceilings, the binding one, the stages spending each);
- observed.py: what the collectors saw, as a person reads it (lines, tables, histograms);
- attack.py: the stage of a trial's breakdown to attack (named apart from dataperf.stages, the stage clock);
- ranks.py: `sweep --ranks G` (workers per rank on one host): the pick, what binds, today's practice beside it.
Importers keep writing `from dataperf import verdict` / `verdict.recommend(...)`: the names are re-exported here.
"""

from __future__ import annotations

from dataperf.verdict.answer import answer, dataloader_args
from dataperf.verdict.binding import UNMEASURED, Binding, Contention, contention, fed_ceilings, judge
from dataperf.verdict.effects import (
    CORES_FULL,
    CPU_BOUND,
    Effect,
    EffectName,
    cores_full,
    cores_taken,
    cpu_bound,
    epoch_restarts,
    fed_effects,
    idle_workers,
    loader_effects,
    shared_cpu,
    shared_gpu,
)
from dataperf.verdict.findings import idle_warning, table_findings, verdict_caveats
from dataperf.verdict.fits import TrialFit, trial_fit, trial_fits
from dataperf.verdict.limits import LimitRow, limit_rows
from dataperf.verdict.ranks import RanksAnswer, ranks_settled
from dataperf.verdict.ranks import answer as ranks_answer
from dataperf.verdict.rates import (
    FED_STALL,
    NEAR_BEST,
    NEAR_CONFIRMED,
    SPLIT_POINTS,
    STARVED,
    Fit,
    cost_key,
    cpu_cap,
    epoch_start_s,
    fed_epoch_s,
    feeds,
    finite,
    fit,
    latest_step,
    machine_cores,
    model_rate,
    ok_loaders,
    predicted_fed,
    predicted_steady,
    rank_rate,
    restart_stall,
    run_samples,
    run_wall_s,
    sorted_by_rate,
    stream_rate,
    workers_of,
)
from dataperf.verdict.recommend import (
    Basis,
    FedRate,
    Judged,
    Outcome,
    Recommendation,
    by_prediction,
    cheaper_feeding,
    confirm_candidates,
    fastest,
    fed_rates,
    fullest,
    judged,
    latest_limits,
    outshone,
    recommend,
    saved_bound,
    saved_epoch,
    variant_gains,
    variants,
)

__all__ = [
    "answer", "Basis", "Binding", "by_prediction", "cheaper_feeding", "confirm_candidates", "contention",
    "Contention", "cores_full", "CORES_FULL", "cores_taken", "cost_key", "cpu_bound", "CPU_BOUND", "cpu_cap",
    "dataloader_args", "Effect", "EffectName", "epoch_restarts", "epoch_start_s", "fastest", "fed_ceilings",
    "fed_effects", "fed_epoch_s", "fed_rates", "FED_STALL", "FedRate", "feeds", "finite", "Fit", "fit", "fullest",
    "idle_warning", "idle_workers", "judge", "Judged", "judged", "latest_limits", "latest_step", "limit_rows",
    "LimitRow", "loader_effects", "machine_cores", "model_rate", "NEAR_BEST", "NEAR_CONFIRMED", "ok_loaders",
    "Outcome", "outshone", "predicted_fed", "predicted_steady", "rank_rate", "ranks_answer",
    "ranks_settled", "RanksAnswer", "recommend", "Recommendation",
    "restart_stall", "run_samples", "run_wall_s", "saved_bound", "saved_epoch", "shared_cpu", "shared_gpu",
    "sorted_by_rate", "SPLIT_POINTS", "STARVED", "stream_rate", "table_findings", "trial_fit", "trial_fits",
    "TrialFit", "UNMEASURED", "variant_gains", "variants", "verdict_caveats", "workers_of",
]
