#!/usr/bin/env bash
# Session 65 (prepared in 64), one GPU: does s14 already get its weight read once per pair of x
# tiles? ncu of ac91521 (old) and order.patch (new: row-major tiles, the two x tiles of a weight
# tile tiles_q CTAs apart), with cuBLAS, then the A/B. Write scratch/s64/old/ first (prep.sh).
PATCH=order.patch AB=1 bash "$(dirname "$0")/call4.sh"
