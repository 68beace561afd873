"""docs/reliability.md lists every row of both reliability probes, and every test it names exists.

The page is the record of what each probe found and what happens now; a renamed or deleted test would leave it
pointing at nothing, and a row missing from its index would be a fault nobody re-checked.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "reliability.md").read_text()
INDEX = DOC[DOC.index("## Every row of both probes") :]
TESTS = {p.name: p.read_text() for p in (ROOT / "tests").glob("test_*.py")}


def _index_rows() -> dict[tuple[int, int], tuple[str, str]]:
    rows = {}
    for line in INDEX.splitlines():
        m = re.match(r"\| ([12]) \| (\d+) \| .* \| ([ABCD]) \| (.*) \|$", line)
        if m:
            rows[int(m.group(1)), int(m.group(2))] = (m.group(3), m.group(4))
    return rows


def test_the_index_lists_every_row_of_both_probes_once():
    rows = _index_rows()
    assert sorted(r for p, r in rows if p == 1) == list(range(1, 118))
    assert sorted(r for p, r in rows if p == 2) == list(range(1, 144))
    cats = [cat for (p, _), (cat, _) in rows.items() if p == 2]
    assert {c: cats.count(c) for c in "ABCD"} == {"A": 81, "B": 27, "C": 28, "D": 7}  # the probe's own counts


def test_every_failing_row_names_a_test_that_exists():
    rows = _index_rows()
    for (probe, row), (cat, now) in rows.items():
        if cat == "A":
            assert now == "A", (probe, row, now)
            continue
        assert now.startswith("fixed"), (probe, row, now)
        names = re.findall(r"`(?:tests/(test_\w+\.py)::)?(test_\w+)`", now)
        assert names, (probe, row, now)
        for file, name in names:
            files = [file] if file else list(TESTS)
            assert any(re.search(rf"^def {name}\b", TESTS[f], re.M) for f in files), (probe, row, file, name)


def test_second_probe_tests_are_named_by_their_row():
    rows = _index_rows()
    for (probe, row), (cat, now) in rows.items():
        if probe == 2 and cat != "A":
            assert re.search(rf"test_p2_row_{row:03d}_", now), (row, now)
