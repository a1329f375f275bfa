"""Where a batch is made (a forked DataLoader worker, or the main process without workers): the time the Dataset
takes to give its samples and the time the collate_fn takes, timed by the watch hook around the fetcher. Each
worker writes its totals to a file of its own (fetch.pid*.jsonl), the main process keeps them per loader."""

from __future__ import annotations

import contextlib
import json
import os

from dataperf_watch_state import FLUSH_S, State, cpu, fail_once, perf


def timed_fetch(real, s: State):
    """A fetcher's fetch (one batch: the Dataset's samples, then the collate_fn) with the two parts timed, booked
    in s."""

    def fetch(self, possibly_batched_index):
        t0 = perf()
        real_collate = self.collate_fn
        spent = [0.0]

        def collate(data):
            t1 = perf()
            try:
                return real_collate(data)
            finally:
                spent[0] += perf() - t1

        self.collate_fn = collate
        try:
            batch = real(self, possibly_batched_index)
        finally:
            self.collate_fn = real_collate
        try:
            _on_fetch(s, self, perf() - t0 - spent[0], spent[0], possibly_batched_index)
        except Exception as e:
            fail_once("DataLoader fetch", e)
        return batch

    return fetch


_WORKER: dict = {}  # this worker's totals, its file and when it last wrote


def _on_fetch(s: State, fetcher, fetch_s: float, collate_s: float, index) -> None:
    n = len(index) if isinstance(index, (list, tuple)) else 1
    if os.getpid() == s.owner:  # no workers: the batch was made here, for the loader the fetcher was tagged with
        c = cpu()
        acc = s.fetch.setdefault(getattr(fetcher, "_dataperf_id", None), [0, 0, 0.0, 0.0])
        acc[0], acc[1], acc[2], acc[3] = acc[0] + 1, acc[1] + n, acc[2] + fetch_s, acc[3] + collate_s
        s.hook_s += cpu() - c + 4 * s.call_cost_s
        return
    w = _WORKER
    if w.get("pid") != os.getpid():  # the first batch of this worker (a fork copies the parent's dict)
        import multiprocessing.util

        w.clear()
        w.update(pid=os.getpid(), batches=0, samples=0, fetch_s=0.0, collate_s=0.0, last=0.0,
                 path=os.path.join(s.out_dir, f"fetch.pid{os.getpid()}.jsonl"))
        multiprocessing.util.Finalize(None, _write_worker, exitpriority=100)  # run as the worker exits
    w["batches"] += 1
    w["samples"] += n
    w["fetch_s"] += fetch_s
    w["collate_s"] += collate_s
    now = perf()
    if now - w["last"] > FLUSH_S:
        _write_worker()
        w["last"] = now


def _write_worker() -> None:
    """This worker's totals so far, one line (the reader keeps the last)."""
    w = _WORKER
    if w.get("pid") != os.getpid():
        return
    line = {"t": "fetch", "pid": w["pid"], "parent": os.getppid(), "batches": w["batches"],
            "samples": w["samples"], "fetch_s": w["fetch_s"], "collate_s": w["collate_s"]}
    with contextlib.suppress(OSError), open(w["path"], "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")

