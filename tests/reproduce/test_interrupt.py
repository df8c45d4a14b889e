"""Stopping the harness: SIGTERM to the main process or to a worker stops every worker cleanly
(partial records, checkpoints kept, no orphan process), the per-run lock cannot go stale, and
planning reads each stored record once."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from seqrec import stop
from seqrec_lab import load_table, reproduce, runner
from seqrec_lab.harness import STOP_GRACE_SECONDS, plan

from .test_harness import ENV, _cli, _dirs, _table

linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z"


def _children(pid: int) -> set[int]:
    out = set()
    for path in Path("/proc").glob("[0-9]*"):
        st = _stat(int(path.name))
        if st is not None and st[1] == pid and st[0] != "Z":
            out.add(int(path.name))
    return out


def _wait_for(cond, seconds: float, what: str) -> None:
    end = time.time() + seconds
    while not cond():
        assert time.time() < end, f"timed out waiting for {what}"
        time.sleep(0.2)


def _interrupt(tmp_path: Path, cmd: list[str], target: str) -> tuple[int, str]:
    """Start ``cmd``, wait until both runs have trained a checkpoint past ``last.pt``'s current
    step, SIGTERM the main process or one worker (``target``), and check that the command
    exits within the grace bound leaving no process of its own behind. Returns (rc, stderr)."""
    runs = tmp_path / "r" / "runs"
    before = {p: p.stat().st_mtime_ns for p in runs.glob("*/last.pt")}
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        fresh = lambda: [p for p in runs.glob("*/last.pt") if before.get(p) != p.stat().st_mtime_ns]  # noqa: E731
        _wait_for(lambda: len(fresh()) >= 2 or proc.poll() is not None, 120, "two checkpoints")
        assert proc.poll() is None, "the table finished before it could be interrupted"
        kids = _children(proc.pid)
        workers = [k for k in kids if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]
        assert len(workers) == 2, f"expected two workers, saw {kids}"
        t0 = time.time()
        os.kill(proc.pid if target == "main" else workers[0], signal.SIGTERM)
        _, err = proc.communicate(timeout=STOP_GRACE_SECONDS + 60)
        # every process it started is gone, promptly (not killed at the end of the grace period)
        _wait_for(lambda: not any(_alive(k) for k in kids), 15, "the workers to exit")
        assert time.time() - t0 < STOP_GRACE_SECONDS, "the workers were not stopped cleanly"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err


@linux_only
@pytest.mark.slow
def test_sigterm_stops_every_worker_cleanly_and_the_rerun_matches(tmp_path):
    # long enough runs (about 5 s of training each, no early stop) that neither can finish
    # before the other has checkpointed: with 40 epochs of 2 steps (0.6 s) a worker spawned a
    # little late on a loaded 2-core CI machine found its sibling already done (one partial)
    path = _table(tmp_path, epochs=120)
    text = path.read_text()
    assert "epochs = 120\n" in text  # the table's early stop is what this test switches off
    path.write_text(text.replace("epochs = 120\n", "epochs = 120\npatience = 0\nbatch_size = 16\n"))
    cmd = _cli(path, "--models", "sasrec", "--workers", "2", "--state-dir", "r/state")
    results, state = tmp_path / "r" / "results", tmp_path / "r" / "state"

    # a supervisor's SIGTERM to the main process (no terminal: the workers get nothing directly)
    rc, err = _interrupt(tmp_path, cmd, "main")
    assert rc == 128 + signal.SIGTERM, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("interrupted: tiny stopped by SIGTERM") and "rerun" in last
    partials = [json.loads(p.read_text()) for p in sorted(results.glob("*.partial.json"))]
    assert [r["stopped"] for r in partials] == ["interrupted", "interrupted"]
    assert all(r["partial"] and r["global_step"] >= 1 for r in partials)
    assert not [p for p in results.glob("*.json") if not p.name.endswith(".partial.json")]
    assert not list(results.glob("*.tmp")) and not list(state.glob("*/*.tmp"))
    keys = {r["key"] for r in partials}
    assert {
        p.parent.name for p in state.glob("*/last.pt.xz")
    } == keys  # resumable from a fresh checkout
    steps = {r["key"]: r["global_step"] for r in partials}

    # a SIGTERM to one worker stops the whole table the same way, after resuming
    rc, err = _interrupt(tmp_path, cmd, "worker")
    assert rc != 0 and err.strip().splitlines()[-1].startswith("interrupted: "), err
    partials = [json.loads(p.read_text()) for p in sorted(results.glob("*.partial.json"))]
    assert len(partials) == 2 and all(r["stopped"] == "interrupted" for r in partials)
    assert all(r["global_step"] > steps[r["key"]] for r in partials), (
        "the second stint did not resume"
    )

    # the same command finishes both, with the numbers of an uninterrupted run
    subprocess.run(cmd, cwd=tmp_path, env=ENV, check=True, capture_output=True, timeout=300)
    assert not list(results.glob("*.partial.json")) and not list(state.glob("*/last.pt*"))
    done = {r["seed"]: r for r in (json.loads(p.read_text()) for p in results.glob("*.json"))}
    table = load_table(path)
    whole = reproduce(table, table.select(models={"sasrec"}), **_dirs(tmp_path / "whole"))
    for p in whole.planned:
        assert done[p.spec.seed]["metrics"] == p.cached["metrics"]
        assert done[p.spec.seed]["global_step"] == p.cached["global_step"]


def test_a_stop_request_in_the_inline_path_leaves_a_partial_record(tmp_path, monkeypatch):
    table = load_table(_table(tmp_path, epochs=6))
    dirs = _dirs(tmp_path)
    real = runner.restore_state

    def signalled_once_training_starts(*args):
        stop.request(signal.SIGTERM)  # what the handler does on SIGTERM, mid-run
        return real(*args)

    monkeypatch.setattr(runner, "restore_state", signalled_once_training_starts)
    with pytest.raises(stop.Interrupted, match="stopped by SIGTERM") as caught:
        reproduce(table, table.select(models={"sasrec"}), **dirs)
    assert caught.value.signum == signal.SIGTERM
    assert not stop.requested()  # the request does not outlive the table
    (partial,) = [json.loads(p.read_text()) for p in dirs["results_dir"].glob("*.partial.json")]
    assert (
        partial["stopped"] == "interrupted" and partial["seed"] == 0 and partial["global_step"] == 1
    )
    assert (dirs["state_dir"] / partial["key"] / "last.pt.xz").exists()
    assert "partial" in (dirs["report_dir"] / "tiny.md").read_text()  # the report was still written


_HOLD_LOCK = """
import sys, time
from pathlib import Path
from seqrec_lab.runner import _lock
fh = _lock(Path(sys.argv[1]))
print("locked", flush=True)
time.sleep(600)
"""


def test_run_lock_is_released_when_its_holder_is_killed(tmp_path):
    from seqrec_lab.runner import RunBusy, _lock

    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(tmp_path)],
        env=ENV,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunBusy, match="another process"):
            _lock(tmp_path)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert (tmp_path / "lock").exists()  # the file stays; the lock on it does not
    with _lock(tmp_path):
        pass


def test_a_lock_held_for_an_instant_does_not_refuse_the_run(tmp_path):
    """A dry run's ``is_training`` probe takes the lock briefly; a run starting then waits."""
    import fcntl
    import threading

    from seqrec_lab.runner import _lock, is_training

    (tmp_path / "lock").write_text("")
    probe = open(tmp_path / "lock")  # noqa: SIM115 - released by the timer
    fcntl.flock(probe, fcntl.LOCK_EX)
    threading.Timer(0.15, probe.close).start()
    with _lock(tmp_path):
        assert is_training(tmp_path)  # held (flock conflicts across open files, same process too)
    assert not is_training(tmp_path)


