"""Session 60: apply sourcedigest.blank_mixed's rule (first named merged) to the tables this session's filtered runs merged
before the rule existed. prev = each GPU's builds.csv at 83bc35a (its whole run's digests), new =
the builds the filtered runs recorded (s14 of both families), res.new = rows whose run_utc is one of those runs' dates."""
import io, subprocess, sys
import pandas as pd
from study import results, sourcedigest
from study.publish import merge

for gpu in ("NVIDIA_H100_80GB_HBM3", "NVIDIA_H200"):
    d = results.data_dir(gpu, results.REPORTS)
    data = results.load(d)
    prev = pd.read_csv(io.StringIO(subprocess.check_output(
        ["git", "show", f"83bc35a:reports/data/{gpu}/builds.csv"], text=True)))
    dates = {r["date_utc"] for r in data.environment.get("merged_runs", []) if "783022d" in r.get("git_commit", "")}
    res = data.results.assign(new=data.results["run_utc"].isin(dates))
    # the filtered runs were --families cuda triton cublas --stages s14: they built s14 of both families
    new = data.builds[(data.builds["stage"] == "s14_stream_k") & data.builds["family"].isin(["cuda", "triton"])]
    got = sourcedigest.blank_mixed(prev, new, merge(prev, new, ["family", "stage"]), res)
    print(gpu, sorted(dates), "re-measured:", list(zip(new["family"], new["stage"])),
          "blank:", [k for k, s in zip(zip(got["family"], got["stage"]), got["source"]) if s == ""])
    if "--write" in sys.argv:
        got.to_csv(d / "builds.csv", index=False, float_format="%.6g")   # as results.write
