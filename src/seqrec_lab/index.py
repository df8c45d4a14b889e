"""The stored runs of a results dir and a runs dir, each file read at most once per plan.

Looking a run up by identity has to compare it with every stored record (a record made
before a config field existed, or with another budget, is still the same run: see
:func:`seqrec_lab.runner.compatible`). Done per planned run that was O(runs x records)
file reads of records that carry whole validation curves; a :class:`RunIndex` reads the exact
key's file first and scans the directories at most once, on the first miss, keeping what it
parsed. The on-disk layout is unchanged (``<results_dir>/<key>.json``, ``<key>.partial.json``,
``<runs_dir>/<key>/identity.json``), so the index is rebuilt from the files, never stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from seqrec_lab.runner import compatible, run_key


class RunIndex:
    """Finished records, partial records and checkpoint identities, read lazily and once.

    Build one per plan: records written after it was built are not seen (the harness plans
    again for the report after training)."""

    def __init__(self, runs_dir: Path, results_dir: Path) -> None:
        self.runs_dir, self.results_dir = Path(runs_dir), Path(results_dir)
        self._parsed: dict[Path, dict[str, Any] | None] = {}
        self._scan: list[Path] | None = None

    def _read(self, path: Path) -> dict[str, Any] | None:
        """The parsed JSON object at ``path`` (None: absent, unreadable or not an object)."""
        if path not in self._parsed:
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                rec = None
            self._parsed[path] = rec if isinstance(rec, dict) else None
        return self._parsed[path]

    def _stored(self) -> list[Path]:
        """Every record and checkpoint identity, listed once (sorted: the first match wins,
        whatever order the file system lists them in)."""
        if self._scan is None:
            self._scan = sorted(self.results_dir.glob("*.json")) + sorted(
                self.runs_dir.glob("*/identity.json")
            )
        return self._scan

    def result(self, ident: dict[str, Any]) -> dict[str, Any] | None:
        """A finished record of this identity (budget included), if one was stored."""
        exact = self.results_dir / f"{run_key(ident)}.json"
        rec = self._read(exact) if exact.exists() else None
        if rec is not None and rec.get("identity") and compatible(rec["identity"], ident):
            return rec
        for path in self._stored():
            if path == exact or path.name.endswith(".partial.json") or path.name == "identity.json":
                continue
            rec = self._read(path)
            if rec is not None and rec.get("identity") and compatible(rec["identity"], ident):
                return rec
        return None

    def key(self, ident: dict[str, Any]) -> str:
        """The key of a stored compatible run (checkpoint or record, any budget), else the
        identity's own."""
        key = run_key(ident)
        if (self.runs_dir / key).exists() or (self.results_dir / f"{key}.json").exists():
            return key
        for path in self._stored():
            rec = self._read(path)
            stored = None if rec is None else rec.get("identity", rec)
            if (
                isinstance(stored, dict)
                and "model_config" in stored
                and compatible(stored, ident, budget=False)
            ):
                return rec.get("key") or path.parent.name
        return key

    def partial(self, key: str) -> dict[str, Any] | None:
        """The partial record of an unfinished run, if any."""
        path = self.results_dir / f"{key}.partial.json"
        return self._read(path) if path.exists() else None
