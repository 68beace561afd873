"""Every citation in the code and docs resolves to docs/references.md, and nothing points outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCES = ROOT / "docs" / "references.md"
TEXT_SUFFIXES = (".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini")

# "[Xu & Liu 2023, Def. 5.3]", "[Han et al. 2022]", "[Tirer & Bruna 2022; Wang et al. 2024]": a capitalised surname,
# optionally "et al." or "& Surname", then a year. Numpy indexing ("x[0]", "a[i, 2020]") and intervals ("[0, 1]")
# never start with a capitalised word followed by a year, so they cannot match.
NAME = r"[A-Z][A-Za-zÀ-ÿ'-]+(?: et al\.| & [A-Z][A-Za-zÀ-ÿ'-]+)?"
WORK = rf"{NAME} (?:19|20)\d\d"
CITATION = re.compile(rf"\[((?:{WORK})(?:,[^\[\]]*)?(?:; ?{WORK}(?:,[^\[\]]*)?)*)\]")
WORK_AT_START = re.compile(rf"^\s*({WORK})")
# software: "[neural-collapse (rhubarbwu)]", "[NC notebooks (Han, Papyan & Donoho)]"
SOFTWARE = re.compile(r"(?<![\w\]])\[([\w.-]+(?: [\w.-]+)? \([A-Za-z0-9][\w ,&.-]*\))\](?!\()")

FORBIDDEN = [
    re.compile(r"[Pp]apers? 00[0-4]"),
    re.compile(r"[Ss]pecs? 00[0-4]"),
    re.compile(re.escape("../" + "shared")),
    re.compile(re.escape("shared" + "/spec")),
]


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True).stdout
        files = [ROOT / line for line in out.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        files = [p for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts and ".git" not in p.parts]
    return [p for p in files if p.suffix in TEXT_SUFFIXES and p.is_file()]


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _defined_keys() -> set[str]:
    return set(re.findall(r"\*\*\[([^\]]+)\]\*\*", _read(REFERENCES)))


def _citing_files() -> list[Path]:
    wanted = ("src/", "docs/", "configs/", "tests/", "benchmarks/", "README.md")
    return [p for p in _tracked_files() if str(p.relative_to(ROOT)).startswith(wanted) and p != REFERENCES]


def _used_keys() -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}
    for path in _citing_files():
        text = _read(path)
        rel = str(path.relative_to(ROOT))
        for m in CITATION.finditer(text):
            for part in m.group(1).split(";"):
                work = WORK_AT_START.match(part)
                if work:
                    used.setdefault(work.group(1), []).append(rel)
        for m in SOFTWARE.finditer(text):
            used.setdefault(m.group(1), []).append(rel)
    return used


def test_citation_pattern_matches_keys_and_not_indexing():
    text = "x[0], a[i, 2020], [0, 1], [K, d], see [Han et al. 2022, Sec. 2] and [Tirer & Bruna 2022; Wang et al. 2024]."
    found = [m.group(1) for m in CITATION.finditer(text)]
    assert found == ["Han et al. 2022, Sec. 2", "Tirer & Bruna 2022; Wang et al. 2024"]
    assert [m.group(1) for m in SOFTWARE.finditer("[neural-collapse (rhubarbwu)], [docs (x)](y), H[idx (0)]")] == [
        "neural-collapse (rhubarbwu)"
    ]


def test_references_define_the_five_papers():
    keys = _defined_keys()
    for key in ("Xu & Liu 2023", "Tirer & Bruna 2022", "Wang et al. 2024", "Jiang et al. 2024", "Han et al. 2022"):
        assert key in keys
    # each paper entry carries its arXiv id
    assert len(re.findall(r"arXiv:\d{4}\.\d{5}", _read(REFERENCES))) >= 5


def test_every_citation_resolves():
    keys = _defined_keys()
    used = _used_keys()
    # the sweep cites all five papers many times: a pattern that matched nothing would pass vacuously
    assert sum(len(v) for v in used.values()) > 200
    unresolved = {key: sorted(set(files)) for key, files in used.items() if key not in keys}
    assert unresolved == {}


def test_every_reference_is_cited():
    used = _used_keys()
    uncited = sorted(_defined_keys() - set(used))
    assert uncited == []


@pytest.mark.parametrize("pattern", FORBIDDEN, ids=lambda p: p.pattern)
def test_nothing_points_outside_the_repository(pattern):
    this = Path(__file__).resolve()
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in _tracked_files()
        if p.resolve() != this
        for i, line in enumerate(_read(p).splitlines(), 1)
        if pattern.search(line)
    ]
    assert hits == []
