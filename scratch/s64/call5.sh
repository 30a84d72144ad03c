#!/usr/bin/env bash
# Session 65 (prepared in 64), one GPU: does s14 already get its weight read once per pair of x
# tiles? ncu of ac91521 (old) against order.patch (row-major tiles: the two x tiles of a weight
# tile tiles_q CTAs apart), then their A/B; then ncu of wmc.patch (the weight tile shared
# explicitly, as cuBLAS's 1x2). Write scratch/s64/old/ first (prep.sh).
d="$(dirname "$0")"; top=$OUT
OUT=$top/order PATCH=order.patch AB=1 bash "$d/call4.sh"
OUT=$top/wmc PATCH=wmc.patch bash "$d/call4.sh"
