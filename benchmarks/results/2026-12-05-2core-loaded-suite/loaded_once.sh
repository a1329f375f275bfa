cd /work/main
python3 -c 'while True: pass' & b1=$!
python3 -c 'while True: pass' & b2=$!
echo "$b1 $b2" > /tmp/busy.pids
t0=$(date +%s)
bash scripts/test.sh > /tmp/loaded_once.log 2>&1; rc=$?
kill $b1 $b2
echo "rc=$rc $(( $(date +%s) - t0 ))s $(git rev-parse --short HEAD)" > /tmp/loaded_once.done
