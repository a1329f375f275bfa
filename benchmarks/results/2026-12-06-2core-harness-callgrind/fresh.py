"""Issue 30 w=0 raw: each timing in a fresh process (plain, dataperf alternating order), ROUNDS rounds."""
import statistics, subprocess, sys
R, E = int(sys.argv[1]), int(sys.argv[2])
py = "/work/main/.venv/bin/python"
rows = {"plain": [], "dataperf": []}
ratios = []
for k in range(R):
    got = {}
    for who in (("plain", "dataperf") if k % 2 == 0 else ("dataperf", "plain")):
        out = subprocess.run([py, "/tmp/h30/side.py", who, str(E)], capture_output=True, text=True, cwd="/work/main")
        got[who] = float(out.stdout.strip().splitlines()[-1])
        rows[who].append(got[who])
    ratios.append(got["plain"] / got["dataperf"])
    print(f"round {k+1}: plain {got['plain']:.2f} us  dataperf {got['dataperf']:.2f} us  ratio {ratios[-1]:.3f}", flush=True)
print("median ratio", round(statistics.median(ratios), 3), "plain", round(statistics.median(rows['plain']), 2),
      "dataperf", round(statistics.median(rows['dataperf']), 2))
