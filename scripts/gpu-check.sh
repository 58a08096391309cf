#!/usr/bin/env bash
# gpu-check.sh — the GPU check of issue 9, for a machine with an NVIDIA GPU
# and its driver but no Go toolchain. Build the bundle first, on any Linux
# machine with Go and the CUDA headers:
#
#     make gpu-bundle            # -> dist/gpu/{bin/gnnkit,bin/gnnkit-cuda,cuda.test,scripts/}
#
# then, on the GPU host, from the repository root (or from the bundle folder):
#
#     scripts/gpu-check.sh       # or: dist/gpu/scripts/gpu-check.sh
#
# It runs, each step under its own `timeout`, within about 8 minutes:
#   1. nvidia-smi and `gnnkit devices` (is cuda:0 there, or why not);
#   2. the CUDA conformance suite (core/backendtest on the GPU): cuda.test -test.run TestConformance;
#   3. GCN on Cora for 200 epochs on cuda:0 and on cpu:0: test accuracies within 1 point;
#   4. the kernel throughput table: cuda.test -test.run TestThroughput with GNNKIT_GPU_BENCH=1
#      (SpMM bandwidth vs the measured copy bandwidth, GEMM vs peak);
#   5. GCN epoch time on Cora and on an R-MAT graph: gnnkit cuda:0 and cpu:0, and PyTorch
#      Geometric on the same graph (scripts/pyg_epoch.py) when python3 imports torch and
#      torch_geometric;
#   6. a GraphPipe profile taken on cuda:0 (gnnkit plan --measure --measure-backend cuda) and an
#      8-GPU nvlink-h100 plan priced with it beside the roofline's;
# and writes one Markdown report to $OUT/gpu-check.md (OUT defaults to ./out), with every
# step's log under $OUT/logs. A failed or timed-out step is recorded and the script goes on;
# once the time budget ($GPU_CHECK_BUDGET seconds, default 420) is spent, the remaining
# steps are recorded as skipped. The exit status is 0 when every step passed, 1 otherwise.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -n "${BUNDLE:-}" ]; then
  :
elif [ -x dist/gpu/bin/gnnkit ]; then
  BUNDLE=dist/gpu                     # run from the repository root
elif [ -x "$here/../bin/gnnkit" ]; then
  BUNDLE=$(cd "$here/.." && pwd)      # run from inside the bundle
else
  BUNDLE=dist/gpu
fi
BUNDLE=$(cd "$BUNDLE" 2>/dev/null && pwd || echo "$BUNDLE")
BIN=$BUNDLE/bin
GNNKIT=$BIN/gnnkit
CUDATEST=$BUNDLE/cuda.test
PYG=$here/pyg_epoch.py
[ -f "$PYG" ] || PYG=$BUNDLE/scripts/pyg_epoch.py
OUT=${OUT:-./out}
BUDGET=${GPU_CHECK_BUDGET:-420}
RMAT=${GPU_CHECK_RMAT:-synthetic:rmat,nodes=200000,edges=2000000,feat=128,classes=8,seed=1}
mkdir -p "$OUT/logs" "$OUT/data"
OUT=$(cd "$OUT" && pwd)
REPORT=$OUT/gpu-check.md
START=$(date +%s)
export GNNKIT_PLUGIN_DIR=${GNNKIT_PLUGIN_DIR:-$BIN}   # gnnkit-cuda is found next to gnnkit anyway

steps=()      # table rows
details=()    # Markdown sections
failed=0

elapsed() { echo $(( $(date +%s) - START )); }

# run NAME LIMIT CMD... — runs CMD under timeout, logs to $OUT/logs/NAME.log, sets
# $rc and $status (ok / failed (rc N) / timed out after Ns / skipped: ...).
run() {
  local name=$1 limit=$2
  shift 2
  local log=$OUT/logs/$name.log
  local left=$(( BUDGET - $(elapsed) ))
  if [ "$left" -le 5 ]; then
    rc=125; status="skipped: time budget of ${BUDGET}s spent"
    echo "$status" >"$log"
    row "$name" "$status" 0
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  local dt=$(( $(date +%s) - t0 ))
  case $rc in
    0) status=ok ;;
    124|137) status="timed out after ${limit}s" ;;
    126|127) status="failed (rc $rc: cannot run $1)" ;;
    *) status="failed (rc $rc)" ;;
  esac
  row "$name" "$status" "$dt"
}

