"""The landing page in a real browser (headless Chromium, `chromium-headless-shell`, installed by
.ci/run): every figure decodes and shows at its size, and a screenshot renders."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

from test_cli_training import aam
from test_overview import regression

BROWSER = "chromium-headless-shell"
MEASURE = (
    "<script>window.onload=()=>{for(const i of document.images)"
    "i.setAttribute('data-width',i.naturalWidth)}</script></body>"
)


def _browser(*args: str) -> subprocess.CompletedProcess:
    path = shutil.which(BROWSER)
    assert path, f"{BROWSER} not found: apt-get install {BROWSER} (.ci/run does)"
    flags = ["--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000"]
    return subprocess.run([path, *flags, *args], capture_output=True, text=True, timeout=120)


def test_every_figure_of_the_landing_page_renders_in_a_browser(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    work = tmp_path / "work"
    predict = work / "runs/tiny/predict"
    predict.mkdir(parents=True)
    (predict / "metrics.json").write_text(json.dumps(regression([-0.5, -0.9, -0.1])))
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1])
    fig.savefig(predict / "predicted_vs_true.png", dpi=50)
    (work / "runs/tiny/finetune").mkdir()
    fig.savefig(work / "runs/tiny/finetune/history.svg")
    plt.close(fig)
    out = work / "overview.html"
    assert aam("overview", "--run", f"tiny=demo={predict / 'metrics.json'}", "--output", out) == 0
    measured = tmp_path / "measured.html"  # the page, plus a script that reads each image's size
    measured.write_text(out.read_text().replace("</body>", MEASURE))
    dom = _browser("--dump-dom", measured.as_uri())
    assert dom.returncode == 0, dom.stderr[-500:]
    widths = [int(w) for w in re.findall(r'data-width="(\d+)"', dom.stdout)]
    assert len(widths) == 2 and widths[0] == 200 and widths[1] > 0, widths  # 4 in x 50 dpi
    shot = tmp_path / "page.png"
    run = _browser(f"--screenshot={shot}", "--window-size=1000,800", out.as_uri())
    assert run.returncode == 0 and shot.read_bytes()[:4] == b"\x89PNG", run.stderr[-500:]


WIDTH = (
    "<script>window.onload=()=>{document.body.setAttribute('data-overflow',"
    "document.documentElement.scrollWidth-document.documentElement.clientWidth)}</script></body>"
)


def test_long_provenance_records_wrap_within_the_page_width(tmp_path):
    """A stage's command of long paths wraps in its cell, a table still wider than the window
    (a long version line) scrolls within the page: the page does not scroll sideways, at
    1,400 px nor at 800."""
    work = tmp_path / "work"
    deep = work / "runs/tiny/search/trials/aam-dc76fc9fbd7b-597f8d81492b/0/fold2/predict"
    deep.mkdir(parents=True)
    long = ["--output-dir", str(deep), "--note", "x" * 150, *["--lr", "0.003"] * 20]
    record = {"command": ["aam", "finetune", *long], "code_fingerprint": "61fe83ed7f8b7fe7"}
    record["tools"] = {"fasttree": "FastTree 2.1.11 Double precision (No SSE3): " + "y" * 120}
    (deep / "provenance.json").write_text(json.dumps(record))
    (deep / "metrics.json").write_text(json.dumps(regression([-0.5, -0.9, -0.1])))
    out = work / "overview.html"
    assert aam("overview", "--run", f"tiny=demo={deep / 'metrics.json'}", "--output", out) == 0
    measured = tmp_path / "measured.html"
    measured.write_text(out.read_text().replace("</body>", WIDTH))
    for width in (1400, 800):
        dom = _browser(f"--window-size={width},900", "--dump-dom", measured.as_uri())
        assert dom.returncode == 0, dom.stderr[-500:]
        assert re.search(r'data-overflow="(-?\d+)"', dom.stdout).group(1) == "0", width
