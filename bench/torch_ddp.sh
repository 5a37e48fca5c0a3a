#!/usr/bin/env bash
# bench/torch_ddp: the course MLP (784-128-10, dropout 0.2, Adam 0.001) on
# Fashion-MNIST, the same examples (EPOCHS passes over the 60000 training
# images, batch 64 per process) trained three ways on this machine:
#   ddp       PyTorch DistributedDataParallel, gloo, 2 processes
#             (bench/torch_ddp.py)
#   async     the same module imported by tessera_torch, 2 ps x 2 workers,
#             from the same initial weights (--init_weights)
#   mirrored  the same job, 2 workers all-reducing (global batch 128), from
#             Tessera's initializers (a mirrored job keeps the dense
#             variables in the workers: --init_weights needs servers)
# and writes examples/s and test accuracy side by side to
# OUT/torch_ddp.md.
#
#   bash bench/torch_ddp.sh [out_dir]      # default bench/results
#
# EPOCHS (environment, default 3); TESSERA_BUILD_DIR picks the build.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-bench/results}"
EPOCHS="${EPOCHS:-3}"
BUILD="${TESSERA_BUILD_DIR:-build}"
PY="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}/bin/python"
bash deploy/python_env.sh >/dev/null
RUN="$(mktemp -d)"
trap 'rm -rf "$RUN"' EXIT
export PYTHONPATH="$PWD/python"

"$PY" bench/torch_ddp.py init "$RUN/init.pt"
cat > "$RUN/mlp.py" <<'PYEOF'
import sys, os
sys.path.insert(0, os.environ["TESSERA_BENCH_DIR"])
from torch_ddp import MLP  # noqa: F401
PYEOF
TESSERA_BENCH_DIR="$PWD/bench" "$PY" -m tessera_torch import \
  --module="$RUN/mlp.py:MLP" --state_dict="$RUN/init.pt" \
  --inputs=image:784:float32 --loss=cross_entropy --optimizer=adam:0.001 \
  --data_from=deploy/jobs/mlp_fashion_mnist.textproto \
  --output="$RUN/mlp.textproto" --weights_out="$RUN/init.safetensors" \
  > /dev/null

load="$(cut -d' ' -f1-3 /proc/loadavg)"
lines=()
echo "ddp: $EPOCHS epochs, 2 processes"
ddp="$("$PY" bench/torch_ddp.py train "$RUN/init.pt" "$EPOCHS" 64 2)"
echo "  $ddp"
lines+=("$ddp")
for mode in async mirrored; do
  echo "$mode: $EPOCHS epochs, 2 workers"
  args=(--num_ps=2 --num_workers=2 --run_dir="$RUN/$mode" -- --mode="$mode"
        --job_file="$RUN/mlp.textproto" --epochs="$EPOCHS")
  if [ "$mode" = async ]; then
    args+=(--batch_size=64 --init_weights="$RUN/init.safetensors")
  else
    args=(--num_ps=0 "${args[@]:1}" --batch_size=128)
  fi
  "$BUILD/deploy/local/tessera_local" "${args[@]}" > "$RUN/$mode.out" 2>&1 ||
    { tail -20 "$RUN/$mode.out"; exit 1; }
  line="$mode: $(grep '^final test accuracy' "$RUN/$mode.out")"
  echo "  $line"
  lines+=("$line")
done

mkdir -p "$OUT"
{
  echo "# The course MLP: PyTorch DDP against Tessera"
  echo
  echo "\`EPOCHS=$EPOCHS bash bench/torch_ddp.sh\` on $(date -u +%Y-%m-%d)," \
       "commit $(git rev-parse --short HEAD), $(nproc) cores;" \
       "PyTorch $("$PY" -c 'import torch; print(torch.__version__)') on the CPU."
  echo "The same 784-128-10 MLP (dropout 0.2, Adam 0.001), the same"
  echo "Fashion-MNIST examples ($EPOCHS passes over the 60000 training images,"
  echo "batch 64 per process), test accuracy on the 10000 test images."
  echo "ddp and async start from the same PyTorch initial weights"
  echo "(tessera_torch import --state_dict, tessera_coordinator --init_weights);"
  echo "mirrored from Tessera's initializers (it holds the dense variables"
  echo "in the workers). The machine is shared: load average $load when"
  echo "the runs began, so the rates are of that machine, not a clean one."
  echo
  echo "| run | processes | test accuracy | examples/s | training s |"
  echo "|---|---|---|---|---|"
  for l in "${lines[@]}"; do
    name="${l%%:*}"
    acc="$(sed -n 's/.*final test accuracy \([0-9.]*\) .*/\1/p' <<<"$l")"
    rate="$(sed -n 's/.*(\([0-9]*\) examples\/s).*/\1/p' <<<"$l")"
    secs="$(sed -n 's/.* in \([0-9.]*\) s of training.*/\1/p' <<<"$l")"
    case "$name" in
      ddp) procs="2 DDP processes (gloo)" ;;
      async) procs="2 ps x 2 workers" ;;
      mirrored) procs="2 workers (ring all-reduce)" ;;
    esac
    echo "| $name | $procs | $acc | $rate | $secs |"
  done
  echo
  echo "The lines each run printed:"
  echo
  echo '```'
  printf '%s\n' "${lines[@]}"
  echo '```'
} > "$OUT/torch_ddp.md"
echo "wrote $OUT/torch_ddp.md"