row() {
  steps+=("| $1 | $2 | $3 |")
  case $2 in ok) ;; *) failed=1 ;; esac
}

section() { details+=("$1"); }

block() { # block TITLE FILE [LINES] — a fenced excerpt of a log
  local n=${3:-60}
  local body
  if [ -s "$2" ]; then body=$(tail -n "$n" "$2"); else body="(no output)"; fi
  section "#### $1"$'\n\n''```'$'\n'"$body"$'\n''```'
}

json_field() { # json_field FILE KEY — a number or string field of a JSON file (flat keys)
  grep -o "\"$2\": *[^,}]*" "$1" 2>/dev/null | head -n 1 | cut -d: -f2- | tr -d '"' | sed -e 's/^ *//' -e 's/ *$//'
}

num() { # num VALUE — two decimals, or the value as is when it is not a number
  awk -v v="$1" 'BEGIN { if (v ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/) printf "%.2f", v; else printf "%s", v }'
}

# ---------------------------------------------------------------- 0. the bundle
missing=""
for f in "$GNNKIT" "$BIN/gnnkit-cuda" "$CUDATEST"; do
  [ -x "$f" ] || missing="$missing $f"
done
if [ -n "$missing" ]; then
  row "bundle" "missing:$missing (run make gpu-bundle on a machine with Go)" 0
fi

# ---------------------------------------------------------------- 1. the machine
run nvidia-smi 30 nvidia-smi
block "nvidia-smi" "$OUT/logs/nvidia-smi.log" 40
run devices 90 "$GNNKIT" devices
block "gnnkit devices" "$OUT/logs/devices.log" 30
cuda_ok=0
grep -q '^cuda:0 ' "$OUT/logs/devices.log" 2>/dev/null && cuda_ok=1

# ---------------------------------------------------------------- 2. conformance
run conformance 150 "$CUDATEST" -test.run TestConformance -test.v -test.timeout 140s
conf_pass=$(grep -c -- '--- PASS' "$OUT/logs/conformance.log" 2>/dev/null)
conf_fail=$(grep -c -- '--- FAIL' "$OUT/logs/conformance.log" 2>/dev/null)
section "### Conformance (core/backendtest on the GPU)"$'\n\n'"$status: ${conf_pass:-0} passed, ${conf_fail:-0} failed (tests and subtests); log: logs/conformance.log"
if [ "${conf_fail:-0}" != 0 ]; then
  grep -- '--- FAIL' "$OUT/logs/conformance.log" | head -n 30 >"$OUT/logs/conformance-failures.log"
  block "first failures" "$OUT/logs/conformance-failures.log" 30
fi
[ "$rc" = 0 ] || block "conformance (tail)" "$OUT/logs/conformance.log" 40

# ---------------------------------------------------------------- 3. Cora accuracy
run cora-cuda 90 "$GNNKIT" train --devices cuda:0 --epochs 200 --json -q
cp "$OUT/logs/cora-cuda.log" "$OUT/cora-cuda.json" 2>/dev/null
cuda_rc=$rc
run cora-cpu 90 "$GNNKIT" train --devices cpu:0 --epochs 200 --json -q
cp "$OUT/logs/cora-cpu.log" "$OUT/cora-cpu.json" 2>/dev/null
acc_cuda=$(json_field "$OUT/cora-cuda.json" test_acc)
acc_cpu=$(json_field "$OUT/cora-cpu.json" test_acc)
verdict="not compared (a run failed)"
if [ "$cuda_rc" = 0 ] && [ "$rc" = 0 ] && [ -n "$acc_cuda" ] && [ -n "$acc_cpu" ]; then
  if awk -v a="$acc_cuda" -v b="$acc_cpu" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 + 1e-9) }'; then
    verdict="match (within 1 point)"
  else
    verdict="MISMATCH (more than 1 point apart)"
    row "cora-accuracy" "failed: $verdict" 0
  fi
