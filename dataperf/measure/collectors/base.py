"""The contract every collector keeps, and the plain data its description is made of (lines, tables and
histograms that a renderer draws without knowing any collector's keys)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class Table:
    """Rows a person reads as a table; cells already formatted, every column right-aligned."""

    title: str
    columns: list[str]
    rows: list[list[str]]


@dataclass
class Histogram:
    title: str
    bins: list[tuple[int, int, int]]  # (low, high, count)


Description = list[str | Table | Histogram]


class Collector(Protocol):
    name: str

    def start(self) -> None: ...

    def stop(self) -> dict[str, Any]: ...

    @staticmethod
    def describe(figures: dict[str, Any]) -> Description: ...
