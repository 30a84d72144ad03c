"""Builds a variant of a CUDA stage (argv[1]: the variant .cu, argv[2]: the stage file it replaces,
e.g. s14_stream_k.cu) into the study's build cache beside the tree's own, from a copy of the tree,
so an A/B loop that swaps the source between processes finds every module built."""
import os, shutil, subprocess, sys, tempfile
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
tmp = tempfile.mkdtemp()
for d in ("study", "cuda_src", "triton_kernels"):
    shutil.copytree(os.path.join(root, d), os.path.join(tmp, d))
shutil.copy(os.path.join(root, sys.argv[1]), os.path.join(tmp, "cuda_src", sys.argv[2]))
stem = sys.argv[2].split("_")[0]
env = dict(os.environ, PYTHONPATH=tmp, STUDY_BUILD_DIR=os.path.join(root, "build", "cuda"))
sys.exit(subprocess.call([sys.executable, "-c", f"import study; study.kernel('cuda', '{stem}')"], cwd=tmp, env=env))
