"""Builds a variant of s15 (argv[1], default scratch/s61/old/s15_fp8.cu: the source before this
session) into the study's build cache beside the tree's own, from a copy of the tree, so the A/B
timing loop finds every module built."""
import os, shutil, subprocess, sys, tempfile
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
tmp = tempfile.mkdtemp()
for d in ("study", "cuda_src", "triton_kernels"):
    shutil.copytree(os.path.join(root, d), os.path.join(tmp, d))
src = sys.argv[1] if len(sys.argv) > 1 else "scratch/s61/old/s15_fp8.cu"
shutil.copy(os.path.join(root, src), os.path.join(tmp, "cuda_src/s15_fp8.cu"))
env = dict(os.environ, PYTHONPATH=tmp, STUDY_BUILD_DIR=os.path.join(root, "build", "cuda"))
sys.exit(subprocess.call([sys.executable, "-c", "import study; study.kernel('cuda', 's15')"], cwd=tmp, env=env))
