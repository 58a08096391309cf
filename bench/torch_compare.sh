#!/bin/sh
# torch_compare.sh: gnnkit's CPU backend side by side with PyTorch (the anchor,
# ../shared/anchors/torch_gnn_bench.py) on the same graphs, in one run.
#
# For each graph it trains GCN (full graph, forward + backward + Adam) with both,
# alternating which goes first round by round, and it measures the kernels of
# both (SpMM on the GCN-normalised adjacency x [N x 128], SGEMM [N x 128] x
# [128 x 128], copy bandwidth) on the same graph; then it prints medians over
# the rounds and gnnkit's speed-up (PyTorch time / gnnkit time).
#
# Needs: Go, and PyTorch for /usr/bin/python3 (Debian: apt-get install
# python3-torch python3-numpy python3-scipy libjemalloc2). Not part of CI.
#
# usage: bench/torch_compare.sh [-r ROUNDS] [-e EPOCHS] [-g "cora 100k 1m"] [-m "gcn sage"] [-p on|off|both] [-o DIR]
#   -r  rounds (default 3)      -e  timed epochs per run (default 10, after 3 warm-up)
#   -g  graphs: cora (the shared Cora), 100k (R-MAT 100k nodes, 2M edges, 128 features,
#       40 classes, hidden 128), 1m (R-MAT 1M nodes, 15M edges, same widths); default "cora 100k"
#   -m  models (default gcn; the anchor has gcn and sage)
#   -p  thread pinning for both frameworks (default both: on, then off)
#   -o  output directory for the raw JSON lines (default a temporary one)
# environment: ANCHOR (the anchor script), CORA (the Cora folder), GRAPHS (where the
#   synthetic graphs are exported once, default ${TMPDIR:-/tmp}/gnnkit-graphs),
#   THREADS (default 2), PY (default /usr/bin/python3)
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ANCHOR=${ANCHOR:-$ROOT/../shared/anchors/torch_gnn_bench.py}
CORA=${CORA:-$ROOT/../shared/data/cora}
GRAPHS=${GRAPHS:-${TMPDIR:-/tmp}/gnnkit-graphs}
THREADS=${THREADS:-2}
PY=${PY:-/usr/bin/python3}
ROUNDS=3
EPOCHS=10
WHICH="cora 100k"
MODELS=gcn
PIN=both
OUT=""
while getopts r:e:g:m:p:o: opt; do
	case $opt in
	r) ROUNDS=$OPTARG ;;
	e) EPOCHS=$OPTARG ;;
	g) WHICH=$OPTARG ;;
	m) MODELS=$OPTARG ;;
	p) PIN=$OPTARG ;;
	o) OUT=$OPTARG ;;
	*) sed -n '2,26p' "$0"; exit 2 ;;
	esac
done
[ -n "$OUT" ] || OUT=$(mktemp -d "${TMPDIR:-/tmp}/torch_compare.XXXXXX")
mkdir -p "$OUT" "$GRAPHS"
[ -f "$ANCHOR" ] || { echo "torch_compare: no anchor script at $ANCHOR (set ANCHOR)" >&2; exit 1; }
"$PY" -c 'import torch' 2>/dev/null || { echo "torch_compare: $PY cannot import torch (apt-get install python3-torch)" >&2; exit 1; }

echo "building gnnkit" >&2
(cd "$ROOT" && go build -o "$OUT/gnnkit" ./cmd/gnnkit)
GNNKIT=$OUT/gnnkit

# graph NAME -> data folder and hidden width
graph_dir() {
	case $1 in
	cora) echo "$CORA" ;;
	100k) echo "$GRAPHS/rmat100k" ;;
	1m) echo "$GRAPHS/rmat1m" ;;
	*) echo "torch_compare: unknown graph $1" >&2; exit 2 ;;
	esac
}
graph_hidden() { case $1 in cora) echo 16 ;; *) echo 128 ;; esac; }
export_graph() {
	dir=$(graph_dir "$1")
	[ -f "$dir/meta.json" ] && return 0
	case $1 in
	100k) args="--nodes 100000 --avg-degree 20" ;;
	1m) args="--nodes 1000000 --avg-degree 15" ;;
	*) return 0 ;;
	esac
	echo "exporting the anchor's $1 graph to $dir" >&2
	# shellcheck disable=SC2086
	"$PY" "$ANCHOR" $args --feat 128 --classes 40 --hidden 128 --export "$dir" >&2
}

