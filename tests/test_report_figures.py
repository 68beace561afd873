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
    ZERO_ERROR_LABEL,
    compare_figure,
    curves_figure,
    depth_figure,
    figure_png,
    heatmap_figure,
    layer_profile_figure,
    metric_title,
    train_test_figure,
)
from nclab.report.run_report import collapse_summary, run_title, write_run_report, zero_error_text

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
        if ax is panels[0]:  # the zero-error marker, in the first panel's legend
            x, _ = curves.pop(ZERO_ERROR_LABEL)
            np.testing.assert_array_equal(x, [3.0, 3.0])
            assert ZERO_ERROR_LABEL in [t.get_text() for t in ax.get_legend().get_texts()]
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
    np.testing.assert_array_equal(curves.pop(ZERO_ERROR_LABEL)[0], [3.0, 3.0])
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
    # penultimate, loss, metrics against depth, per-layer curves, heatmap, train/test
    assert len(re.findall(r'src="data:image/png;base64,', text)) == 6
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


def test_titles_name_the_collapse_family():
    """NC2 is findable as NC2: the ETF Gram error (PFC2 of [Wang et al. 2024]) is titled by its family."""
    assert metric_title("etf_gram_error") == "NC2: ETF Gram error (PFC2)"
    assert metric_title("trace_ratio").startswith("NC1: ") and metric_title("trace_ratio").endswith("(PFC1)")
    assert metric_title("ncc_accuracy") == "NC4: NCC accuracy (PFC3)"
    assert (metric_title("self_duality"), metric_title("equinorm"), metric_title("vci")) == (
        "NC3: self-duality",
        "NC2: equinorm",
        "NC1: VCI",
    )
    assert metric_title("error") == "error" and metric_title("gnc1") == "GNC1"
    fig = curves_figure(ROWS, ["nc1", "etf_gram_error", "ncc_accuracy"])
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert [t.split(":")[0] for t in titles] == ["NC1", "NC2", "NC4"]
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_visible()] == ["nc1", "etf_gram_error", "ncc_accuracy"]


def test_layer_profile_figure_plots_each_metric_against_depth_at_the_chosen_epochs():
    fig = layer_profile_figure({"": (ROWS, 3)}, ["nc1", "trace_ratio"], epochs=[0, 10])
    (nc1_ax, tr_ax) = [ax for ax in fig.axes if ax.get_lines()]
    for ax, power in ((nc1_ax, 2), (tr_ax, 1)):
        curves = _lines(ax)
        assert set(curves) == {"epoch 0", "epoch 10"}
        for epoch in (0, 10):
            x, y = curves[f"epoch {epoch}"]
            np.testing.assert_array_equal(x, [1.0, 2.0])  # layers a, b: input side first
            np.testing.assert_allclose(y, [1.0 / (epoch + 1) ** power, 0.1 / (epoch + 1) ** power], rtol=1e-15)
        assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    # default epochs: the first, the zero-error and the last measured one; the zero-error one says so
    fig = layer_profile_figure({"MSE": (ROWS, 3)}, ["nc1"])
    (ax,) = [ax for ax in fig.axes if ax.get_lines()]
    assert set(_lines(ax)) == {"epoch 0", "epoch 3 (zero error)", "epoch 10"} and ax.get_title().startswith("MSE: NC1")
    # a metric measured at one layer only has no panel
    one_layer = [r for r in ROWS if r.layer == "b"]
    assert not [ax for ax in layer_profile_figure({"": (one_layer, None)}, ["nc1"]).axes if ax.get_visible()]


def test_compare_figure_legend_on_top_names_the_zero_error_marker():
    fig = compare_figure({"x": (ROWS, 3), "y": (ROWS, None)}, ["nc1", "trace_ratio"], "b", legend_on_top=True)
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts[:2] == ["x", "y"] and texts[2].startswith(ZERO_ERROR_LABEL)
    fig.canvas.draw()
    top_of_panels = max(ax.get_position().y1 for ax in fig.axes if ax.get_visible())
    box = legend.get_window_extent().transformed(fig.transFigure.inverted())
    assert box.y0 >= top_of_panels  # above the first row of panels, seen with it
    plt_fig = compare_figure({"x": (ROWS, None)}, ["nc1"], "b", legend_on_top=True)
    assert [t.get_text() for t in plt_fig.legends[0].get_texts()] == ["x"]  # no zero-error epoch: no marker entry


def test_monitor_run_report_has_no_placeholder(tmp_path):
    """A CollapseMonitor's run directory (a table, no config, no summary): the title and the summary name what is
    known, nothing as '?' or empty."""
    import torch

    from nclab import CollapseMonitor

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    x, y = torch.randn(30, 4), torch.arange(30) % 3
    with CollapseMonitor(net, 3, layers=["0", "penultimate"], out=tmp_path / "mon") as monitor:
        for epoch in (0, 1):
            monitor.measure((x, y), split="train", epoch=epoch)
    text = write_run_report(tmp_path / "mon").read_text()
    title = re.search(r"<h1>(.*?)</h1>", text).group(1)
    assert title == "nclab run mon: Sequential measured by a CollapseMonitor, K = 3", title
    assert "Measured epochs: 2 (0, 1)." in text and "?" not in title
    from nclab.io import read_run

    record = read_run(tmp_path / "mon")
    assert run_title(record) == title and zero_error_text(record) in ("not reached", "0", "1")
