"""The contract every collector keeps: start() and stop() -> its figures, stored in a record under its name as
plain JSON. What the figures mean to a person is said where records are read back (dataperf.verdict.observed)."""

from __future__ import annotations

from typing import Any, Protocol


class Collector(Protocol):
    name: str

    def start(self) -> None: ...

    def stop(self) -> dict[str, Any]: ...
