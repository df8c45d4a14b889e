"""bootstrap.sh prints torch's version before NumPy is installed: without -W ignore torch's
'Failed to initialize NumPy' warning landed in a fresh set-up's output."""

import re
from pathlib import Path

BOOTSTRAP = Path(__file__).resolve().parents[2] / "scripts" / "bootstrap.sh"


def test_every_torch_version_print_silences_the_numpy_warning():
    lines = [ln for ln in BOOTSTRAP.read_text().splitlines() if "import torch; print" in ln]
    assert len(lines) >= 2
    assert all(re.search(r"python -W ignore -c 'import torch; print", ln) for ln in lines), lines
