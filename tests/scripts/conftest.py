"""Shared by the benchmark-script tests: a benchmark script loaded as a module (the scripts
are not a package; each test file names its script)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench(request):
    """The module of ``benchmarks/<SCRIPT>`` where the test module sets ``SCRIPT`` (a file
    name)."""
    path = BENCHMARKS / request.module.SCRIPT
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
