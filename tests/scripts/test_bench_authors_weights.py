"""benchmarks/bench_authors_weights.py: the TV-Rec name table covers every parameter of
seqrec's TV-Rec encoder (a checkpoint under the authors' names loads strictly), and a
parameter it does not name is refused."""

from __future__ import annotations

import pytest

from seqrec.models.neural_config import settings
from seqrec.registry import get_model

SCRIPT = "bench_authors_weights.py"  # loaded by conftest.bench


def test_tvrec_names_cover_every_parameter(bench):
    config_cls, model_cls = get_model("tvrec")
    model = model_cls(settings(config_cls, n_basis=4, order=8, max_len=8, dim=16, n_blocks=2))
    encoder = model.build_encoder(30)
    ours = {k: v.clone() for k, v in encoder.state_dict().items()}
    inverse = {v: k for k, v in bench.tvrec_names(2).items()}
    theirs = {inverse[k]: v.clone() + 1.0 for k, v in ours.items()}  # KeyError: a name missing
    state = bench.mapped_state("tvrec", theirs, 2)
    encoder.load_state_dict(state, strict=True)
    for key, value in encoder.state_dict().items():
        assert (value == ours[key] + 1.0).all()
    with pytest.raises(SystemExit, match="without a mapping: position_embeddings.weight"):
        bench.mapped_state("tvrec", {**theirs, "position_embeddings.weight": 0}, 2)
    with pytest.raises(SystemExit, match="no parameter mapping"):
        bench.mapped_state("sasrec", theirs, 2)
