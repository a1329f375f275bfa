"""GPU memory used per device from NVML (nvidia-ml-py), in 1 s windows, and its peak: what
`nvidia-smi --query-gpu=memory.used -l 1` shows, without parsing it. NVML sees the whole device (CUDA
context, allocator cache, other processes), so a shared GPU's figure includes its other users."""

from __future__ import annotations

import threading
import time
from typing import Any

from dataperf.results import MIB


class NvmlMemoryCollector:
    """Samples every `interval_s`; each `window_s` window keeps its highest reading per GPU."""

    name = "nvml"

    def __init__(self, window_s: float = 1.0, interval_s: float = 0.1):
        self.window_s = window_s
        self.interval_s = interval_s
        self.why: str | None = None
        self.handles: list = []
        self.windows: list[list[int]] = []  # per GPU, the peak of each window in bytes
        self._cur: list[int] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        try:
            import pynvml
        except ImportError:
            self.why = "nvidia-ml-py not installed (pip install 'dataperf[gpu]')"
            return
        try:
            pynvml.nvmlInit()
            n = pynvml.nvmlDeviceGetCount()
        except Exception as e:  # no driver, no device
            self.why = f"NVML unavailable: {type(e).__name__}: {e}"
            return
        if n == 0:
            self.why = "NVML found no GPU"
            return
        self._nvml = pynvml
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        self.windows = [[] for _ in self.handles]
        self._cur = [0] * n
        self._thread = threading.Thread(target=self._loop, daemon=True, name="dataperf-nvml")
        self._thread.start()

    def _used(self) -> list[int]:
        return [self._nvml.nvmlDeviceGetMemoryInfo(h).used for h in self.handles]

    def _loop(self) -> None:
        end = time.monotonic() + self.window_s
        while True:
            self._cur = [max(a, b) for a, b in zip(self._cur, self._used(), strict=True)]
            if time.monotonic() >= end or self._stop.is_set():
                for w, v in zip(self.windows, self._cur, strict=True):
                    w.append(v)
                self._cur = [0] * len(self.handles)
                end += self.window_s
            if self._stop.wait(self.interval_s):
                for w, v in zip(self.windows, self._cur, strict=True):
                    if v:
                        w.append(v)  # the last, partial window
                return

    def stop(self) -> dict[str, Any]:
        if self._thread is None:
            return {"available": False, "why": self.why or "not started"}
        self._stop.set()
        self._thread.join()
        gpus = []
        for i, (h, w) in enumerate(zip(self.handles, self.windows, strict=True)):
            name = self._nvml.nvmlDeviceGetName(h)
            total = self._nvml.nvmlDeviceGetMemoryInfo(h).total
            gpus.append({"index": i, "name": name.decode() if isinstance(name, bytes) else name,
                         "total_mib": total / MIB, "peak_used_mib": max(w, default=0) / MIB,
                         "used_mib_windows": [round(v / MIB, 1) for v in w]})
        return {"available": True, "window_s": self.window_s, "gpus": gpus}
