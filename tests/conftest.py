"""Test-wide settings.

* The dataset parse cache lives in a private temporary directory, not the user's home.
* Every subprocess a test starts imports the seqrec under test: its ``src/`` is put first on
  ``PYTHONPATH`` as an absolute path. Without it a subprocess started in another working
  directory (a relative ``PYTHONPATH=src`` no longer resolves) or from a checkout that shares
  its virtual environment with another one (the editable install points there) imports a
  different seqrec, and a test comparing the two processes' results fails for a reason that
  has nothing to do with the code (docs/decisions/resume-mismatch.md).
* Hypothesis profiles: ``ci`` (selected by ``SEQREC_HYPOTHESIS_PROFILE=ci``, which ``.ci/run``
  sets) derandomizes every property test and keeps no example database, so a CI run tests the
  same examples every time and a red run reruns red; ``dev`` (the default) draws new examples
  on every run, so local runs keep exploring, and prints the blob that replays a failure.
* ``slow`` marks the tests that ``pytest -m "not slow"`` leaves out of the quick loop (the
  README's ``pytest -n auto`` runs them all).
* Under ``pytest -n N`` (pytest-xdist) the N test processes share the cores: each gets its share
  of torch threads, so N processes do not each start a thread per core and oversubscribe them.
"""

import os
import tempfile
from pathlib import Path

# set before any seqrec module reads it; one private cache per test session
os.environ.setdefault("SEQREC_CACHE_DIR", tempfile.mkdtemp(prefix="seqrec-test-cache-"))

import seqrec  # noqa: E402  (after the cache directory is set)

SRC = str(Path(seqrec.__file__).resolve().parents[1])
os.environ["PYTHONPATH"] = os.pathsep.join(
    [SRC, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != SRC)]
)

_workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
if _workers:
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(_workers)))

try:
    from hypothesis import settings
except ImportError:  # the test extra is not installed: the property tests fail on import
    settings = None
if settings is not None:
    settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
    settings.register_profile("dev", print_blob=True)
    # loaded here, before the test modules are imported: their @settings inherit from it
    settings.load_profile(os.environ.get("SEQREC_HYPOTHESIS_PROFILE", "dev"))


def pytest_collection_modifyitems(config, items):
    """A benchmark is slow too: ``-m "not slow"`` replaces the default ``-m 'not benchmark'``
    of ``addopts`` (the last ``-m`` wins), and must not bring the benchmarks back."""
    import pytest

    for item in items:
        if item.get_closest_marker("benchmark") is not None:
            item.add_marker(pytest.mark.slow)