def test_plan_reads_each_stored_record_once(tmp_path, monkeypatch):
    dirs = _dirs(tmp_path)
    table = load_table(_table(tmp_path))
    reproduce(table, **dirs)  # three finished runs: three records, three checkpoint identities
    stored = {*dirs["results_dir"].glob("*.json"), *dirs["runs_dir"].glob("*/identity.json")}
    assert len(stored) == 6

    reads: Counter = Counter()
    real = Path.read_text

    def counting(self, *args, **kwargs):
        if self in stored:
            reads[self] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counting)
    # another learning rate: new identities, no cached run, so every lookup misses and must
    # compare with everything stored (the case that read each file once per planned run)
    other = tmp_path / "other.toml"
    text = _table(tmp_path).read_text()
    assert text.count("[runs.train]\n") == 1
    other.write_text(text.replace("[runs.train]\n", "[runs.train]\nlr = 2e-3\n"))  # not the default
    missed = plan(load_table(other), load_table(other).runs, dirs["runs_dir"], dirs["results_dir"])
    assert [p.done for p in missed] == [True, False, False]  # pop has no lr: still cached
    assert reads and max(reads.values()) == 1, reads
    reads.clear()
    hit = plan(table, table.runs, dirs["runs_dir"], dirs["results_dir"])
    assert all(p.done for p in hit)
    assert max(reads.values()) == 1 and sum(reads.values()) <= len(table.runs)  # exact keys only
