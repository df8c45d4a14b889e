"""seqrec promises Python >= 3.10 (pyproject, README; Ubuntu 22.04's python3): the sources must
parse as 3.10 and not import what only 3.11 has. The suite itself runs on a newer Python, so
this is the check that can fail here."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "benchmarks").rglob("*.py"))
# stdlib names new in 3.11 (imported unguarded they break `import seqrec` on 3.10)
NEW_IN_311 = re.compile(
    r"^\s*(import tomllib|from tomllib |from datetime import .*\bUTC\b|from enum import .*StrEnum"
    r"|from typing import .*\b(Self|Never|LiteralString|assert_never)\b"
    r"|from contextlib import .*\bchdir\b)",
    re.M,
)


def test_sources_parse_as_python_3_10():
    assert SOURCES
    for path in SOURCES:
        ast.parse(path.read_text(), filename=str(path), feature_version=(3, 10))


def test_no_unguarded_3_11_imports():
    for path in SOURCES:
        text = path.read_text()
        for match in NEW_IN_311.finditer(text):
            before = text[: match.start()].rstrip().splitlines()[-1] if match.start() else ""
            assert before.strip().startswith("try:"), (
                f"{path}: {match.group(0).strip()} needs a 3.10 fallback"
            )
    assert "tomli>=1.1; python_version < '3.11'" in (ROOT / "pyproject.toml").read_text()
