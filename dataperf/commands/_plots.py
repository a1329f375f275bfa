"""The pictures a person would rather look at than read: a sweep's rates against workers, with the model's rate,
the configs fed to it, the pick and the failures (`rates`), and where a sample's time goes (`waterfall`). Each
takes records and writes a PNG; none measures."""

from __future__ import annotations

import math
from pathlib import Path

from dataperf import backends, verdict
from dataperf.commands._render import _named
from dataperf.results import LoaderConfig, LoaderResult, Record, StepResult
from dataperf.verdict import ok_loaders, rank_rate, workers_of


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _panel(c: LoaderConfig, cache: str) -> tuple:
    """What a panel holds fixed: batch size, decode, cache, worker type (lines within it vary the rest)."""
    return (c.batch_size, c.decode, cache, c.worker_type or "")


def _line(c: LoaderConfig) -> str:
    """A line's label: the backend and the knobs other than workers (a backend with its own: those other than its
    workers, as DALI's queue; x is then its threads)."""
    be = backends.of(c)
    if be.own:
        rest = [f"{k.metadata['label']}={getattr(c, k.name)}" for k in be.own if k.name != be.workers_knob]
        x = next(k.metadata["label"] for k in be.own if k.name == be.workers_knob)
        return " ".join([c.backend, *rest, f"(x: {x})"])
    c = c.explicit()
    knobs = [f"pf={c.prefetch_factor}" if c.num_workers else "", "pin" if c.pin_memory else "",
             "persist" if c.persistent_workers else ""]
    return " ".join([c.backend, *(k for k in knobs if k)])


LOG_RATIO = 10  # the loader over this many times the model: a log axis (on a linear one the model sat at its foot)


def _x(c: LoaderConfig) -> int:
    return verdict.workers_of(c)


def rates(results: list[Record], step: StepResult | None, rec: verdict.Recommendation, path: Path,
          headroom: float = 1.2) -> Path | None:
    """A sweep as a picture (rates_figure) in a PNG; None when no trial succeeded."""
    fig = rates_figure(results, step, rec, headroom)
    return _save(fig, path) if fig is not None else None


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def rates_figure(results: list[Record], step: StepResult | None, rec: verdict.Recommendation,
                 headroom: float = 1.2):
    """samples/s a training epoch gets (the ranking rate) against workers, a line per backend and
    prefetch/pin/persistence, one panel per batch size, decode and cache; the model's step rate and the rate it
    needs (x headroom) as lines; each config fed to the model at its fed rate (diamonds); the pick ringed; the
    configs that failed as crosses on the axis, in a panel of their own where every trial at that batch size
    failed. Each point's bar spans its repeats (min to max), so noise is not read as a winner. A log axis
    where the loader runs over LOG_RATIO x the model: the model's line, the fed points and the pick are then not
    squeezed into the bottom of it. None when no trial succeeded."""
    ok = ok_loaders(results)
    if not ok:
        return None
    failed = [r for r in results if isinstance(r, LoaderResult) and r.status != "ok"]
    panels: dict[tuple, list[LoaderResult]] = {}
    for r in ok + failed:
        panels.setdefault(_panel(r.loader_config, r.cache_mode or r.config.get("cache", "")), []).append(r)
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6.0 * len(panels), 6.2), squeeze=False)
    top = max(rank_rate(r) * _spread(r)[1] for r in ok)
    model = step.samples_per_s if step is not None and step.status == "ok" else None
    log = bool(model) and top > LOG_RATIO * model
    for ax, (key, rs) in zip(axes[0], sorted(panels.items(), key=lambda kv: str(kv[0])), strict=True):
        lines = _lines([r for r in rs if r.status == "ok"])
        for label, pts in sorted(lines.items()):
            xs, ys, lo, hi = zip(*sorted(pts), strict=True)
            (drawn,) = ax.plot(xs, ys, marker="o", ms=4, lw=1.2, label=label)
            ax.errorbar(xs, ys, yerr=[[y - a for y, a in zip(ys, lo, strict=True)],
                                      [b - y for y, b in zip(ys, hi, strict=True)]],
                        fmt="none", ecolor=drawn.get_color(), elinewidth=1, capsize=3)
        if model:
            ax.axhline(model, color="k", lw=1, label=f"model: step alone {model:,.0f} samples/s (bs {step.batch_size})")
            ax.axhline(model * headroom, color="k", lw=1, ls=":", label=f"needed with {headroom:g}x headroom")
        fed_pts = [(_x(f.config), f.samples_per_s) for f in rec.fed
                   if any(r is f.trial for r in rs) and math.isfinite(f.samples_per_s)]  # a variant's own point
        if fed_pts:
            ax.plot(*zip(*fed_pts, strict=True), marker="D", color="tab:red", ms=7, ls="none",
                    label="fed to the model (--confirm), pooled over its rounds")
        pick = rec.pick
        if pick is not None and any(r is pick for r in rs):
            y = rec.fed_samples_per_s if rec.confirmed and rec.fed_samples_per_s else rank_rate(pick)
            ax.plot([_x(rec.pick_config or pick.loader_config)], [y], marker="o", ms=16, mfc="none", mec="tab:green",
                    mew=2, ls="none", label=f"pick: {(rec.pick_config or pick.loader_config).short()}")
        bad = [r for r in rs if r.status != "ok"]
        if bad:  # on the x axis (its y in axes units), at 0 on a linear axis and at its foot on a log one
            ax.plot([_x(r.loader_config) for r in bad], [0] * len(bad), marker="x", color="tab:red", ms=9, mew=2,
                    ls="none", clip_on=False, transform=ax.get_xaxis_transform(),
                    label=f"failed ({len(bad)}): {_why(bad[0])}")
        bs, decode, cache, wt = key
        every = " (every trial failed)" if len(bad) == len(rs) else ""
        ax.set_title(f"bs={bs} {'decoded' if decode else 'raw bytes'}, {cache} cache{f', {wt} workers' if wt else ''}"
                     f"{every}", fontsize=9)
        ax.set_xticks(sorted({_x(r.loader_config) for r in rs}))  # the counts tried
        ax.set_xlabel("num_workers")
        ax.set_ylabel("samples/s a training epoch gets" + (" (log scale)" if log else ""))
        if log:
            low = min([model, *(y for _, y in fed_pts), *(rank_rate(r) * _spread(r)[0] for r in ok)])
            ax.set_yscale("log")
            ax.set_ylim(low / 1.5, max(top, model * headroom) * 1.5)
        else:
            ax.set_ylim(0, max(top, (model or 0) * headroom) * 1.15)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1, frameon=False)
    return fig