fi
section "### GCN on Cora, 200 epochs

| device | test accuracy | final loss | epoch median (ms) | wall (s) |
|---|---|---|---|---|
| cuda:0 | ${acc_cuda:--} | $(json_field "$OUT/cora-cuda.json" final_loss) | $(num "$(json_field "$OUT/cora-cuda.json" epoch_ms_median)") | $(num "$(json_field "$OUT/cora-cuda.json" wall_s)") |
| cpu:0 | ${acc_cpu:--} | $(json_field "$OUT/cora-cpu.json" final_loss) | $(num "$(json_field "$OUT/cora-cpu.json" epoch_ms_median)") | $(num "$(json_field "$OUT/cora-cpu.json" wall_s)") |

Accuracy: $verdict."
[ "$cuda_rc" = 0 ] || block "cora on cuda:0 (log)" "$OUT/logs/cora-cuda.log" 20

# ---------------------------------------------------------------- 4. throughput
rm -f "$OUT/throughput.md"
GNNKIT_GPU_BENCH=1 GNNKIT_BENCH_OUT="$OUT/throughput.md" run throughput 170 "$CUDATEST" -test.run TestThroughput -test.v -test.timeout 160s
if [ -s "$OUT/throughput.md" ]; then
  section "### Kernel throughput (TestThroughput)"$'\n\n'"$(cat "$OUT/throughput.md")"
else
  section "### Kernel throughput (TestThroughput)"$'\n\n'"$status; no table was written (see below)."
  block "throughput (tail)" "$OUT/logs/throughput.log" 40
fi

# ---------------------------------------------------------------- 5. epoch times, side by side
pyg=0; PY=
if [ $(( BUDGET - $(elapsed) )) -gt 40 ]; then
  : >"$OUT/logs/pyg-import.log"
  for py in ${PYTHON:-} python3 /usr/bin/python3; do  # another python on PATH may not see the system's packages
    command -v "$py" >/dev/null 2>&1 || continue
    echo "== $py" >>"$OUT/logs/pyg-import.log"
    if timeout 30 "$py" -c 'import torch, torch_geometric; print(torch.__version__, torch_geometric.__version__, torch.cuda.is_available())' >>"$OUT/logs/pyg-import.log" 2>&1; then
      pyg=1; PY=$py
      break
    fi
  done
fi
run export-cora 60 "$GNNKIT" data export cora "$OUT/data/cora"
run export-rmat 90 "$GNNKIT" data export "$RMAT" "$OUT/data/rmat"
side="| graph | hidden | gnnkit cuda:0 (ms) | gnnkit cpu:0 (ms) | PyG (ms) | PyG device | test acc gnnkit cuda / PyG |
|---|---|---|---|---|---|---|"
for ds in cora rmat; do
  dir=$OUT/data/$ds
  hidden=16; epochs=100
  [ "$ds" = rmat ] && { hidden=128; epochs=30; }
  [ -f "$dir/meta.json" ] || continue
  run "epoch-$ds-cuda" 90 "$GNNKIT" train --data "$dir" --devices cuda:0 --epochs "$epochs" --hidden "$hidden" --json -q
  g_cuda=$(num "$(json_field "$OUT/logs/epoch-$ds-cuda.log" epoch_ms_median)"); a_cuda=$(json_field "$OUT/logs/epoch-$ds-cuda.log" test_acc)
  run "epoch-$ds-cpu" 90 "$GNNKIT" train --data "$dir" --devices cpu:0 --epochs "$epochs" --hidden "$hidden" --json -q
  g_cpu=$(num "$(json_field "$OUT/logs/epoch-$ds-cpu.log" epoch_ms_median)")
  p_ms="not installed"; p_dev="-"; p_acc="-"
  if [ "$pyg" = 1 ]; then
    run "epoch-$ds-pyg" 120 "$PY" "$PYG" --data "$dir" --epochs "$epochs" --hidden "$hidden"
    p_ms=$(num "$(json_field "$OUT/logs/epoch-$ds-pyg.log" epoch_ms_median)"); p_dev=$(json_field "$OUT/logs/epoch-$ds-pyg.log" device_name)
    p_acc=$(json_field "$OUT/logs/epoch-$ds-pyg.log" test_acc)
  fi
  side="$side
