"""The test session's own set-up (tests/conftest.py) does what the other tests rely on."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import seqrec


def test_a_subprocess_started_elsewhere_imports_the_seqrec_under_test(tmp_path):
    # a kill-and-resume test compares a subprocess's run with an in-process one: both must run
    # this checkout's code, whatever the working directory and the installed seqrec
    src = str(Path(seqrec.__file__).resolve().parents[1])
    assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == src
    out = subprocess.run(
        [sys.executable, "-c", "import seqrec; print(seqrec.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert Path(out.strip()).resolve() == Path(seqrec.__file__).resolve()


def test_the_ci_profile_derandomizes_hypothesis():
    from hypothesis import settings

    ci = settings.get_profile("ci")
    assert ci.derandomize and ci.database is None
    if os.environ.get("SEQREC_HYPOTHESIS_PROFILE") == "ci":  # as .ci/run sets it
        assert settings.default.derandomize


def test_a_benchmark_counts_as_slow(request):
    # `-m "not slow"` replaces addopts' `-m 'not benchmark'`: the hook keeps benchmarks out
    root = Path(__file__).resolve().parent / "conftest.py"
    (conftest,) = [
        p
        for p in request.config.pluginmanager.get_plugins()
        if getattr(p, "__file__", None) and Path(p.__file__).resolve() == root
    ]

    class Item:
        def __init__(self, *marks):
            self.marks = list(marks)

        def get_closest_marker(self, name):
            return next((m for m in self.marks if m.name == name), None)

        def add_marker(self, mark):
            self.marks.append(mark.mark)

    bench, plain = Item(pytest.mark.benchmark.mark), Item()
    conftest.pytest_collection_modifyitems(request.config, [bench, plain])
    assert bench.get_closest_marker("slow") is not None and plain.get_closest_marker("slow") is None


def test_each_parallel_test_process_takes_its_share_of_the_cores():
    # `pytest -n auto` (the README's command) starts one test process a core; each must not
    # also start a torch thread a core, or the processes oversubscribe the machine
    conftest = Path(__file__).resolve().parent / "conftest.py"
    code = f"import runpy, torch; runpy.run_path({str(conftest)!r}); print(torch.get_num_threads())"
    for workers in (1, 2, 10_000):
        env = {**os.environ, "PYTEST_XDIST_WORKER_COUNT": str(workers)}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout
        assert int(out) == max(1, (os.cpu_count() or 1) // workers)
