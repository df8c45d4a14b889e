"""A damaged or edited artifact is refused with one line naming the file and what is wrong,
by the library (``Recommender.load``) and by ``recommend`` / ``evaluate`` / ``serve``."""

import json

import numpy as np
import pytest

from seqrec.cli.main import main
from seqrec.errors import DataError
from seqrec.models.base import Recommender
from seqrec.models.factorization.pop import Pop, PopConfig
from seqrec.models.neural_config import settings
from seqrec.models.sasrec import SASRec, SASRecConfig
from seqrec.testing.synthetic import leave_last_out_small, markov_sequences


@pytest.fixture(scope="module")
def sasrec_dir(tmp_path_factory):
    train, valid, _ = leave_last_out_small(markov_sequences(n_users=16, n_items=12))
    cfg = settings(SASRecConfig, dim=8, n_blocks=1, n_heads=1, max_len=10, epochs=1, batch_size=16)
    path = tmp_path_factory.mktemp("art") / "sasrec"
    SASRec(cfg).fit(train, valid).save(path)
    return path


@pytest.fixture()
def art(sasrec_dir, tmp_path):
    import shutil

    dst = tmp_path / "copy"
    shutil.copytree(sasrec_dir, dst)
    return dst


def _edit_meta(path, fn):
    meta = json.loads((path / "model.json").read_text())
    fn(meta)
    (path / "model.json").write_text(json.dumps(meta))


def _truncate(p):
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _random(p):
    p.write_bytes(np.random.default_rng(0).bytes(p.stat().st_size))


def _flip_one_byte(p):
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))


DAMAGE = {
    "truncated state": (lambda a: _truncate(a / "state.npz"), "state.npz", "truncated"),
    "random state": (lambda a: _random(a / "state.npz"), "state.npz", "sha256"),
    "one byte of state": (lambda a: _flip_one_byte(a / "state.npz"), "state.npz", "sha256"),
    "truncated vocab": (lambda a: _truncate(a / "vocab.npz"), "vocab.npz", "truncated"),
    "random vocab": (lambda a: _random(a / "vocab.npz"), "vocab.npz", "sha256"),
    "missing state": (lambda a: (a / "state.npz").unlink(), "state.npz", "missing"),
    "empty model.json": (lambda a: (a / "model.json").write_text(""), "model.json", "empty"),
    "cut model.json": (lambda a: _truncate(a / "model.json"), "model.json", "not valid JSON"),
    "model.json a list": (lambda a: (a / "model.json").write_text("[1]"), "model.json", "object"),
    "unknown key": (
        lambda a: _edit_meta(a, lambda m: m.update(extra=1)),
        "model.json",
        "unknown key(s) extra",
    ),
    "unknown config key": (
        lambda a: _edit_meta(a, lambda m: m["config"].update(nope=1)),
        "model.json",
        "unknown key(s) nope",
    ),
    "config of wrong type": (
        lambda a: _edit_meta(a, lambda m: m["config"].update(dim="big")),
        "model.json",
        "dim must be an integer",
    ),
    "config no longer matches weights": (
        lambda a: _edit_meta(a, lambda m: m["config"].update(dim=16)),
        "model.json",
        "does not match the weights",
    ),
    "max_len edited": (
        lambda a: _edit_meta(a, lambda m: m["config"].update(max_len=20)),
        "model.json",
        "does not match the weights",
    ),
    "unknown model": (
        lambda a: _edit_meta(a, lambda m: m.update(model="nosuch")),
        "model.json",
        "unknown model",
    ),
    "n_items edited": (
        lambda a: _edit_meta(a, lambda m: m.update(n_items=5)),
        "state.npz",
        "n_items",
    ),
    "format": (lambda a: _edit_meta(a, lambda m: m.update(format=99)), "model.json", "format 99"),
    "checksum record": (
        lambda a: _edit_meta(a, lambda m: m["files"].update({"state.npz": "x"})),
        "model.json",
        "sha256",
    ),
    "path escape": (
        lambda a: _edit_meta(a, lambda m: m["files"].update({"../x": m["files"]["state.npz"]})),
        "model.json",
        "only files",
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damage_is_a_one_line_data_error(art, case):
    damage, filename, fragment = DAMAGE[case]
    Recommender.load(art)  # intact copy loads
    damage(art)
    with pytest.raises(DataError) as info:
        Recommender.load(art)
    msg = str(info.value)
    assert "\n" not in msg and filename in msg and fragment in msg, msg


def test_checksums_are_recorded(art):
    meta = json.loads((art / "model.json").read_text())
    assert set(meta["files"]) == {"state.npz", "vocab.npz"}
    assert all(len(rec["sha256"]) == 64 for rec in meta["files"].values())


def test_format_1_without_checksums_still_loads(art, caplog):
    _edit_meta(art, lambda m: (m.pop("files"), m.pop("inputs"), m.update(format=1)))
    model = Recommender.load(art)
    assert model.n_items == 12 and "no checksums" in caplog.text


def test_resave_keeps_a_valid_artifact(tmp_path):
    from seqrec.data.sequences import Sequences

    train = Sequences.from_lists([[1, 2, 3], [2, 3]], n_items=3)  # no vocabulary
    Pop(PopConfig()).fit(train).save(tmp_path / "p")
    assert Recommender.load(tmp_path / "p").n_items == 3


@pytest.mark.parametrize(
    "case", ["random state", "cut model.json", "config no longer matches weights"]
)
@pytest.mark.parametrize("command", ["recommend", "evaluate", "serve"])
def test_cli_commands_give_one_line(art, case, command, capsys):
    DAMAGE[case][0](art)
    argv = {
        "recommend": ["recommend", str(art), "i1", "i2"],
        "evaluate": ["evaluate", str(art)],
        "serve": ["serve", str(art), "--port", "0"],
    }[command]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and str(art) in lines[0], err


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_serve_bad_port(art, port, capsys):
    code = main(["serve", str(art), "--port", port])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "port" in err, err


def test_serve_port_in_use(art, capsys):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        code = main(["serve", str(art), "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"127.0.0.1:{port}" in err, err
