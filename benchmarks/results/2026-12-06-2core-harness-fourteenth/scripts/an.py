import json, collections, sys, statistics as st
f=sys.argv[1]
bl=[json.loads(l) for l in open(f)]
gcs=[json.loads(l) for l in open(f+".gc")]
for who in ("plain","dataperf"):
    rows=[b for b in bl if b["who"]==who]
    c=collections.Counter(); ms=collections.Counter()
    for b in rows:
        for g in gcs:
            if b["a"]<=g["at"]<=b["b"]:
                key=("M" if g["main"] else "W", g["gen"]); c[key]+=1; ms[key]+=g["ms"]
    print(who, "blocks", len(rows), "median rate", round(st.median(b["rate"] for b in rows)), {k: (c[k], round(ms[k],1)) for k in sorted(c)})
