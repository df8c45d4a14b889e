"""benchmarks/: every living script answers ``--help`` at once (argparse before torch and seqrec
are imported), and benchmarks/README.md lists exactly the scripts that are there."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
SCRIPTS = sorted(p for p in BENCH.rglob("*.py") if not p.name.startswith("_"))

# run a script as __main__ with --help; report whether it exited cleanly and what it imported
PROBE = """
import json, runpy, sys
path = sys.argv[1]
sys.argv = [path, "--help"]
sys.path.insert(0, str(__import__("pathlib").Path(path).parent))
code = None
try:
    runpy.run_path(path, run_name="__main__")
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in ("torch", "numpy", "polars", "seqrec", "seqrec_lab") if m in sys.modules)
print(json.dumps({"code": code, "heavy": heavy}))
"""


def test_there_are_benchmarks_to_check():
    assert len(SCRIPTS) >= 10 and BENCH / "device" / "bench_gpu.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(BENCH)))
def test_help_is_cheap(script):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    *out, last = proc.stdout.rstrip("\n").split("\n")
    result = json.loads(last)
    assert result["code"] in (0, None) and "usage:" in "\n".join(out)
    assert result["heavy"] == [], f"--help imported {result['heavy']} before parsing its arguments"


def test_the_readme_lists_every_living_script_and_nothing_else():
    text = (BENCH / "README.md").read_text()
    living = text.split("## Living tools", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([\w/]+\.py)` \|", living, re.M))
    assert listed == {str(p.relative_to(BENCH)) for p in SCRIPTS}
    removed = text.split("## Removed one-off investigations", 1)[1]
    for name in re.findall(r"^\| `(\w+\.py)` \|", removed, re.M):
        assert not (BENCH / name).exists(), f"{name} is listed as removed but is there"
