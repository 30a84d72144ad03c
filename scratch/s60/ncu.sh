#!/usr/bin/env bash
# Session 60, one H100: the two measurements session 58 prepared after its tests (which passed on
# an H200 this session): the weight's ragged tile timed (raggedn.py) and ncu at 256 x 4096 x 4096.
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $name"
case "$name" in *H100*) ;; *) echo "not an H100: nothing run"; exit 0 ;; esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 150 python3 scratch/s58/raggedn.py > $OUT/raggedn.log 2>&1; echo "raggedn rc=$? $(( $(date +%s) - t0 )) s"; grep -v Warn $OUT/raggedn.log
timeout $(( 560 - ($(date +%s) - t0) )) bash scratch/s58/ncu256.sh
