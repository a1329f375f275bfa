import json, sys, statistics as st
for f in sys.argv[1:]:
    bl=[json.loads(l) for l in open(f)]
    K=max(b["k"] for b in bl)+1
    r=[]
    for k in range(K):
        p=[b["rate"] for b in bl if b["k"]==k and b["who"]=="plain"][0]; d=[b["rate"] for b in bl if b["k"]==k and b["who"]=="dataperf"][0]
        r.append(d/p)
    print(f, "pairs", K, "median", round(st.median(r),3), "sum-ratio", round(sum(b["rate"] for b in bl if b["who"]=="dataperf")/sum(b["rate"] for b in bl if b["who"]=="plain"),3), "lowest", sorted(round(x,3) for x in r)[:6])
