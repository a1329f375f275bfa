from dataperf.measure.collectors.sysstat import parse_table

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
