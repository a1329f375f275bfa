"""What is observed while a trial runs. Each collector has start() and stop() -> dict of figures, stored in records
as plain JSON under its name. What those figures mean to a person (lines, tables, histograms) is said once, by
dataperf.verdict.observed, which reads them back from a record: a new collector is its module here plus its
describer there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dataperf.measure.collectors.base import Collector

__all__ = ["Collector", "Running", "default_collectors"]


def default_collectors(data: Path | None, raw_dir: Path | None, tag: str, ebpf: bool = False) -> list[Collector]:
    """The /proc collectors always; sysstat when installed; eBPF when asked for."""
    from dataperf.measure.collectors.proc import DiskCollector, ProcessCollector
    from dataperf.measure.collectors.sysstat import IostatCollector, PidstatCollector

    cs: list[Collector] = [DiskCollector(data), ProcessCollector()]
    cs += [IostatCollector(data, raw_dir, tag), PidstatCollector(raw_dir, tag)]
    if ebpf:
        from dataperf.measure.collectors.ebpf import EbpfReadCollector

        cs.append(EbpfReadCollector())
    return cs


class Running:
    """Start a set of collectors together and gather their figures by name."""

    def __init__(self, collectors: list[Collector]):
        self.collectors = collectors
        self.results: dict[str, Any] | None = None

    def __enter__(self) -> Running:
        for c in self.collectors:
            c.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.results is None:  # the trial failed mid-way: still stop threads and subprocesses
            self.stop()

    def watch(self, pids: list[int]) -> None:
        """Tell collectors about new loader workers at once, before a short-lived one can exit unseen."""
        for c in self.collectors:
            if hasattr(c, "watch"):
                c.watch(pids)

    def stop(self) -> dict[str, Any]:
        self.results = {c.name: c.stop() for c in self.collectors}
        return self.results
