"""The data files a process of the job opens for reading, counted by the watch hook (a Python audit hook on
"open"; code, libraries and /proc are left out), so a loop that reads its data without a DataLoader (nanoGPT's
`np.memmap` in `get_batch`) still names what it read."""

from __future__ import annotations

import contextlib
import os

from dataperf_watch_state import State

NOT_DATA_SUFFIXES = (".py", ".pyc", ".so", ".pth", ".json", ".cfg", ".toml", ".txt", ".yaml", ".yml", ".pkl", ".lock")
NOT_DATA_DIRS = ("/proc/", "/sys/", "/dev/", "/etc/", "/usr/", "/tmp/torchinductor")
MAX_FILES = 500  # distinct data files counted; past that only those already seen


def open_counter(s: State):
    """The audit hook that counts, in s.opened, each data file this process opens for reading."""

    def on_audit(event: str, args: tuple) -> None:
        """Count a data file opened for reading (audit event "open": path, mode, flags). Cheap for every other
        event, and never raises (an audit hook that raises fails the job's own call)."""
        if event != "open":
            return
        try:
            path, mode, flags = args
            if not isinstance(path, str) or os.getpid() != s.owner:
                return
            if mode is not None and any(c in mode for c in "wax+") or mode is None and flags & 3:
                return
            if path in s.opened:
                s.opened[path] += 1
            elif len(s.opened) < MAX_FILES and not path.endswith(NOT_DATA_SUFFIXES):
                full = os.path.abspath(path)
                if not full.startswith(NOT_DATA_DIRS) and not full.startswith(s.skip_roots):
                    s.opened[path] = 1
        except Exception:
            return

    return on_audit


def files_read(opened: dict[str, int], n: int = 10) -> list[dict]:
    """The most-opened data files, with their sizes (the files that no longer exist are left out)."""
    out = []
    for path, opens in sorted(opened.items(), key=lambda kv: -kv[1]):
        with contextlib.suppress(OSError):
            if os.path.isfile(path):
                out.append({"path": os.path.abspath(path), "opens": opens, "bytes": os.path.getsize(path)})
        if len(out) >= n:
            break
    return out

