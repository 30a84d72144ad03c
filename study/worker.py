"""Entry point of the study's child processes: `python -m study.worker JOB ARGS`.

    measure SPEC.json         one precision group of the sweep (runner.py), JSON events on stdout
    profile SPEC.json ORDER   the kernels to profile, run under Nsight Compute (profile.py)
    build STAGE.cu            compile one CUDA stage (build.py's parallel build)
    model SPEC.json           the kernels in a model: training, inference, MLP, overhead (modelrun.py)
    prewarm SPEC.json         compile Triton kernel-shapes ahead of measuring them (prewarm.py)

A module of its own, imported by nothing in the package: `python -m study.<module>` for a
module that `import study` has already loaded makes runpy warn ("found in sys.modules after
import of package"), and these children run thousands of times.
"""
import sys


def main(argv: list) -> int:
    job, args = (argv[0], argv[1:]) if argv else ("", [])
    if job == "measure" and len(args) == 1:
        from .runner import child_main

        return child_main(args[0])
    if job == "profile" and len(args) == 2:
        from .profile import child_main

        return child_main(args[0], args[1])
    if job == "model" and len(args) == 1:
        from .modelrun import child_main as model_main

        return model_main(args[0])
    if job == "prewarm" and len(args) == 1:
        from .prewarm import child_main as prewarm_main

        return prewarm_main(args[0])
    if job == "build" and len(args) == 1:
        from .build import build_one

        return build_one(args[0])
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
