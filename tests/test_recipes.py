"""The named recipe configs (``configs/*.toml`` that say which reproduction row they are) train
the very run of that row: same data, split, evaluation and every model and training setting, so
``seqrec train -c configs/X.toml`` repeats the recorded result and the two cannot drift apart."""

import re
from itertools import takewhile
from pathlib import Path

import pytest

from seqrec.config import load_experiment
from seqrec.identity import experiment_identity
from seqrec_lab.spec import load_table

ROOT = Path(__file__).resolve().parents[1]
# a recipe config names its row in its header: "the `TABLE` table's `ROW` row"
ROW = re.compile(r"the `([a-z0-9-]+)` table's `([a-z0-9-]+)` row")


def _header(path: Path) -> str:
    """The config's leading comment as one line."""
    lines = takewhile(lambda ln: ln.startswith("#"), path.read_text().splitlines())
    return " ".join(ln.lstrip("#").strip() for ln in lines)


def _recipes() -> list[Path]:
    return sorted(p for p in (ROOT / "configs").glob("*.toml") if ROW.search(_header(p)))


def test_the_shipped_recipes_name_their_rows():
    names = {p.stem for p in _recipes()}
    assert {"tvrec_sports", "tvrec_beauty", "tvrec_videogames", "sasrec_toys"} <= names


@pytest.mark.parametrize("path", _recipes(), ids=lambda p: p.stem)
def test_a_recipe_config_is_its_reproduction_row(path: Path, monkeypatch: pytest.MonkeyPatch):
    table_name, row_id = ROW.search(_header(path)).groups()
    monkeypatch.chdir(ROOT)  # load_table reads configs/reproduce relative to the working directory
    (row,) = [r for r in load_table(table_name).runs if r.run_id == row_id and r.seed == 0]
    recipe = load_experiment(str(path), [])
    assert experiment_identity(recipe, with_eval=True) == experiment_identity(
        row.experiment, with_eval=True
    )
    # the settings the identity leaves out (threads, the epoch cap) are the row's too
    assert recipe.model_config() == row.experiment.model_config()
