import os

import pytest

from dataperf.measure.collectors import ebpf
from dataperf.measure.collectors.ebpf import EbpfReadCollector
from dataperf.measure.trial import TrialOptions, run_trial
from dataperf.results import LoaderConfig


def test_without_privileges_says_why_and_names_the_stand_in(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    c = EbpfReadCollector()
    c.start()
    out = c.stop()
    assert out["available"] is False and "root" in out["why"]
    assert "/proc/PID/io" in out["fallback"]


def test_every_backend_failing_lists_each_reason(monkeypatch):
    monkeypatch.setattr(ebpf, "precheck", lambda: None)

    class Broken:
        def __init__(self, name):
            self.name = name

        def start(self):
            raise RuntimeError(f"{self.name} is broken")

    c = EbpfReadCollector([Broken("bcc"), Broken("bpftrace")])
    c.start()
    out = c.stop()
    assert out["available"] is False
    assert "bcc: bcc is broken" in out["why"] and "bpftrace: bpftrace is broken" in out["why"]


def real_ebpf_why() -> str | None:
    why = ebpf.precheck()
    if why:
        return why
    c = EbpfReadCollector()
    c.start()
    out = c.stop()
    return None if out["available"] else out["why"]


def test_real_ebpf_counts_reads_of_main_and_workers(datasets):
    why = real_ebpf_why()
    if why:
        pytest.skip(f"eBPF unavailable here: {why}")
    cfg = LoaderConfig(backend="files", batch_size=8, num_workers=2, cache="cold")
    r = run_trial(datasets["image-files"], cfg, TrialOptions(repeats=3, min_batches=3, ebpf=True))
    assert r.status == "ok", r.error
    e = r.collectors["ebpf"]
    assert e["available"] is True and e["backend"] in ("bcc", "bpftrace")
    workers = [p for p in e["per_process"] if p["comm"] == "pt_data_worker"]
    assert len(workers) >= 2
    # each worker open()s and read()s its files: at least one read per sample over 3 repeats
    assert sum(p["reads"] for p in workers) >= 96 * 3
    assert e["read_mib_total"] > 0 and e["read_size_histogram_bytes"]
