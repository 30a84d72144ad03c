#!/usr/bin/env bash
# The whole study in one call on a 4-GPU machine: `EXPECT=H100 bash scratch/s59/full.sh` on an
# nvidia-h100-x4 call, `EXPECT=H200 ...` on nvidia-h200-x4 (exits at once, running nothing, when
# the GPUs are not the expected kind). Write scratch/commit.txt (git rev-parse --short=12 HEAD)
# first: the copy on the device has no .git. The tables come back as reports.tgz (restore with
# `rm -rf reports && tar xzf <files_at>/reports.tgz`). A run cut by the call's limit sends its
# journal back instead (journal.tgz): copy it to scratch/s59/journal.tgz and call again with
# carry ["scratch/s59"] on the same kind; the study then measures only what is missing.
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
n=$(nvidia-smi -L | wc -l)
echo "GPU: $n x $name"
case "$name" in *"${EXPECT:?set EXPECT=H100 or H200}"*) ;; *) echo "not an $EXPECT: nothing run"; exit 0 ;; esac
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 STUDY_GIT_COMMIT=$(cat scratch/commit.txt)
[ -f scratch/s59/journal.tgz ] && tar xzf scratch/s59/journal.tgz && echo "journal restored"
t0=$(date +%s)
timeout $(( ${LIMIT:-585} )) python3 -m study reports > $OUT/study.log 2>&1
rc=$?; echo "study rc=$rc $(( $(date +%s) - t0 )) s"
grep -E 'took|done|where the time|Error|error' $OUT/study.log | tail -25
if [ $rc -eq 0 ]; then tar czf $OUT/reports.tgz reports; else tar czf $OUT/journal.tgz build/journal 2>/dev/null; fi
ls -la $OUT
