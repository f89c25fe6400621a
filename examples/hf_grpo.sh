#!/bin/bash
# hf_grpo.sh — one command from a Hugging Face model directory and a dataset
# to a GRPO run (or SFT with --sft):
#
#   examples/hf_grpo.sh MODEL_DIR TRAIN [VAL] [--sft] [--gsm8k] [key=value ...]
#
# TRAIN, VAL: Parquet (or JSONL) in verl's layout; without VAL the last 64
# rows of TRAIN validate. --gsm8k: raw GSM8K rows ({"question", "answer":
# "... #### n"}) instead. It makes build/venv-data when missing (make
# venv-data), renders the prompts through MODEL_DIR's chat template into
# runs/hf_data/{train,val}.jsonl (examples/prepare_data.py), then runs
# rl-driver with examples/hf_grpo.yaml (hf_sft.yaml) and model.path=MODEL_DIR;
# key=value pairs are rl-driver overrides. CLUSTER (default
# examples/cluster-local.yaml) and BUILD (default build) are read from the
# environment.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
CLUSTER=${CLUSTER:-$root/examples/cluster-local.yaml}
usage() { echo "usage: $0 MODEL_DIR TRAIN [VAL] [--sft] [--gsm8k] [key=value ...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
model=$1 train=$2
shift 2
val= job=hf_grpo.yaml prep=() over=()
for a in "$@"; do
    case $a in
    --sft) job=hf_sft.yaml ;;
    --gsm8k) prep+=(--question-field question --answer-field answer) ;;
    *=*) over+=("$a") ;;
    *) [ -z "$val" ] || usage; val=$a ;;
    esac
done
[ -f "$model/config.json" ] || { echo "$0: $model/config.json: no such file (a Hugging Face model directory?)" >&2; exit 1; }
py=$root/build/venv-data/bin/python
[ -x "$py" ] || make -C "$root" --no-print-directory venv-data
data=runs/hf_data
if [ -n "$val" ]; then
    "$py" "$root/examples/prepare_data.py" --model "$model" "${prep[@]}" "$train" --out $data/train.jsonl
    "$py" "$root/examples/prepare_data.py" --model "$model" "${prep[@]}" "$val" --out $data/val.jsonl
else
    "$py" "$root/examples/prepare_data.py" --model "$model" "${prep[@]}" "$train" --out $data/train.jsonl \
        --val-out $data/val.jsonl --val-rows 64
fi
[ -x "$root/$BUILD/bin/rl-driver" ] || make -C "$root" --no-print-directory all
exec "$root/$BUILD/bin/rl-driver" --cluster "$CLUSTER" --config "$root/examples/$job" \
    model.path="$model" data.train_files=$data/train.jsonl data.val_files=$data/val.jsonl "${over[@]}"
