"""How a workflow reports progress without printing: the caller hands it a bar (the command's rich progress bar,
or none), so workflows stay free of rendering."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager

# a progress bar: bar(label, total) is a context yielding advance(n) (commands._render.progress_bar)
Bar = Callable[[str, int | None], AbstractContextManager[Callable[[int], None]]]


def no_bar(label: str, total: int | None) -> AbstractContextManager[Callable[[int], None]]:
    """No progress bar: advance(n) does nothing."""
    return contextlib.nullcontext(lambda n=1: None)
