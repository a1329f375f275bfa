"""Repeated figures summarised (median, min, max, spread, percentiles) and the unit constants they are read in."""

from __future__ import annotations

import statistics

MIB = 1024 * 1024
HIGH_SPREAD_PCT = 15.0  # repeats spread wider than this (max - min over the median) get a "high spread" note


def summarize(values: list[float]) -> dict[str, float]:
    """Median with spread (min, max, relative spread) of repeated measurements."""
    if not values:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "spread_pct": float("nan")}
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    spread = (hi - lo) / med * 100 if med else 0.0
    return {"median": med, "min": lo, "max": hi, "spread_pct": spread}


def fmt(v: float | None, nd: int = 0) -> str:
    """A figure as a person reads it: thousands separated, nd decimals, '-' when not measured (None, NaN)."""
    if v is None or v != v:
        return "-"
    return f"{v:,.{nd}f}"


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]; NaN for no values."""
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
