"""The HTML reports as a reader sees them: rendered in headless Chromium at 1280 x 900.

Reports rendered: the demo (a 3-epoch ``run_demo``: its comparison page and the MSE run's page) and one tiny
experiment per family: UFM (``ufm-figures``), codes (``gnc-d2-codes``), theory (``mse-decomposition-ufm``,
``geodesic-digits``) and training (``fashion-mnist-cnn``, when its dataset is installed).

Method, per report:

* images: every ``<img>`` of the file is a ``data:image/png;base64`` URI that decodes to a PNG (signature and a
  nonzero IHDR width and height); in the browser every image is ``complete`` with a nonzero ``naturalWidth``;
* console: Chromium runs with ``--enable-logging=stderr``, which writes every console message (errors, failed
  loads) as a ``CONSOLE`` line; the reports contain no script, so any such line fails the test;
* first viewport: a copy of the report gets a small script that, after the ``load`` event, writes the geometry
  of the images into the DOM; ``--dump-dom`` prints it. The first figure's top edge must lie inside the window's
  viewport (``innerHeight``, at most 900 px) and every image is shown at 1:1 (rendered width = PNG width, at
  most 1280 px);
* width: nothing scrolls sideways (the document's ``scrollWidth`` is the window's) and every table's right edge
  lies inside the window;
* table of contents: every entry is one box (``getClientRects`` of an entry split across the two columns
  returns two);
* figure text: every figure is rendered by ``Figure.savefig`` (wrapped here) at a known DPI; a text of ``s``
  points is ``s * dpi / 72`` px high in the PNG, i.e. on screen at 1:1; every visible text must reach 10 px.

A control page with a console error and a broken image checks that the method detects both. Screenshots and
the rendered copies are kept under ``runs/browser/`` (gitignored; CI artefacts).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

from nclab.experiments.demo import run_demo
from nclab.experiments.registry import run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")

SHOTS = Path(__file__).resolve().parents[1] / "runs" / "browser"
WINDOW = (1280, 900)
MIN_TEXT_PX = 10.0
FASHION = Path("/usr/share/datasets/fashion-mnist")

_PROBE = """<script>addEventListener("load", () => {
  const imgs = [...document.images].map(i => ({complete: i.complete, natural: i.naturalWidth,
    width: i.getBoundingClientRect().width, top: i.getBoundingClientRect().top}));
  const tables = [...document.querySelectorAll("table")].map(t => t.getBoundingClientRect().right);
  const toc = [...document.querySelectorAll("nav li")].map(li => li.getClientRects().length);
  const scrollWidth = document.documentElement.scrollWidth;
  const p = document.createElement("pre"); p.id = "nclab-probe";
  p.textContent = JSON.stringify({imgs, tables, toc, scrollWidth, innerWidth, innerHeight});
  document.body.append(p);
});</script>"""


def _render(html_path: Path, name: str, tmp_path: Path) -> tuple[dict, list[str]]:
    """Render a copy of ``html_path`` with the probe; return the probe's JSON and the console lines."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = SHOTS / f"{name}.html"
    page.write_text(html_path.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
         f"--screenshot={SHOTS / f'{name}.png'}", "--enable-logging=stderr", "--v=0", "--dump-dom",
         page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    match = re.search(r'<pre id="nclab-probe">(.*?)</pre>', proc.stdout, re.S)
    assert match, proc.stdout[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return json.loads(match.group(1).replace("&quot;", '"')), console


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _check_report(html_path: Path, name: str, tmp_path: Path) -> dict:
    text = html_path.read_text(encoding="utf-8")
    sources = re.findall(r'<img[^>]*\ssrc="([^"]*)"', text)
    assert sources, f"{name}: no figure"
    for src in sources:
        assert src.startswith("data:image/png;base64,"), src[:60]
        w, h = _png_size(base64.b64decode(src.split(",", 1)[1], validate=True))
        assert w > 0 and h > 0
    probe, console = _render(html_path, name, tmp_path)
    assert console == [], console
    imgs = probe["imgs"]
    assert len(imgs) == len(sources)
    assert all(i["complete"] and i["natural"] > 0 for i in imgs), imgs
    viewport = min(probe["innerHeight"], WINDOW[1])
    assert 0 <= imgs[0]["top"] < viewport, (imgs[0], viewport)
    for i in imgs:
        assert i["natural"] <= WINDOW[0] and abs(i["width"] - i["natural"]) < 0.5, i
    assert probe["scrollWidth"] <= probe["innerWidth"], (name, probe["scrollWidth"])  # no sideways scrolling
    assert all(right <= probe["innerWidth"] for right in probe["tables"]), (name, probe["tables"])
    assert all(n == 1 for n in probe["toc"]), (name, probe["toc"])  # no entry split across the columns
    shot = (SHOTS / f"{name}.png").read_bytes()
    assert _png_size(shot) == WINDOW
    return probe


@pytest.fixture
def text_sizes(monkeypatch):
    """Every figure saved while the fixture is active: (its smallest visible text in px at 1:1, width in px)."""
    seen: list[tuple[float, float]] = []
    savefig = Figure.savefig

    def recording(self, *args, **kwargs):
        out = savefig(self, *args, **kwargs)  # draws the figure: tick labels exist from here on
        dpi = float(kwargs.get("dpi") or self.dpi)
        sizes = [t.get_fontsize() for t in self.findobj(Text) if t.get_visible() and t.get_text().strip()]
        # a figure-level legend's lower edge, in px from the top of the PNG
        bottom = None
        if self.legends:
            box = self.legends[0].get_window_extent().transformed(self.transFigure.inverted())
            bottom = (1 - box.y0) * self.get_size_inches()[1] * dpi
        seen.append((min(sizes) * dpi / 72, self.get_size_inches()[0] * dpi, bottom))
        return out

    monkeypatch.setattr(Figure, "savefig", recording)
    return seen


def _check_text(seen: list[tuple[float, float, float | None]], name: str) -> None:
    assert seen, f"{name}: no figure was saved"
    for px, width, _ in seen:
        assert px >= MIN_TEXT_PX, f"{name}: a figure's smallest text is {px:.1f} px at 1:1"
        assert width <= WINDOW[0], f"{name}: a figure is {width:.0f} px wide"


def test_the_method_detects_console_errors_and_broken_images(tmp_path):
    page = tmp_path / "control.html"
    page.write_text(
        '<!doctype html><html><body><img src="data:image/png;base64,AAAA"><script>console.error("control")'
        "</script></body></html>"
    )
    probe, console = _render(page, "control", tmp_path)
    assert any('"control"' in line for line in console), console
    assert probe["imgs"][0]["complete"] and probe["imgs"][0]["natural"] == 0


def test_demo_reports_in_chromium(tmp_path, text_sizes):
    summary = run_demo(tmp_path / "demo", epochs=3, progress=False)
    probe = _check_report(summary, "demo", tmp_path)
    # the overview shows a per-layer figure too: NC1 against depth (the demo tracks every hidden layer fully)
    assert len(probe["imgs"]) == 2 and "Figure 2: NC1 against depth" in summary.read_text()
    _check_report(tmp_path / "demo" / "mse" / "report.html", "demo-mse-run", tmp_path)
    _check_text(text_sizes, "demo")


@pytest.mark.parametrize(
    "name",
    ["ufm-figures", "gnc-d2-codes", "mse-decomposition-ufm", "geodesic-digits", "fashion-mnist-cnn", "resnet-depth"],
)
def test_experiment_reports_in_chromium(name, tmp_path, text_sizes):
    if name == "fashion-mnist-cnn" and not FASHION.is_dir():
        pytest.skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)")
    run(name, tmp_path / name, scale="tiny")
    _check_text(text_sizes, name)
    _check_report(tmp_path / name / "report.html", name, tmp_path)


def test_compare_report_in_chromium(tmp_path, text_sizes):
    """A sweep of 4 trials (learning rate x loss) and a run of another width compared on 4 metrics (the review's
    command): the legend above the curves in the first viewport, the runs table inside 1280 px."""
    import yaml

    from nclab.report.compare import write_compare_report
    from nclab.train import resolve_config, train
    from nclab.train.sweep import run_sweep

    base = {
        "name": "tiny",
        "data": {"name": "digits", "per_class": 12, "test_per_class": 4},
        "model": {"name": "mlp", "options": {"widths": [16, 16]}},
        "loss": {"name": "mse", "reduction": "sum_half"},
        "train": {"epochs": 2, "batch_size": 32, "threads": 1},
        "measure": {"num_log": 1},
    }
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(base))
    grid = {"optim.lr": [0.02, 0.04], "loss.name": ["mse", "ce"]}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"base": "tiny.yaml", "grid": grid}))
    run_sweep(tmp_path / "s.yaml", tmp_path / "sweep", local=True)
    train(resolve_config(base, ["model.options.widths=[24, 24]"]), tmp_path / "wide", progress=False)
    metrics = ["nc1", "etf_gram_error", "self_duality", "ncc_mismatch"]
    html_path, _ = write_compare_report([tmp_path / "sweep", tmp_path / "wide"], tmp_path / "c.html", metrics=metrics)
    probe = _check_report(html_path, "compare", tmp_path)
    _check_text(text_sizes, "compare")
    # the legend is the top of the first figure: its lower edge, on screen, lies inside the first viewport
    _, fig_px, legend_bottom = text_sizes[-1]
    first = probe["imgs"][0]
    assert legend_bottom is not None and first["natural"] == round(fig_px), (first, fig_px)
    assert first["top"] + legend_bottom < WINDOW[1], (first, legend_bottom)
    page = html_path.read_text()
    assert page.count("<tr>") == 1 + 5 and 'href="wide/report.html"' in page  # a run id links to its report