case $PIN in both) PINS="on off" ;; on | off) PINS=$PIN ;; *) echo "-p on|off|both" >&2; exit 2 ;; esac
for g in $WHICH; do export_graph "$g"; done

cat /proc/loadavg >"$OUT/loadavg.before"
for pin in $PINS; do
	gpin=""
	[ "$pin" = on ] && gpin="--pin"
	r=1
	while [ "$r" -le "$ROUNDS" ]; do
		for g in $WHICH; do
			dir=$(graph_dir "$g")
			hid=$(graph_hidden "$g")
			torch() {
				for m in $MODELS; do
					"$PY" "$ANCHOR" --data "$dir" --models "$m" --hidden "$hid" --threads "$THREADS" \
						--epochs $((EPOCHS + 3)) --warmup 3 --pin "$pin" 2>/dev/null |
						sed "s/^{/{\"round\": $r, \"graph\": \"$g\", \"side\": \"torch\", \"pin\": \"$pin\", /" >>"$OUT/epoch.jsonl"
				done
			}
			ours() {
				# shellcheck disable=SC2086
				"$GNNKIT" bench epoch --json --models "$(echo $MODELS | tr ' ' ,)" --data "$dir" --hidden "$hid" --threads "$THREADS" \
					--epochs "$EPOCHS" --warmup 3 --feature-norm none $gpin |
					sed "s/^{/{\"round\": $r, \"graph\": \"$g\", \"side\": \"gnnkit\", \"pin\": \"$pin\", /" >>"$OUT/epoch.jsonl"
			}
			echo "round $r/$ROUNDS pin=$pin graph=$g: epochs" >&2
			if [ $((r % 2)) -eq 1 ]; then torch; ours; else ours; torch; fi
			[ "$g" = cora ] && continue
			echo "round $r/$ROUNDS pin=$pin graph=$g: kernels" >&2
			tk() {
				"$PY" "$ANCHOR" --data "$dir" --micro --micro-width 128 --micro-reps 5 --micro-skip-scipy \
					--threads "$THREADS" --pin "$pin" 2>/dev/null |
					sed "s/^{/{\"round\": $r, \"graph\": \"$g\", \"side\": \"torch\", \"pin\": \"$pin\", /" >>"$OUT/kernels.jsonl"
				"$PY" - "$THREADS" <<'PY' | sed "s/^{/{\"round\": $r, \"graph\": \"$g\", \"side\": \"torch\", \"pin\": \"$pin\", /" >>"$OUT/kernels.jsonl"
import json, statistics, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
a, b, c = torch.randn(1024, 1024), torch.randn(1024, 1024), torch.empty(1024, 1024)
torch.mm(a, b, out=c)
ts = []
for _ in range(10):
    t0 = time.perf_counter()
    torch.mm(a, b, out=c)
    ts.append(time.perf_counter() - t0)
m = statistics.median(ts)
print(json.dumps({"bench": "gemm1024", "impl": "torch.mm(out=) 1024^3", "ms_median": m * 1e3, "gflops_median": 2 * 1024**3 / m / 1e9}))
PY
			}
			gk() {
				# the [N x 128] x [128 x 128] GEMM with the graph's N, as the anchor's
				nodes=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["nodes"])' "$dir/meta.json")
				# shellcheck disable=SC2086
				"$GNNKIT" bench kernels --json --graph "$dir" --gemm-rows "$nodes" --reps 5 --threads "$THREADS" $gpin |
					tr -d '\n' | sed "s/^{/{\"round\": $r, \"graph\": \"$g\", \"side\": \"gnnkit\", \"pin\": \"$pin\", /; s/\$/\n/" >>"$OUT/kernels.jsonl"
			}
			if [ $((r % 2)) -eq 1 ]; then tk; gk; else gk; tk; fi
		done
		r=$((r + 1))
	done
done
cat /proc/loadavg >"$OUT/loadavg.after"

"$PY" - "$OUT" <<'EOF'
import json, os, statistics, sys
out = sys.argv[1]
def lines(name):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        return []
    return [json.loads(l) for l in open(p) if l.strip().startswith("{")]