Point = tuple[int, float, float, float]  # workers, the rate, and its repeats' low and high


def _spread(r: LoaderResult) -> tuple[float, float]:
    """The repeats' range as factors of their median (min/median, max/median), applied to the ranking rate;
    (1, 1) where a record has no range."""
    med, lo, hi = r.samples_per_s_median, r.samples_per_s_min, r.samples_per_s_max
    if not med or not (lo == lo and hi == hi):
        return 1.0, 1.0
    return min(lo / med, 1.0), max(hi / med, 1.0)


def _point(x: int, r: LoaderResult) -> Point:
    y, (lo, hi) = rank_rate(r), _spread(r)
    return x, y, y * lo, y * hi


def _lines(rs: list[LoaderResult]) -> dict[str, list[Point]]:
    """Each line's points; 0 workers (no prefetch, no persistence) starts every line of its backend and pinning,
    or is a line of its own where there is none."""
    lines: dict[str, tuple[LoaderConfig, list[Point]]] = {}
    zero = []
    for r in rs:
        c = r.loader_config
        if not backends.of(c).own and c.num_workers == 0:
            zero.append(r)
        else:
            lines.setdefault(_line(c), (c, []))[1].append(_point(_x(c), r))
    for r in zero:
        c = r.loader_config
        mates = [pts for lc, pts in lines.values() if (lc.backend, lc.pin_memory) == (c.backend, c.pin_memory)]
        for pts in mates or [lines.setdefault(_line(c), (c, []))[1]]:
            pts.append(_point(0, r))
    return {label: sorted(pts) for label, (_, pts) in lines.items()}


def _why(r: LoaderResult) -> str:
    """The first failure's cause, short enough for a legend."""
    e = (r.error or "").split(";")[0]
    return e if len(e) <= 60 else e[:57] + "..."


def waterfall(r: LoaderResult, path: Path) -> Path | None:
    """A trial's stage times (waterfall_figure) in a PNG; None when it has none."""
    fig = waterfall_figure(r)
    return _save(fig, path) if fig is not None else None


def waterfall_figure(r: LoaderResult):
    """A sample's time as a waterfall: each worker stage a bar starting where the one before it ended, the
    worker's total (its shares are of that, as the stage to attack says), then the consumer's side (the hand-over,
    the copy to the device) on rows of their own, and the period the measured rate gives each worker: from the
    steady rate where the trial calls it valid, else from the rate a training epoch gets (rank_rate), the one the
    trial stands behind."""
    from dataperf.stages import STAGES, WORKER_STAGES

    plt = _pyplot()

    ms = r.stage_ms_per_sample
    if not ms:
        return None
    rows: list[tuple[str, float, float, str]] = []  # name, start, width, colour
    t = 0.0
    ms = {k: ms[k] for k in sorted(ms, key=lambda k: STAGES.index(k) if k in STAGES else len(STAGES))}  # pipeline order
    for k, v in ms.items():
        if k in WORKER_STAGES:
            rows.append((k, t, v, "tab:blue"))
            t += v
    rows.append(("worker total", 0.0, t, "tab:gray"))
    rows += [(f"{k} (consumer)", 0.0, v, "tab:orange") for k, v in ms.items() if k not in WORKER_STAGES]
    fig, ax = plt.subplots(figsize=(7.5, 0.5 * len(rows) + 1.6))
    y = list(range(len(rows)))[::-1]
    ax.barh(y, [w for _, _, w, _ in rows], left=[s0 for _, s0, _, _ in rows], color=[c for *_, c in rows])
    for yi, (name, s0, w, _) in zip(y, rows, strict=True):
        share = f" ({w / t * 100:.0f}%)" if t > 0 and "consumer" not in name else ""
        ax.text(s0 + w, yi, f" {w:.3g} ms{share}", va="center", fontsize=8)
    rate, which = (r.samples_per_s_median, "steady") if r.steady_valid else (rank_rate(r), "training")
    streams = max(r.active_workers or workers_of(r.config), 1)  # a one-stream backend: its threads (DALI)
    period = 1000 * streams / rate if rate and rate == rate and rate > 0 else None
    if period:
        ax.axvline(period, color="tab:red", ls="--", lw=1, label=f"a worker's period at the {which} rate "
                                                                  f"{rate:,.0f} samples/s ({streams} streams): "
                                                                  f"{period:.3g} ms")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_yticks(y, [name for name, *_ in rows])
    ax.set_xlabel("ms a sample")
    ax.set_xlim(0, max(t, period or 0.0, *(w for _, _, w, _ in rows)) * 1.35)
    ax.set_title(f"where a sample's time goes:\n{_named(r)}", fontsize=9)
    return fig
