"""Artifact versions: ``seqrec update`` replaces an artifact by its next version and keeps the
previous one beside it.

``model.json`` holds ``"version"`` (absent: 1). Saving version ``N + 1`` at ``path`` first
copies version ``N`` to ``path.vN`` (a sibling directory: ``model.v1/`` beside ``model/``),
through a hidden staging directory moved into place, then writes the new artifact with the
all-or-nothing save of :func:`seqrec.serving.artifact.save_recommender`. An interruption at
any point leaves ``path`` a complete artifact, the old version or the new one, never half of
one; a copy left by an interrupted attempt is reused when it is the same artifact.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from seqrec.errors import ConfigError
from seqrec.serving.artifact import META, artifact_dir, read_meta, save_recommender


def artifact_version(path: str | Path) -> int:
    """The version of the artifact at ``path`` (1 for one never updated)."""
    return int(read_meta(artifact_dir(path)).get("version", 1))


def kept_version_dir(path: Path, version: int) -> Path:
    """Where version ``version`` of the artifact at ``path`` is kept once replaced."""
    return path.parent / f"{path.name}.v{version}"


def save_new_version(model: Any, path: str | Path) -> tuple[int, Path]:
    """Save ``model`` as the next version of the artifact at ``path`` (an artifact or the run
    directory holding one), keeping the current version beside it. Returns the new version
    and where the previous one is kept.

    Raises:
        ConfigError: the directory for the kept version exists and holds another artifact.
    """
    path = artifact_dir(path)
    old = artifact_version(path)
    keep = kept_version_dir(path, old)
    if keep.exists():
        same = (keep / META).is_file() and (keep / META).read_bytes() == (path / META).read_bytes()
        if not same:
            raise ConfigError(
                f"{keep} exists and is not a copy of version {old} of {path}: move it away"
            )
    else:
        staging = path.parent / f".{keep.name}.copying-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            shutil.copytree(path, staging)
            os.replace(staging, keep)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    model.artifact_version = old + 1
    save_recommender(model, path, overwrite=True)
    return old + 1, keep