| $ds ($(json_field "$dir/meta.json" nodes) nodes) | $hidden | ${g_cuda:-failed} | ${g_cpu:-failed} | ${p_ms:-failed} | ${p_dev:--} | ${a_cuda:--} / ${p_acc:--} |"
done
pyg_note="PyTorch Geometric: not importable here (python3 -c 'import torch, torch_geometric' failed; see logs/pyg-import.log), so only gnnkit was timed."
[ "$pyg" = 1 ] && pyg_note="PyTorch Geometric ($(tail -n 1 "$OUT/logs/pyg-import.log"); torch, PyG, CUDA available): scripts/pyg_epoch.py (GCNConv x2, cached normalisation, Adam), timed with torch.cuda.synchronize."
section "### GCN epoch, side by side (same graph, full batch; gnnkit on cuda:0 runs through the gnnkit-cuda worker)

$side

$pyg_note gnnkit's epoch = its Train epoch without evaluation (the host steps Adam on its CPU and evaluates there)."

# ---------------------------------------------------------------- 6. a GraphPipe profile on the GPU
# The op costs GraphPipe plans with, taken on cuda:0 (through the worker), then
# an 8-GPU plan priced with them beside the same plan's roofline pricing. The
# nvlink-h100 preset is the closest to this project's lent GPU (an H200): the
# profile prices its devices at the lent GPU's own speed.
run profile-uno-cuda 90 "$GNNKIT" plan --scheduler graphpipe --model uno --hidden 256 --devices 8 --preset nvlink-h100 \
  --sched-opt m=8 --simulate --measure --measure-backend cuda --reps 3 --profile "$OUT/uno-cuda0-profile.json" --json
prof_ok=$status
p_cuda=$(num "$(json_field "$OUT/logs/profile-uno-cuda.log" simulated_iteration_ms)")
p_on=$(grep -o '"planned_on": *"[^"]*"' "$OUT/logs/profile-uno-cuda.log" 2>/dev/null | head -n 1 | sed -e 's/^"planned_on": *"//' -e 's/"$//')
run profile-uno-roofline 60 "$GNNKIT" plan --scheduler graphpipe --model uno --hidden 256 --devices 8 --preset nvlink-h100 \
  --sched-opt m=8 --simulate --json
p_roof=$(num "$(json_field "$OUT/logs/profile-uno-roofline.log" simulated_iteration_ms)")
p_file="The profile is in uno-cuda0-profile.json (GraphPipe's schema)."
[ "$prof_ok" = ok ] || p_file="Profiling failed ($prof_ok): see logs/profile-uno-cuda.log."
section "### GraphPipe planned on op costs measured on this GPU

uno (4 branches, 256 hidden) over Cora, 8 simulated nvlink-h100 devices at this GPU's own speed
(the profile's), 8 micro-batches: simulated iteration ${p_cuda:-failed} ms on the profile taken on
cuda:0 (planned on: ${p_on:--}), ${p_roof:-failed} ms on the H100 roofline model. $p_file"

# ---------------------------------------------------------------- the report
{
  echo "# gnnkit GPU check"
  echo
  echo "- host: $(hostname) ($(uname -srm)); $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  gpu=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
  echo "- GPU: ${gpu:-none found (nvidia-smi unavailable or failed)}"
  echo "- bundle: $BUNDLE; gnnkit-cuda usable: $([ "$cuda_ok" = 1 ] && echo yes || echo no)"
  echo "- total time: $(elapsed) s (budget ${BUDGET} s)"
  echo
  echo "| step | result | seconds |"
  echo "|---|---|---|"
  printf '%s\n' "${steps[@]}"
  echo
  for d in "${details[@]}"; do
    printf '%s\n\n' "$d"
  done
} >"$REPORT"
echo "gpu-check: report in $REPORT ($(elapsed) s)"
exit $failed
