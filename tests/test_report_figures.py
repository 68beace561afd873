"""Report figures and the self-contained run report."""

import math
import re

import numpy as np
from matplotlib.text import Text

from nclab.io.run_table import OUTPUT_LAYER, MetricRow, write_metrics
from nclab.report.figures import (
    FIGURE_DPI,
    MAX_WIDTH_IN,
    MIN_FONT_PT,
    compare_figure,
    curves_figure,
    depth_figure,
    figure_png,
    heatmap_figure,
    train_test_figure,
)
from nclab.report.run_report import collapse_summary, write_run_report

ROWS = [
    MetricRow(e, s, lay, m, v)
    for e in (0, 1, 3, 10)
    for s in ("train", "test")
    for lay, scale in (("a", 1.0), ("b", 0.1))
    for m, v in (
        ("trace_ratio", scale / (e + 1)),
        ("etf_gram_error", 0.5 / (e + 1)),
        ("ncc_accuracy", 0.9),
        ("nc1", scale / (e + 1) ** 2),
    )
] + [MetricRow(e, s, OUTPUT_LAYER, "error", max(0.0, 0.3 - 0.1 * e)) for e in (0, 1, 3, 10) for s in ("train", "test")]


def _is_png(fig) -> bool:
    """The figure is readable at 1:1 in a 1280-px window, then renders as a PNG.

    Method: the PNG is rendered at FIGURE_DPI and shown at its pixel size, so a text of s points is
    s * FIGURE_DPI / 72 CSS pixels high (its font size); every visible text must reach 10 px, and the figure
    must fit MAX_WIDTH_IN * FIGURE_DPI = 1200 px."""
    fig.canvas.draw()
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    assert sizes and min(sizes) * FIGURE_DPI / 72 >= 10.0, min(sizes)
    assert min(sizes) >= MIN_FONT_PT and fig.get_size_inches()[0] <= MAX_WIDTH_IN + 1e-9
    b = figure_png(fig)
    return b[:8] == b"\x89PNG\r\n\x1a\n" and len(b) > 1000


