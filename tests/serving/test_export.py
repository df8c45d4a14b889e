"""ONNX / TorchScript export: the exported graph scores like PyTorch (SASRec, LRURec, HSTU)."""

import importlib.util

import numpy as np
import pytest

from seqrec.errors import ConfigError
from seqrec.models.factorization.pop import Pop, PopConfig
from seqrec.models.hstu import HSTU
from seqrec.models.lrurec import LRURec
from seqrec.models.sasrec import SASRec
from seqrec.serving.export import export_model, parity
from seqrec.testing.conformance import _data, fitted

HAS_ORT = (
    importlib.util.find_spec("onnxruntime") is not None
    and importlib.util.find_spec("onnxscript") is not None
)
needs_ort = pytest.mark.skipif(
    not HAS_ORT, reason="onnxruntime/onnxscript not installed (pip install 'seqrec[export]')"
)

MODELS = {
    "sasrec": (SASRec, {"dim": 16, "n_blocks": 2, "n_heads": 2}),
    "lrurec": (LRURec, {"dim": 16, "n_blocks": 2}),
    # timestamps in the data: the relative time bias is part of the graph
    "hstu": (HSTU, {"dim": 16, "n_blocks": 2, "n_heads": 2}),
}
TOL = 1e-4


def _histories():
    seqs, train, valid, test = _data()
    return test.histories(slice(0, len(test)))  # lengths 4..17, longer than max_len=12


@needs_ort
@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.slow
def test_onnx_scores_match_pytorch(name, tmp_path):
    cls, kwargs = MODELS[name]
    model = fitted(cls, kwargs)
    hist = _histories()
    path = export_model(model, tmp_path / f"{name}.onnx", "onnx")
    diff = parity(model, path, hist, "onnx")
    print(f"{name}: ONNX max |score diff| = {diff:.3g} over {len(hist)} histories")
    assert diff < TOL
    # the check can fail: the same graph against another model's scores is far off
    other = fitted(cls, kwargs, seed=7)
    assert parity(other, path, hist, "onnx") > 100 * TOL
    import onnx  # the file names its item map (score column -> raw id) and what it reads

    meta = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert (
        meta["seqrec.items"] == f"{name}.onnx.items.csv"
        and (tmp_path / meta["seqrec.items"]).is_file()
    )
    assert meta["seqrec.inputs"].split(",")[0] == "items" and meta["seqrec.model"] == name


def _other_neural_models() -> list[str]:
    from seqrec.models.torch_recommender import TorchRecommender
    from seqrec.registry import get_model, model_names

    return [
        n
        for n in model_names()
        if n not in MODELS and issubclass(get_model(n)[1], TorchRecommender)
    ]


# torch.export cannot trace their packed-sequence GRUs: TorchScript is their export format
TORCHSCRIPT_ONLY = {"gru4rec", "narm"}


def _tiny(name):
    import dataclasses

    from seqrec.registry import get_model

    config_cls, cls = get_model(name)
    fields = {f.name for f in dataclasses.fields(config_cls)}
    kwargs = {
        k: v
        for k, v in (("dim", 16), ("hidden", 16), ("n_blocks", 1), ("n_heads", 1))
        if k in fields
    }
    return fitted(cls, kwargs)


@pytest.mark.slow
@needs_ort
@pytest.mark.parametrize("name", _other_neural_models())
def test_every_other_registered_neural_model_exports_with_parity(name, tmp_path):
    """ "Any neural model": BERT4Rec (mask token appended in the graph), LSAN (reads time),
    MF / FPMC / Caser (read the user id), ... and whatever is registered later; models ONNX
    cannot express are exported to TorchScript, with the same parity."""
    model = _tiny(name)
    hist = _histories()
    if name in TORCHSCRIPT_ONLY:
        with pytest.raises(ConfigError, match="ONNX cannot express.*torchscript"):
            export_model(model, tmp_path / f"{name}.onnx", "onnx")
    else:
        assert parity(model, export_model(model, tmp_path / f"{name}.onnx", "onnx"), hist) < TOL
    path = export_model(model, tmp_path / f"{name}.pt", "torchscript")
    assert parity(model, path, hist, "torchscript") < TOL


@pytest.mark.parametrize("name", sorted(MODELS))
def test_torchscript_scores_match_pytorch(name, tmp_path):
    cls, kwargs = MODELS[name]
    model = fitted(cls, kwargs)
    path = export_model(model, tmp_path / f"{name}.pt", "torchscript")
    assert parity(model, path, _histories(), "torchscript") < TOL


def test_hstu_graph_reads_timestamps(tmp_path):
    from seqrec.serving.export import example_inputs, padded_inputs, run_exported, uses_time

    assert not uses_time(fitted(*MODELS["sasrec"]))
    assert len(example_inputs(fitted(*MODELS["sasrec"]))) == 1  # items only
    model = fitted(*MODELS["hstu"])
    assert uses_time(model)
    path = export_model(model, tmp_path / "h.pt", "torchscript")
    feed = padded_inputs(model, _histories())
    base = run_exported(path, feed, "torchscript")
    feed["timestamps"] = feed["timestamps"] * 1000  # gaps of minutes become days
    assert np.abs(run_exported(path, feed, "torchscript")[:, 1:] - base[:, 1:]).max() > 1e-5


def test_non_neural_and_unknown_format_are_refused(tmp_path):
    seqs, train, valid, test = _data()
    pop = Pop(PopConfig()).fit(train)
    with pytest.raises(ConfigError, match="only neural models"):
        export_model(pop, tmp_path / "p.onnx")
    with pytest.raises(ConfigError, match="format"):
        export_model(fitted(*MODELS["sasrec"]), tmp_path / "x", "tflite")


def test_cli_export_reports_parity(tmp_path, capsys):
    import re

    from seqrec.cli.main import main
    from seqrec.serving.histories import UserHistories

    model = fitted(*MODELS["sasrec"])
    seqs = _data()[0]
    model.user_histories = UserHistories(
        np.array([f"u{i}" for i in range(len(seqs))]),
        seqs.offsets,
        seqs.items.astype(np.int32),
        np.array([], dtype=str),
    )
    model.save(tmp_path / "art")
    # TorchScript here (fast); the ONNX path of the same command is timed in the tests above
    out = tmp_path / "m.pt"
    assert (
        main(["export", str(tmp_path / "art"), "--format", "torchscript", "--out", str(out)]) == 0
    )
    text = capsys.readouterr().out
    assert out.stat().st_size > 1000 and "wrote torchscript graph of sasrec" in text
    diff = float(re.search(r"max \|score difference\| = (\S+)", text).group(1))
    assert diff < TOL
    # the export says how its score columns map to raw ids: a CSV beside it, named inside it
    import polars as pl
    import torch

    mapping = pl.read_csv(tmp_path / "m.pt.items.csv")
    assert mapping["index"].to_list() == list(range(1, model.n_items + 1))
    assert mapping["item"].cast(str).to_list() == [str(r) for r in model.vocab.raw.tolist()]
    extra = {"seqrec.items": ""}
    torch.jit.load(str(out), _extra_files=extra)
    assert extra["seqrec.items"] == b"m.pt.items.csv" and "item map" in text
    # without --out: beside the artifact, named for the model
    assert main(["export", str(tmp_path / "art"), "--format", "torchscript", "--no-check"]) == 0
    assert (tmp_path / "sasrec.pt").stat().st_size > 1000
    assert f"to {tmp_path / 'sasrec.pt'}" in capsys.readouterr().out
