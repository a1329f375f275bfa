import sys

from dataperf.measure.collectors import sysstat
from dataperf.measure.collectors.sysstat import _SysstatTool, has_report, parse_table

IOSTAT = """Linux 6.18.44 (vm) \t12/02/26 \t_x86_64_\t(2 CPU)

Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s  aqu-sz  %util
vda            150.00   4800.00     0.00   0.00    0.18    32.00    1.00      4.00    0.04   3.60
sdb              1.00      4.00     0.00   0.00    0.10     4.00    0.00      0.00    0.00   0.10

Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s  aqu-sz  %util
vda             50.00   1600.00     0.00   0.00    0.20    32.00    0.00      0.00    0.01   1.20
"""

PIDSTAT = (
    "# Time   UID   PID   %usr %system  %guest   %wait    %CPU   CPU   kB_rd/s   kB_wr/s kB_ccwr/s iodelay  Command\n"
    " 1796215583  0  3020  12.00   4.00    0.00    0.00   16.00     1   5364.00      0.00      0.00       0  python\n"
)


def test_parse_iostat_rows_per_device():
    rows = [r for r in parse_table(IOSTAT, "Device") if r["Device"] == "vda"]
    assert [r["rkB/s"] for r in rows] == ["4800.00", "1600.00"]
    assert rows[0]["%util"] == "3.60"


def test_parse_pidstat_hash_header():
    (row,) = parse_table(PIDSTAT, "Time")
    assert row["PID"] == "3020" and row["%CPU"] == "16.00" and row["kB_rd/s"] == "5364.00"


def test_a_report_is_a_header_with_a_row_after_it():
    header_only = IOSTAT.split("vda")[0]
    assert not has_report(header_only, "Device") and not has_report("", "Time")
    assert has_report(IOSTAT, "Device") and has_report(PIDSTAT, "Time")


class _LateTool(_SysstatTool):
    """A stand-in for a sysstat tool on a loaded machine: its first report comes 1.5 s in (due at 1.0 s)."""

    name = binary = "late"
    header_first = "Time"

    def args(self) -> list[str]:
        return [sys.executable, "-c", "import sys, time; time.sleep(1.5); print(sys.argv[1], flush=True); "
                "time.sleep(600)", PIDSTAT]


def test_a_short_trial_waits_for_the_first_report(tmp_path, monkeypatch):
    """A trial shorter than the tools' 1 s interval: the log is read once a whole report is in it, not at a fixed
    1.1 s (CI lost pidstat's first report so); the wait is a hang guard, an hour here."""
    monkeypatch.setattr(sysstat, "REPORT_WAIT_S", 3600.0)
    monkeypatch.setattr(sysstat.shutil, "which", lambda b: sys.executable)
    tool = _LateTool(tmp_path, "t")
    tool.start()
    text = tool.finish()
    assert parse_table(text, "Time")[0]["PID"] == "3020"
