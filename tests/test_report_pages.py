"""The generated report pages (CPU, from the committed data): an overview under 25 KB whose
findings are one sentence each with a number and a link, detail pages per GPU, every link and
image resolving to a file, no "nan"/"None"/"<NA>" in a table cell, the same markdown twice."""
import re
import shutil
from pathlib import Path

import pytest

from study import pages, report

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "reports" / "data"
FIXTURE = Path(__file__).parent / "data" / "reports_fixture" / "data"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
BAD = {"nan", "None", "<NA>", "NaN", "NaT"}


def _render(data_dir: Path, root: Path) -> Path:
    shutil.copytree(data_dir, root / "data")
    report.render(root)
    return root


@pytest.fixture(scope="module", params=["committed", "fixture"])
def rendered(request, tmp_path_factory):
    src = COMMITTED if request.param == "committed" else FIXTURE
    if not any(src.glob("*/results.csv")):
        pytest.skip(f"no recorded data under {src}")
    return _render(src, tmp_path_factory.mktemp(request.param))


def markdown_files(root: Path) -> list:
    return sorted(p for p in root.rglob("*.md") if "data" not in p.relative_to(root).parts)


def test_detail_pages_exist(rendered):
    datas = [report.load(d) for d in report.recorded(rendered)]
    assert (rendered / "README.md").exists() and (rendered / "method.md").exists()
    for data in datas:
        for prec in pages.precisions(data):
            assert (rendered / data.gpu / f"{prec}.md").exists(), (data.gpu, prec)
        assert (rendered / data.gpu / "autotune.md").exists()
        assert (rendered / data.gpu / "environment.md").exists()
    readme = (rendered / "README.md").read_text()
    for md in markdown_files(rendered):   # each page is linked from the overview
        if md.name != "README.md":
            assert str(md.relative_to(rendered)) in readme, md


def test_every_link_and_image_resolves(rendered):
    checked = 0
    for md in markdown_files(rendered):
        for target in LINK.findall(md.read_text()):
            if re.match(r"[a-z]+://", target) or target.startswith("#"):
                continue
            path = (md.parent / target.split("#")[0]).resolve()
            assert path.is_file(), f"{md.relative_to(rendered)} links {target}, which is not a file"
            checked += 1
    assert checked > 20


def test_no_missing_markers_in_table_cells(rendered):
    for md in markdown_files(rendered):
        for line in md.read_text().splitlines():
            if line.startswith("|"):
                cells = {c.strip() for c in line.strip().strip("|").split("|")}
                assert not cells & BAD, f"{md.relative_to(rendered)}: {line[:200]}"
                assert not re.search(r":\s*None\b", line), f"{md.relative_to(rendered)}: a 'None' inside {line[:200]}"


def test_no_development_history_in_pages(rendered):
    for md in markdown_files(rendered):
        assert not re.search(r"\bissue \d+", md.read_text(), flags=re.I), md
    text = "".join(p.read_text() for p in markdown_files(rendered))
    if "Findings (not stages)" in text:   # rows recorded with the older note read in the plan's wording
        assert "header layout NT, measured with a row-major B (NN)" in text


def test_overview_is_small_and_findings_first(rendered):
    text = (rendered / "README.md").read_text()
    assert len(text.encode()) < 25_000
    assert text.index("## Findings") < text.index("## Detail pages")
    assert "![" in text.split("## Key figures", 1)[1]


def test_findings_are_one_sentence_with_a_number_and_a_link(rendered):
    text = (rendered / "README.md").read_text()
    block = text.split("## Findings", 1)[1].split("\n## ", 1)[0]
    items = [ln[2:] for ln in block.splitlines() if ln.startswith("- ")]
    assert 6 <= len(items) <= 10 or rendered.name.startswith("fixture"), items
    assert items
    for item in items:
        assert LINK.search(item), item
        assert re.search(r"\d", LINK.sub("", item)), item
        assert item.endswith("."), item
        # one sentence: no sentence end (". " before a capital) inside it
        assert len(re.split(r"(?<=[.!?])\s+(?=[A-Z])", LINK.sub("link", item))) == 1, item


def test_render_twice_is_identical(rendered, tmp_path):
    src = rendered / "data"
    again = _render(src, tmp_path / "again")
    first = {str(p.relative_to(rendered)): p.read_text() for p in markdown_files(rendered)}
    second = {str(p.relative_to(again)): p.read_text() for p in markdown_files(again)}
    assert first == second


def test_swap_list_covers_every_page(rendered):
    datas = [report.load(d) for d in report.recorded(rendered)]
    parts = report.page_parts(datas)
    for md in markdown_files(rendered):
        rel = md.relative_to(rendered)
        assert str(rel) in parts or rel.parts[0] in parts, rel


def test_compare_and_power_figures_are_drawn_and_linked(rendered):
    """Issue figures: H200/H100 ratios (both GPUs recorded) on the overview, power and clock on each
    GPU's environment page where its rows carry power; two renders give the same bytes."""
    from study import figures_compare
    datas = [report.load(d) for d in report.recorded(rendered)]
    drawn = []
    if figures_compare.pair(datas) is not None:
        drawn.append(rendered / "figures" / figures_compare.COMPARE_NAME)
        assert f"figures/{figures_compare.COMPARE_NAME}" in (rendered / "README.md").read_text()
    for data in datas:
        if figures_compare.has_power(data):
            drawn.append(rendered / "figures" / data.gpu / figures_compare.POWER_NAME)
            assert f"figures/{data.gpu}/{figures_compare.POWER_NAME}" in (rendered / data.gpu / "environment.md").read_text()
    if rendered.name.startswith("committed"):
        assert len(drawn) == 1 + len(datas), drawn    # both GPUs recorded, each with power samples
    again = _render(rendered / "data", rendered.parent / (rendered.name + "_again"))
    for path in drawn:
        assert path.is_file() and path.stat().st_size > 1000, path
        assert path.read_bytes() == (again / path.relative_to(rendered)).read_bytes(), path