def _lines(ax) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The labelled curves of a panel: label -> (x, y) as plotted."""
    return {
        ln.get_label(): (np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float))
        for ln in ax.get_lines()
        if not ln.get_label().startswith("_")
    }


EPOCHS = np.array([0.0, 1.0, 3.0, 10.0])
SCALE = {
    "a": 1.0,
    "b": 0.1,
}  # ROWS: trace_ratio = scale / (e + 1), nc1 = scale / (e + 1)^2, etf_gram_error = 0.5 / (e + 1)


def _depth_rows() -> list[MetricRow]:
    depth = [
        MetricRow(e, "train", lay, "relative_depth", v * (1 + e)) for e in (0, 5) for lay, v in (("a", 0.0), ("b", 1.0))
    ]
    depth += [
        MetricRow(e, "train", lay, f"geodesic_{k}", 0.5 + 0.1 * i)
        for e in (0, 5)
        for lay in "ab"
        for i, k in enumerate(("pfc1", "pfc2", "pfc3"))
    ]
    return depth


def test_figures_are_readable_pngs():
    assert _is_png(curves_figure(ROWS, ["trace_ratio", "nc1", "missing"], zero_error_epoch=3))
    assert _is_png(heatmap_figure(ROWS))
    assert _is_png(train_test_figure(ROWS, ["nc1"], "b", zero_error_epoch=3))
    assert _is_png(compare_figure({"x": (ROWS, 3), "y": (ROWS, None)}, ["nc1"], "b"))
    assert _is_png(depth_figure(ROWS + _depth_rows()))


def test_curves_figure_plots_the_rows():
    fig = curves_figure(ROWS, ["trace_ratio", "nc1", "missing"], zero_error_epoch=3)
    panels = [ax for ax in fig.axes if ax.get_lines()]
    assert len(panels) == 2  # "missing" has no rows: no panel
    for ax, power in zip(panels, (1, 2), strict=True):
        curves = _lines(ax)
        assert set(curves) == {"a", "b"}
        for lay, (x, y) in curves.items():
            np.testing.assert_array_equal(x, EPOCHS)
            np.testing.assert_allclose(y, SCALE[lay] / (EPOCHS + 1) ** power, rtol=1e-15)
        assert ax.get_yscale() == "log"  # positive values of a "lower is better" metric


def test_heatmap_figure_shows_log10_of_the_layer_epoch_grid():
    fig = heatmap_figure(ROWS)
    images = [ax.images[0] for ax in fig.axes if ax.images]
    assert len(images) == 3
    tr, etf, ncc = (np.asarray(im.get_array(), float) for im in images)
    np.testing.assert_allclose(tr, np.log10([[SCALE[lay] / (e + 1) for e in EPOCHS] for lay in "ab"]), rtol=1e-14)
    np.testing.assert_allclose(etf, np.log10([[0.5 / (e + 1) for e in EPOCHS] for _ in "ab"]), rtol=1e-14)
    np.testing.assert_array_equal(ncc, np.full((2, 4), 0.9))  # "higher is better": shown linearly


def test_train_test_and_compare_figures_plot_the_rows():
    (ax,) = [a for a in train_test_figure(ROWS, ["nc1"], "b", zero_error_epoch=3).axes if a.get_lines()]
    curves = _lines(ax)
    assert set(curves) == {"train", "test"}
    for x, y in curves.values():
        np.testing.assert_array_equal(x, EPOCHS)
        np.testing.assert_allclose(y, 0.1 / (EPOCHS + 1) ** 2, rtol=1e-15)
    (ax,) = [a for a in compare_figure({"x": (ROWS, 3), "y": (ROWS, None)}, ["nc1"], "b").axes if a.get_lines()]
    curves = _lines(ax)
    assert set(curves) == {"x", "y"}
    for x, y in curves.values():
        np.testing.assert_array_equal(x, EPOCHS)
        np.testing.assert_allclose(y, 0.1 / (EPOCHS + 1) ** 2, rtol=1e-15)
    # the zero-error epoch of run "x" (and of no other run) is marked by a vertical line
    vlines = [ln for ln in ax.get_lines() if ln.get_label().startswith("_") and np.ptp(ln.get_xdata()) == 0]
    assert [float(ln.get_xdata()[0]) for ln in vlines] == [3.0]


def test_depth_figure_plots_measured_and_geodesic_values_against_depth():
    fig = depth_figure(ROWS + _depth_rows(), epochs=[0])
    panels = [ax for ax in fig.axes if ax.get_lines()]
    measured = {"trace_ratio": [1.0, 0.1], "etf_gram_error": [0.5, 0.5], "ncc_accuracy": [0.9, 0.9]}
    for ax, (metric, want), geo in zip(panels, measured.items(), (0.5, 0.6, 0.7), strict=True):
        curves = _lines(ax)
        x, y = curves["epoch 0 measured"]
        np.testing.assert_array_equal(x, [0.0, 1.0])  # relative depth of layers a and b at epoch 0
        np.testing.assert_allclose(y, want, rtol=1e-15, err_msg=metric)
        np.testing.assert_allclose(curves["epoch 0 geodesic"][1], [geo, geo], rtol=1e-15)


def test_collapse_summary_numbers():
    s = collapse_summary(ROWS, "b", 3)
    assert s["nc1 at zero-error epoch"] == 0.1 / 16 and s["nc1 last"] == 0.1 / 121
    assert abs(s["orders of magnitude after TPT"] - math.log10(121 / 16)) < 1e-12


def test_run_report_is_self_contained(tmp_path):
    write_metrics(ROWS, tmp_path)
    (tmp_path / "summary.json").write_text('{"zero_error_epoch": 3, "penultimate": "b", "measured_epochs": [0,1,3,10]}')
    path = write_run_report(tmp_path)
    text = path.read_text()
    assert len(re.findall(r'src="data:image/png;base64,', text)) == 5  # loss, penultimate, layers, heatmap, train/test
    assert not re.search(r'(src|href)="(https?:)?//', text)  # no external asset


def test_log_axes_get_at_least_three_tick_labels():
    """An axis spanning 0.02 to 2 (two decades) gets the 1-2-5 labels, not only 10^-1 and 10^0; one within a
    decade gets every integer multiple; trace_ratio and self_duality panels use the same rule."""
    import matplotlib.pyplot as plt

    from nclab.report.figures import log_ticks

    for (lo, hi), at_least in (((0.02, 2.0), 7), ((0.3, 0.5), 3), ((1e-8, 1.0), 9)):
        fig, ax = plt.subplots()
        ax.semilogy([0, 1], [lo, hi])
        log_ticks(ax)
        fig.canvas.draw()
        y0, y1 = ax.get_ylim()
        shown = [t for t in ax.get_yticklabels() if t.get_text() and y0 <= t.get_position()[1] <= y1]
        assert len(shown) >= at_least, (lo, hi, [t.get_text() for t in shown])
        plt.close(fig)
    rows = [
        MetricRow(e, "train", "b", m, 2.0 / (e + 1) ** 2) for e in (0, 1, 3, 9) for m in ("trace_ratio", "self_duality")
    ]
    fig = curves_figure(rows, ["trace_ratio", "self_duality"])
    fig.canvas.draw()
    for ax in fig.axes:
        y0, y1 = ax.get_ylim()
        assert len([t for t in ax.get_yticklabels() if t.get_text() and y0 <= t.get_position()[1] <= y1]) >= 3
    plt.close(fig)