med = statistics.median
ep = lines("epoch.jsonl")
print(f"raw results: {out}; load average before {open(os.path.join(out, 'loadavg.before')).read().split()[:3]}, after {open(os.path.join(out, 'loadavg.after')).read().split()[:3]}")
print()
print("full-graph training epoch (forward + backward + Adam), median over rounds of each run's median epoch")
print(f"{'graph':6} {'model':5} {'pin':4} {'torch ms':>10} {'gnnkit ms':>10} {'speed-up':>9}  rounds  torch acc  gnnkit acc")
for g in dict.fromkeys(r["graph"] for r in ep):
    for m in dict.fromkeys(r["model"] for r in ep):
        for pin in dict.fromkeys(r["pin"] for r in ep):
            sel = lambda side: [r for r in ep if r["graph"] == g and r["model"] == m and r["pin"] == pin and r["side"] == side]
            t, o = [r["epoch_ms_median"] for r in sel("torch")], [r["epoch_ms_median"] for r in sel("gnnkit")]
            if t and o:
                print(f"{g:6} {m:5} {pin:4} {med(t):10.1f} {med(o):10.1f} {med(t)/med(o):8.2f}x  {len(t):6}  {sel('torch')[-1].get('test_acc')}  {sel('gnnkit')[-1].get('test_acc')}")
ks = lines("kernels.jsonl")
if ks:
    print()
    print("kernels, median over rounds (torch: anchor --micro; gnnkit: bench kernels; width 128)")
    print(f"{'graph':6} {'pin':4} {'kernel':34} {'torch ms':>9} {'gnnkit ms':>9} {'speed-up':>9}  gnnkit detail")
    for g in dict.fromkeys(r["graph"] for r in ks):
        for pin in dict.fromkeys(r["pin"] for r in ks):
            T = [r for r in ks if r["graph"] == g and r["pin"] == pin and r["side"] == "torch"]
            G = [r for r in ks if r["graph"] == g and r["pin"] == pin and r["side"] == "gnnkit"]
            if not T or not G:
                continue
            tsp = [r["ms_median"] for r in T if r.get("bench") == "spmm" and r.get("impl", "").startswith("torch.sparse.mm(CSR int64)")]
            tgm = [r["ms_median"] for r in T if r.get("bench") == "gemm" and r.get("impl", "").startswith("torch.mm(out=")]
            tbw = [r["stream_copy_gbs_best"] for r in T if r.get("bench") == "stream"]
            osp = [s["ms_median"] for r in G for s in r["spmm"] if s["weighted"]]
            ofl = [s["noreuse_floor_fraction"] for r in G for s in r["spmm"] if s["weighted"]]
            ofm = [s["noreuse_floor_ms"] for r in G for s in r["spmm"] if s["weighted"]]
            ogm = [x["ms_median"] for r in G for x in r["gemm"] if x["k"] == 128 and x["n"] == 128 and not x["trans_a"] and not x["trans_b"]]
            ogf = [x["gflops_median"] for r in G for x in r["gemm"] if x["k"] == 128 and x["n"] == 128 and not x["trans_a"] and not x["trans_b"]]
            opf = [x["peak_fraction_median"] for r in G for x in r["gemm"] if x["k"] == 128 and x["n"] == 128 and not x["trans_a"] and not x["trans_b"]]
            o1k = [x["gflops_median"] for r in G for x in r["gemm"] if x["m"] == x["k"] == x["n"] == 1024]
            o1m = [x["ms_median"] for r in G for x in r["gemm"] if x["m"] == x["k"] == x["n"] == 1024]
            t1k = [r["ms_median"] for r in T if r.get("bench") == "gemm1024"]
            obw = [r["copy"]["gbs_best"] for r in G]
            if tsp and osp:
                print(f"{g:6} {pin:4} {'SpMM CSR x [N x 128] (GCN weights)':34} {med(tsp):9.1f} {med(osp):9.1f} {med(tsp)/med(osp):8.2f}x  {med(ofl)*100:.0f}% of no-reuse floor ({med(ofm):.1f} ms)")
            if tgm and ogm:
                print(f"{g:6} {pin:4} {'SGEMM [N x 128] x [128 x 128]':34} {med(tgm):9.1f} {med(ogm):9.1f} {med(tgm)/med(ogm):8.2f}x  {med(ogf):.0f} GFLOP/s, {med(opf)*100:.0f}% of FMA peak")
            if t1k and o1m:
                print(f"{g:6} {pin:4} {'SGEMM 1024 x 1024 x 1024':34} {med(t1k):9.1f} {med(o1m):9.1f} {med(t1k)/med(o1m):8.2f}x  {med(o1k):.0f} GFLOP/s")
            if tbw and obw:
                print(f"{g:6} {pin:4} {'copy bandwidth GB/s (numpy / Go)':34} {med(tbw):9.1f} {med(obw):9.1f}")
EOF
