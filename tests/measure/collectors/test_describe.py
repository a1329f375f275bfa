"""Each collector describes its own stored figures; report renders them without knowing any collector's keys.
The description read back from a record is verdict.observed's (below the measuring layer, so the renderers need
not import it)."""

from dataperf.commands import _render
from dataperf.verdict import observed as collectors
from dataperf.verdict.observed import Histogram, Table

STORED = {  # figures as a record holds them (plain JSON), in an order other than the one shown
    "ebpf": {"available": True, "backend": "bpftrace", "skipped": "bcc: no kernel headers",
             "per_process": [{"pid": 7, "comm": "python", "reads": 12, "read_mib": 1.5}],
             "read_size_histogram_bytes": {"0-4096": 3, "4096-8192": 9}},
    "iostat": {"available": False, "why": "not installed (apt-get install sysstat)"},
    "pidstat": {"available": True, "intervals": 3, "raw_log": "raw/p.log",
                "processes": [{"pid": 7, "ours": True, "cpu_pct_mean": 50.0}, {"pid": 9, "ours": False}]},
    "processes": {"main_includes_exited_workers": True, "per_process": [
        {"pid": 7, "role": "main", "exited": False, "read_syscalls": 40, "storage_read_mib": 2.0,
         "cpu_pct_mean": None, "rss_peak_mib": 300.0}]},
    "disk": {"available": True, "device": "sda", "read_mib_s": 12.34, "read_iops": 99.6, "util_pct": 40.2},
    "nvml": {"available": True, "window_s": 1.0, "gpus": [{"index": 0, "name": "H200", "peak_used_mib": 2048.0,
                                                           "total_mib": 143771.0, "used_mib_windows": [1.0, 2.0]}]},
    "unknown-future-collector": {"available": True},
}


def test_every_collector_describes_its_figures_in_a_fixed_order():
    items = collectors.describe(STORED)
    lines = [i for i in items if isinstance(i, str)]
    assert lines[0] == "disk sda: 12.3 MiB/s read, 100 IOPS, 40% util"
    assert lines[1].startswith("note: read_syscalls count every read()")
    assert lines[2].startswith("note: the main row includes exited workers' counts")
    assert lines[3] == "iostat: unavailable: not installed (apt-get install sysstat)"
    assert lines[4] == "pidstat: 3 intervals, our processes 7 50% CPU (log raw/p.log)"
    assert lines[5] == "note: eBPF first choice skipped: bcc: no kernel headers"
    assert lines[6] == "GPU 0 H200: peak 2,048 of 143,771 MiB used (NVML, 2 x 1 s windows)"
    procs, ebpf = [i for i in items if isinstance(i, Table)]
    assert procs.rows == [["7", "main", "40", "2.00", "-", "300"]]
    assert ebpf.title == "eBPF read syscalls by process (via bpftrace)" and ebpf.rows == [["7", "python", "12", "1.50"]]
    (hist,) = [i for i in items if isinstance(i, Histogram)]
    assert hist.bins == [(0, 4096, 3), (4096, 8192, 9)]


def test_an_unavailable_collector_names_its_stand_in():
    d = {"ebpf": {"available": False, "why": "not root", "fallback": "/proc counters"}}
    assert collectors.describe(d) == ["ebpf: unavailable: not root; /proc counters stand in"]
    assert collectors.describe({}) == [] and collectors.describe({"disk": {}}) == []


def test_report_renders_the_description(capsys, monkeypatch):
    from rich.console import Console

    monkeypatch.setattr(_render, "console", Console(width=200))
    _render.print_collectors(STORED)
    out = capsys.readouterr().out
    for text in ("disk sda: 12.3 MiB/s read", "processes (/proc/PID/io)", "eBPF read syscalls by process",
                 "read() sizes (bytes)", "GPU 0 H200"):
        assert text in out


def test_collectors_that_could_not_run_are_printed_only_when_asked(capsys):
    """The usability review: "unavailable" lines on every command. By default the renderer leaves them out (the
    record keeps them); --verbose prints them."""
    _render.print_collectors(STORED)
    out = capsys.readouterr().out
    assert "disk sda: 12.3 MiB/s read" in out and "unavailable" not in out
    _render.print_collectors(STORED, verbose=True)
    assert "iostat: unavailable: not installed (apt-get install sysstat)" in capsys.readouterr().out


def test_every_collector_has_one_describer():
    """A collector's figures are said in one place, verdict.observed, keyed by the collector's name: each collector
    of dataperf.measure.collectors has its describer there, and no describer is left without its collector."""
    from dataperf.measure.collectors.ebpf import EbpfReadCollector
    from dataperf.measure.collectors.nvml import NvmlMemoryCollector
    from dataperf.measure.collectors.proc import DiskCollector, ProcessCollector
    from dataperf.measure.collectors.sysstat import IostatCollector, PidstatCollector

    names = {c.name for c in (DiskCollector, ProcessCollector, IostatCollector, PidstatCollector,
                              EbpfReadCollector, NvmlMemoryCollector)}
    assert names == set(collectors.DESCRIBERS)
    assert not any(hasattr(c, "describe") for c in (DiskCollector, ProcessCollector, IostatCollector,
                                                    PidstatCollector, EbpfReadCollector, NvmlMemoryCollector))
