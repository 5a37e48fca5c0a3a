#!/usr/bin/env bash
# tessera_torch against real PyTorch (issue #45): an MLP, a CNN with
# BatchNorm and LayerNorm, and a two-input model with an EmbeddingBag and a
# concatenation are imported from their state_dicts (python3 -m
# tessera_torch import --state_dict), checked by tessera_coordinator
# --dry_run --init_weights, written as step-0 checkpoints, exported with
# tessera_export --format=safetensors and loaded back by load_state_dict
# (strict): the same predictions as the module imported to 1e-5, and
# tessera_predict's on the same examples to 1e-5 (Tessera's forward pass
# is PyTorch's). Each refused module must exit 2 naming the module and what
# Tessera lacks, and write nothing. Fails (never skips) when
# deploy/python_env.sh's environment lacks torch.
#
# Usage: torch_check.sh <tessera_coordinator> <tessera_export>
#          <tessera_predict> <build dir of tessera_torch_checkpoint>
#          <source root>
set -euo pipefail
COORD="$1"
EXPORT="$2"
PREDICT="$3"
BIN="$4"
ROOT="$5"
HERE="$(cd "$(dirname "$0")" && pwd)"
PYENV="${TESSERA_PYENV:-$HOME/.cache/tessera/pyenv}"
# Found, not imported: an import of torch takes seconds, and a broken one
# fails the check at its first step anyway.
if [ ! -x "$PYENV/bin/python" ] ||
   ! "$PYENV/bin/python" -c 'import importlib.util as u, sys
sys.exit(not (u.find_spec("torch") and u.find_spec("safetensors")))' \
     2>/dev/null
then
  echo "torch_check: no Python environment with torch and safetensors at" \
       "$PYENV; run deploy/python_env.sh first" >&2
  exit 1
fi
export PYTHONPATH="$ROOT/python"
PY="$PYENV/bin/python"
CHECK=("$PY" "$HERE/torch_check.py")
DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
FASHION=/usr/share/datasets/fashion-mnist
MODELS="$HERE/torch_models.py"

# Python starts once per phase, not once per step: each start imports
# torch, which took most of this check's time (23 starts). Phase 1 writes
# the CSV and every state_dict; phase 2 runs every `python3 -m
# tessera_torch import` of the check through the module's own main, in
# one interpreter (torch_check.py cli: each run's output, stderr and exit
# status in files of their own); phase 4 makes every round trip.
CLI="$DIR/cli.list"
: > "$CLI"
# import NAME RUN ARGS...: run RUN imports the module NAME.
import() {
  local name="$1" run="$2"
  shift 2
  printf '%q ' "$run" import --module="$MODELS:$name" \
    --tessera_bin="$BIN" "$@" >> "$CLI"
  echo >> "$CLI"
}
# cli_status RUN: the run's exit status.
cli_status() { cat "$DIR/$1.code"; }

"${CHECK[@]}" csv "$DIR/two.csv" 300 + weights MLP "$DIR/MLP.pt" \
  + weights CNN "$DIR/CNN.pt" + weights TwoInput "$DIR/TwoInput.pt" \
  + weights Embed "$DIR/Embed.pt" + weights MLP "$DIR/other.pt"
cat > "$DIR/two_data.textproto" <<DATA
data {
  format: "csv"
  train_files: "$DIR/two.csv"
  test_files: "$DIR/two.csv"
  label_feature: "label"
  inputs { input: "dense" features: ["d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10", "d11", "d12"] }
  csv { sparse_type: "int" }
}
DATA

SPECS="MLP:x:784:float32:cross_entropy:adam:0.001
CNN:x:1x28x28:float32:cross_entropy:sgd:0.01:0.9
TwoInput:dense:13:float32,ids:4:int64:bce_with_logits:adagrad:0.05"
for spec in $SPECS; do
  IFS=: read -r name input dims dtype rest <<< "$spec"
  inputs="$input:$dims:$dtype"
  loss="${rest%%:*}"
  optimizer="${rest#*:}"
  if [ "$name" = TwoInput ]; then
    inputs="dense:13:float32,ids:4:int64"
    loss=bce_with_logits
    optimizer=adagrad:0.05
  fi
  data=()
  [ "$name" = TwoInput ] && data=(--data_from="$DIR/two_data.textproto")
  import "$name" "$name.import" --state_dict="$DIR/$name.pt" \
    --inputs="$inputs" --loss="$loss" --optimizer="$optimizer" "${data[@]}" \
    --output="$DIR/$name.textproto" --weights_out="$DIR/$name.safetensors" \
    --checkpoint_out="$DIR/$name.ckpt"
done
# nn.Embedding, squeeze, + and reshape: the job runs (dry run) and its
# weights come back (no data to predict on).
import Embed Embed.import --state_dict="$DIR/Embed.pt" \
  --inputs=x:4:float32,ids:1:int64 --output="$DIR/Embed.textproto" \
  --weights_out="$DIR/Embed.safetensors" --checkpoint_out="$DIR/Embed.ckpt"