def test_gpu_comparison_covers_the_decode_shapes(rendered):
    """H200 against H100 at the squares and at decode (M <= 16: memory-bound, where a kernel can
    follow the copy bandwidth); the overview says which stage follows it, with its number."""
    from study import figures_compare, overview
    datas = [report.load(d) for d in report.recorded(rendered)]
    if figures_compare.pair(datas) is None:
        pytest.skip("one GPU recorded")
    assert overview.gpus(datas) in (rendered / "README.md").read_text()   # the finding, where the runs compare
    _same_code(datas)   # the recorded runs may share no comparable stage (a filtered run merged into an
    df = figures_compare.ratios(datas)   # older one): the finding from the same rows with equal digests
    assert {"4096^3", figures_compare.DECODE_AT} <= set(df["at"]) and (df["ratio"] > 0).all()
    text = overview.gpus(datas)
    assert text.startswith("From the H100 to the H200") and "x faster" in text


def _same_code(datas):
    """Give both GPUs' runs the same source digest per stage, as if no stage changed in between."""
    from study import figures_compare
    for d in figures_compare.pair(datas):
        d.builds = d.builds.assign(source=[f"{f}:{s}" for f, s in zip(d.builds["family"], d.builds["stage"])])


def test_gpu_comparison_leaves_out_stages_whose_code_changed(rendered):
    """Two runs compare a stage only where its source digest (builds.csv) is the same; without
    digests the finding says which commits it compares."""
    from study import figures_compare, overview
    datas = [report.load(d) for d in report.recorded(rendered)]
    if figures_compare.pair(datas) is None:
        pytest.skip("one GPU recorded")
    h200, h100 = figures_compare.pair(datas)
    if figures_compare.left_out(datas) is None:
        assert "before per-stage source digests" in overview.gpus(datas)
    s14 = ("cuda", "s14_stream_k")
    _same_code(datas)
    before = figures_compare.ratios(datas)
    assert s14 in set(zip(before["family"], before["stage"]))
    assert figures_compare.left_out(datas) == []
    h100.builds.loc[(h100.builds["family"] == s14[0]) & (h100.builds["stage"] == s14[1]), "source"] = "changed"
    assert figures_compare.left_out(datas) == [s14]
    after = figures_compare.ratios(datas)
    assert s14 not in set(zip(after["family"], after["stage"])) and 0 < len(after) < len(before)
    text = overview.gpus(datas)
    assert "left out, changed in between: cuda s14" in text and text.endswith(".")


def test_ladder_y_limit_is_above_the_cublas_line(rendered, tmp_path):
    from study import figures
    for d in report.recorded(rendered):
        res = report.load(d).results
        for prec in pages.precisions(report.load(d)):
            cb = res[(res["dtype"] == prec) & (res["family"] == "cublas") & (res["kind"] == "baseline")
                     & (res["status"] == "ok") & (res["M"] == 4096) & (res["N"] == 4096) & (res["K"] == 4096)]
            if cb.empty:
                continue
            lo, hi = figures.ladder(res, prec, 4096, tmp_path / f"{d.name}_{prec}.png")
            assert hi >= 1.1 * cb["tflops"].max(), (d.name, prec, hi)


def test_the_power_finding_says_when_its_readings_are_one_second_averages():
    import pandas as pd

    from study import overview
    from study.results import Data

    res = pd.DataFrame([dict(dtype=overview.POWER_PREC, M=overview.POWER_N, N=overview.POWER_N, K=overview.POWER_N,
                             kind="stage", power_w=w, sm_mhz=1725.0) for w in (370.0, 380.0)])
    env = {"power_limit_w": "700.00", "sm_clock_max_mhz": "1980"}
    averaged = overview.power(Data("NVIDIA_H200", res, environment=env))
    instant = overview.power(Data("NVIDIA_H200", res, environment=dict(env, power_field="power.draw.instant")))
    assert "median 375 W (nvidia-smi's one-second average" in averaged
    assert "median 375 W of the 700 W power limit" in instant


def test_the_power_finding_explains_instantaneous_readings_above_the_limit():
    """H200, 2026-11-26: power.draw.instant read a median 728 W at 8192^3 bf16 against the 700 W
    limit; the sentence must not read as a board drawing more than its limit."""
    import pandas as pd

    from study import overview
    from study.results import Data

    res = pd.DataFrame([dict(dtype=overview.POWER_PREC, M=overview.POWER_N, N=overview.POWER_N, K=overview.POWER_N,
                             kind="stage", power_w=w, sm_mhz=1725.0) for w in (720.0, 736.0)])
    env = {"power_limit_w": "700.00", "sm_clock_max_mhz": "1980", "power_field": "power.draw.instant"}
    text = overview.power(Data("NVIDIA_H200", res, environment=env))
    assert "median 728 W (instantaneous readings, which may pass the limit: the board holds it on average) " \
           "against the 700 W power limit" in text
