"""The run-directory metrics table (nclab.io.run_table): typed rows, bit-identical round trip, atomic writes."""

import math
import os
import struct
import subprocess
import sys

import pytest

import nclab.io.atomic
from nclab.io import COLUMNS, OUTPUT_LAYER, MetricRow, read_metrics, relabel_output, write_metrics

SPECIAL = [math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308, 0.1 + 0.2, 1 / 3, -2.5e-17]
ROWS = [MetricRow(e, s, "fc", f"m{i}", v) for e in (0, 7) for s in ("train", "test") for i, v in enumerate(SPECIAL)]
ROWS += [MetricRow(3, "train", OUTPUT_LAYER, "lr", 0.05), MetricRow(3, "train", "layer,with comma", "nc1", 1.0)]


def _bits(v: float) -> bytes:
    return struct.pack("<d", v)


def test_round_trip_is_bit_identical(tmp_path):
    write_metrics(ROWS, tmp_path)
    got = read_metrics(tmp_path)
    assert len(got) == len(ROWS)
    for r, g in zip(ROWS, got, strict=True):
        assert (g.epoch, g.split, g.layer, g.metric) == (r.epoch, r.split, r.layer, r.metric)
        assert type(g.epoch) is int and type(g.value) is float
        # nan == nan is False and 0.0 == -0.0 is True: compare the IEEE-754 bits instead
        assert _bits(g.value) == _bits(r.value), (r, g)
    assert read_metrics(tmp_path / "metrics.csv")[-1] == ROWS[-1]  # the file itself, not only its folder


def test_header_and_bad_header(tmp_path):
    write_metrics(ROWS[:1], tmp_path)
    lines = (tmp_path / "metrics.csv").read_text().splitlines()
    assert lines == ["epoch,split,layer,metric,value", "0,train,fc,m0,nan"]
    assert COLUMNS == ("epoch", "split", "layer", "metric", "value") == MetricRow._fields
    bad = tmp_path / "bad.csv"
    bad.write_text("epoch,split,layer,value\n0,train,fc,1.0\n")
    with pytest.raises(ValueError, match="expected the header epoch,split,layer,metric,value"):
        read_metrics(bad)


def test_parent_folders_are_created(tmp_path):
    out = tmp_path / "a" / "b" / "run"
    written = write_metrics(ROWS, out)
    assert written[0] == out / "metrics.csv" and written[0].is_file()
    assert len(read_metrics(out)) == len(ROWS)


def test_metric_row_fields():
    r = MetricRow(12, "test", "layer3", "ncc_accuracy", 0.875)
    assert (r.epoch, r.split, r.layer, r.metric, r.value) == (12, "test", "layer3", "ncc_accuracy", 0.875)
    assert r == (12, "test", "layer3", "ncc_accuracy", 0.875)  # still a tuple: sorts, hashes, unpacks
    assert r._replace(value=0.5).value == 0.5 and r.value == 0.875


def test_relabel_output_moves_only_network_rows():
    rows = [MetricRow(1, "train", OUTPUT_LAYER, "error", 0.25), MetricRow(1, "train", "fc", "nc1", 0.5)]
    assert relabel_output(rows, "fc") == [MetricRow(1, "train", "fc", "error", 0.25), rows[1]]
    assert rows[0].layer == OUTPUT_LAYER  # the input is left as it was