# Refusals: each its own output paths, which must stay unwritten.
REFUSALS=0
refusal() {
  local name="$1" inputs="$2"
  shift 3
  REFUSALS=$((REFUSALS + 1))
  import "$name" "refused$REFUSALS" --inputs="$inputs" \
    --output="$DIR/refused$REFUSALS.textproto" \
    --weights_out="$DIR/refused$REFUSALS.safetensors" "$@"
}
# refused N NAME WANT: run N exited 2 naming what Tessera lacks, and
# wrote nothing.
refused() {
  local n="$1" name="$2" want="$3" code
  code="$(cli_status "refused$n")"
  [ "$code" = 2 ] || { cat "$DIR/refused$n.err"; fail "$name: exit $code, not 2"; }
  grep -qF "$want" "$DIR/refused$n.err" ||
    { cat "$DIR/refused$n.err"; fail "$name: the error does not say: $want"; }
  [ ! -e "$DIR/refused$n.textproto" ] &&
    [ ! -e "$DIR/refused$n.safetensors" ] || fail "$name: something was written"
  echo "ok: refused $name: $(cat "$DIR/refused$n.err")"
}
REFUSED=(
  "Recurrent|x:13:float32|module 'lstm' (LSTM): Tessera has no recurrent layers|--loss=mse"
  "CustomFunction|x:13:float32|a custom autograd Function (_Clip)|--loss=mse"
  "DataDependent|x:13:float32|DataDependent cannot be traced by torch.fx|--loss=mse"
  "PaddingIdx|ids:4:int64|module 'emb' (EmbeddingBag): padding_idx 0|--loss=mse"
  "ChannelsLast|x:3x28x28:float32|module 'conv' (Conv2d): parameter weight is a channels_last tensor|"
  "MLP|x:784:float32|optimizer RMSprop|--optimizer=$MODELS:make_rmsprop"
  "MLP|x:784:float32|loss NLLLoss|--loss=$MODELS:nll"
  "MLP|x:784:float32|optimizer lamb|--optimizer=lamb:0.01"
)
for r in "${REFUSED[@]}"; do
  IFS='|' read -r name inputs want flag <<< "$r"
  if [ -n "$flag" ]; then
    refusal "$name" "$inputs" "$want" "$flag"
  else
    refusal "$name" "$inputs" "$want"
  fi
done
"${CHECK[@]}" cli "$CLI"

ROUNDTRIPS=()
for name in MLP CNN TwoInput Embed; do
  code="$(cli_status "$name.import")"
  [ "$code" = 0 ] ||
    { cat "$DIR/$name.import.out" "$DIR/$name.import.err"; fail "import of $name"; }
  check_data=()
  [ "$name" = Embed ] && check_data=(--check_data=false)
  "$COORD" --dry_run "${check_data[@]}" \
    --init_weights="$DIR/$name.safetensors" \
    --job_file="$DIR/$name.textproto" --chief_host=127.0.0.1:1 \
    --ps_hosts=127.0.0.1:2 --worker_hosts=127.0.0.1:3 --task_type=chief \
    > "$DIR/$name.dry" 2>&1 || { cat "$DIR/$name.dry"; fail "dry run of $name"; }
  "$EXPORT" --format=safetensors --checkpoint="$DIR/$name.ckpt" \
    --output="$DIR/$name.out.safetensors" > /dev/null ||
    fail "export of $name"
  if [ "$name" = Embed ]; then
    ROUNDTRIPS+=(+ roundtrip Embed "$DIR/Embed.pt" "$DIR/Embed.out.safetensors")
    continue
  fi
  predict=(--data_dir="$FASHION")
  csv=()
  if [ "$name" = TwoInput ]; then predict=(); csv=("$DIR/two.csv"); fi
  "$PREDICT" --checkpoint="$DIR/$name.ckpt" "${predict[@]}" \
    --max_examples=300 --output="$DIR/$name.jsonl" 2> "$DIR/$name.predict" ||
    { cat "$DIR/$name.predict"; fail "predict $name"; }
  ROUNDTRIPS+=(+ roundtrip "$name" "$DIR/$name.pt" \
    "$DIR/$name.out.safetensors" "$DIR/$name.jsonl" "${csv[@]}")
done
"${CHECK[@]}" "${ROUNDTRIPS[@]:1}" || fail "round trip (the FAIL lines above)"
for name in MLP CNN TwoInput Embed; do
  echo "ok: $name imported, dry run, exported, loaded by load_state_dict"
done

# The same job warm-started from a state_dict whose tensors do not fit.
code=0
"$COORD" --dry_run --init_weights="$DIR/CNN.safetensors" \
  --job_file="$DIR/MLP.textproto" --chief_host=127.0.0.1:1 \
  --ps_hosts=127.0.0.1:2 --worker_hosts=127.0.0.1:3 --task_type=chief \
  > "$DIR/mismatch.err" 2>&1 || code=$?
[ "$code" = 2 ] || fail "--init_weights of another model: exit $code, not 2"
grep -qF 'no tensor for variable fc1/kernel (looked for "fc1.weight"' \
  "$DIR/mismatch.err" || { cat "$DIR/mismatch.err"; fail "mismatch message"; }
echo "ok: --init_weights of another model refused: $(grep -o 'no tensor.*' "$DIR/mismatch.err")"

# Refusals: exit 2, the module named, nothing written.
n=0
for r in "${REFUSED[@]}"; do
  n=$((n + 1))
  IFS='|' read -r name inputs want flag <<< "$r"
  refused "$n" "$name" "$want"
done
# A torch.optim object and a loss module are read as the flags are.
# Run as users run it (python3 -m tessera_torch), the module's entry point.
"$PY" -m tessera_torch import --module="$MODELS:MLP" --tessera_bin="$BIN" \
  --inputs=x:784:float32 --loss="$MODELS:loss_fn" \
  --optimizer="$MODELS:make_sgd" --output="$DIR/objects.textproto" > /dev/null
grep -q 'momentum { momentum: 0.9 nesterov: true }' "$DIR/objects.textproto" ||
  fail "the torch.optim object was not read"
echo "torch_check: ok"
