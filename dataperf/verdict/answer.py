"""The decision in the user's terms: the DataLoader arguments to set, the rate to expect, the stage to attack."""

from __future__ import annotations

from dataperf import backends
from dataperf.results import WORKERS, LoaderConfig, ranked
from dataperf.verdict.rates import finite, rank_rate
from dataperf.verdict.recommend import Recommendation


def dataloader_args(c: LoaderConfig) -> str:
    """The pick as the arguments to set in the training script (a backend with knobs of its own writes them)."""
    be = backends.of(c)
    if be.own:
        return be.args(c)
    # each DataLoader knob of the answer (results.config.loader_knob: answer) in its place; some with workers only
    kw = [f"{k.name}={getattr(c, k.name)}" for k in ranked("answer")
          if k.metadata["answer"][1] == "always" or getattr(c, WORKERS)]
    where = "" if c.backend in ("files", "user-dataset") else f"  ({c.backend} backend)"
    return "DataLoader(dataset, " + ", ".join(kw) + ")" + where


def answer(rec: Recommendation) -> list[str]:
    """The decision as a user acts on it: the DataLoader arguments to set, the rate and data wait to expect, and
    how sure (the spread of the fed rounds, or that the rate is a prediction)."""
    if rec.pick is None or rec.pick_config is None:
        return []
    out = [f"answer: {dataloader_args(rec.pick_config)}"]
    if rec.step_samples_per_s is None:
        out.append(f"expect: about {rank_rate(rec.pick):,.0f} samples/s from the loader over a training epoch "
                   "(no model given: whether training waits on it is not measured; add --model)")
        return out + ([f"attack: {rec.attack}"] if rec.attack else [])
    fed = next((f for f in rec.fed if rec.confirmed and f.trial is rec.pick
                and f.config.key() == rec.pick_config.key()), None)
    steady, idle = rec.steady_samples_per_s, (rec.steady_stall_fraction or 0) * 100
    start = ""
    if rec.epoch_start_s is not None and finite(rec.epoch_start_s) and rec.epoch_start_fraction is not None:
        start = (f"; each epoch start {rec.epoch_start_s:.1f} s waiting ({rec.epoch_start_fraction:.0%} of an epoch "
                 f"of {rec.epoch_samples:,} samples)")
    if fed is not None:
        rounds = fed.rounds_samples_per_s
        out.append(f"expect: {steady:,.0f} samples/s fed mid-epoch, training waiting on data {idle:.0f}% of the "
                   f"time{start}; over whole fed runs {fed.samples_per_s:,.0f} (rounds {min(rounds):,.0f}-"
                   f"{max(rounds):,.0f})")
    elif steady is not None and finite(steady):
        out.append(f"expect: about {steady:,.0f} samples/s fed mid-epoch, training waiting on data {idle:.0f}% of "
                   f"the time{start} (predicted from the loader and the step measured apart, not confirmed fed)")
    if rec.attack:
        out.append(f"attack: {rec.attack}")
    return out