def test_parquet_equals_csv(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    written = write_metrics(ROWS, tmp_path)
    assert [p.name for p in written] == ["metrics.csv", "metrics.parquet"]
    table = pq.read_table(tmp_path / "metrics.parquet")
    assert table.column_names == list(COLUMNS)
    assert [str(t) for t in table.schema.types] == ["int64", "string", "string", "string", "double"]
    from_parquet = list(zip(*table.to_pydict().values(), strict=True))
    from_csv = read_metrics(tmp_path)
    assert [r[:4] for r in from_parquet] == [r[:4] for r in from_csv]
    assert [_bits(r[4]) for r in from_parquet] == [_bits(r.value) for r in from_csv]


def test_parquet_columns_are_valid_and_writing_them_does_not_import_pandas(tmp_path):
    """The columns are built from their buffers: valid arrow (UTF-8 names included), and pyarrow's ``pa.array``,
    which imports pandas (~0.5 s) when it is installed, is not used."""
    pytest.importorskip("pyarrow")
    code = (
        "import sys, pathlib\n"
        "from nclab.io.run_table import MetricRow, write_metrics\n"
        "rows = [MetricRow(0, 'train', 'fc', 'nc1', 0.5), MetricRow(1, 'tëst', 'çonv', 'nc1', float('nan'))]\n"
        f"write_metrics(rows, pathlib.Path({str(tmp_path)!r}), run_id='r-1')\n"
        "print('pandas' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(tmp_path / "metrics.parquet")
    table.validate(full=True)
    assert table.column("split").to_pylist() == ["train", "tëst"] and table.column("run_id").to_pylist() == ["r-1"] * 2
    assert table.column("layer").to_pylist() == ["fc", "çonv"] and math.isnan(table.column("value")[1].as_py())


def test_partial_file_is_never_visible(tmp_path, monkeypatch):
    old, new = ROWS[:3], ROWS
    write_metrics(old, tmp_path)
    seen = []
    real_replace = os.replace

    def replace(src, dst):
        # at the moment of the rename the new table is complete in a hidden sibling and the old one is intact
        if str(dst).endswith("metrics.csv"):
            seen.append(read_metrics(tmp_path))
            assert os.path.dirname(src) == str(tmp_path) and os.path.basename(src).startswith(".metrics.csv.")
            assert [r.metric for r in read_metrics(src)] == [r.metric for r in new]
        real_replace(src, dst)

    monkeypatch.setattr(nclab.io.atomic.os, "replace", replace)
    write_metrics(new, tmp_path)
    assert [r.metric for r in seen[0]] == [r.metric for r in old]
    assert len(read_metrics(tmp_path)) == len(new)

    def crash(fd):  # a failure after the bytes went out, before they are durable: nothing may change
        raise OSError("disk full")

    monkeypatch.setattr(nclab.io.atomic.os, "fsync", crash)
    with pytest.raises(OSError, match="disk full"):
        write_metrics(old, tmp_path)
    assert len(read_metrics(tmp_path)) == len(new)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left behind


def test_csv_and_parquet_are_one_result(tmp_path, monkeypatch):
    """A failure while writing either file leaves both as they were (both are written before either is renamed);
    without pyarrow a parquet copy of an earlier table is removed rather than left beside the new csv."""
    pytest.importorskip("pyarrow")
    write_metrics(ROWS[:3], tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real_fsync, calls = os.fsync, []

    def full_on_the_second(fd):  # the parquet file is written, the csv runs out of room
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(nclab.io.atomic.os, "fsync", full_on_the_second)
    with pytest.raises(OSError, match="No space left"):
        write_metrics(ROWS, tmp_path)
    monkeypatch.setattr(nclab.io.atomic.os, "fsync", real_fsync)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporary file either

    import nclab.io.run_table as run_table

    monkeypatch.setattr(run_table, "_parquet_bytes", lambda rows, run_id: None)  # as without pyarrow
    assert [p.name for p in write_metrics(ROWS, tmp_path)] == ["metrics.csv"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.csv"] and len(read_metrics(tmp_path)) == len(ROWS)


def test_a_table_prints_as_one_summary_line_not_its_rows():
    from nclab.io.run_table import MetricRow, MetricTable

    rows = [
        MetricRow(e, s, layer, m, 1.0 / (e + 1))
        for e in range(0, 21, 5)
        for s in ("train", "test")
        for layer in ("layer3", "fc")
        for m in ("nc1", "nc2", "vci", "cdnv", "trace_ratio", "nc3", "nc4", "error")
    ]
    text = repr(MetricTable(rows, run_id="mine"))
    assert "\n" not in text and len(text) < 300 and "MetricRow" not in text
    assert text.startswith("MetricTable(160 rows, run_id='mine', epochs 0-20 (5 measured)")
    assert "(8 in all)" in text and "['test', 'train']" in text
    assert repr(MetricTable()) == "MetricTable(0 rows, run_id=None)"
