"""Fuzz the edges a user's input reaches: the CSV/TSV reader, the config loader, the artifact
loader and the HTTP API. Every generated input is either accepted or refused with a
``SeqRecError`` (HTTP: a 4xx); any other exception, or a 5xx, fails the test.

Each target runs twice: a tenth of its inputs in the quick loop and all of them in the slow
tier (``-m "not slow"`` leaves the full size out). The number of inputs each test tried is
counted, printed (``pytest -s``) and asserted after the test.
"""

import itertools
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqrec.config import load_experiment, parse_text
from seqrec.data.sources.generic import read_file
from seqrec.errors import SeqRecError

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from seqrec.models.neural_config import settings as model_settings
from seqrec.serving.service import create_app  # noqa: E402

# examples per target at full size: 3,500 inputs in all; ~35 s on 2 idle cores (~90 s at load 12)
N_FILES, N_CONFIG_TEXT, N_OVERRIDES, N_ARTIFACT, N_HTTP = 600, 600, 700, 600, 1000
QUICK_SHARE = 10  # the quick loop tries a tenth of them
COUNTS: dict[tuple[str, str], int] = {}  # (size, target) -> inputs tried
SERIAL = itertools.count()
# derandomized or not by the profile (tests/conftest.py): the same inputs on every CI run
FUZZ = settings(
    deadline=None, database=None, print_blob=True, suppress_health_check=list(HealthCheck)
)
SIZE = {"now": "quick"}


@pytest.fixture(autouse=True)
def _size(request):
    """Which size the running test is (once per test, not per input); after a fuzz test, that
    it tried at least half the inputs it asked for (Hypothesis stops early when it runs out of
    new ones), so a target that silently stopped being exercised fails. Each test checks its own
    count, so the check holds however ``pytest -n`` spreads the tests over processes."""
    SIZE["now"] = "full" if request.node.get_closest_marker("slow") else "quick"
    before = sum(COUNTS.values())
    yield
    minimum = getattr(request.function, "fuzz_min_inputs", None)
    if minimum is not None:
        tried = sum(COUNTS.values()) - before
        print(f"\n{request.node.name}: {tried} inputs tried")
        assert tried >= minimum, f"{request.node.name}: {tried} inputs tried, fewer than {minimum}"


def _count(target: str) -> None:
    key = (SIZE["now"], target)
    COUNTS[key] = COUNTS.get(key, 0) + 1


def _sizes(n: int, **strategies):
    """The property ``body`` as two tests: a tenth of ``n`` inputs, and ``n`` in the slow tier."""

    def both(body):
        quick = settings(FUZZ, max_examples=max(n // QUICK_SHARE, 1))(given(**strategies)(body))
        full = settings(FUZZ, max_examples=n)(given(**strategies)(body))
        quick.fuzz_min_inputs, full.fuzz_min_inputs = max(n // QUICK_SHARE // 2, 1), n // 2
        return quick, pytest.mark.slow(full)

    return both


@pytest.fixture(scope="module")
def workdir():
    path = Path(tempfile.mkdtemp(prefix="seqrec-fuzz-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


# --- file readers ----------------------------------------------------------------------------
CELL = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        [
            "",
            "NA",
            "null",
            "2020-01-01",
            "2020-13-45",
            "1e400",
            "-0",
            " 7 ",
            '"q"',
            '"unterminated',
            "a,b",
            "\t",
            "0205616461",
            "𝔘",
        ]
    ),
    st.text(max_size=6),
)
HEADER = st.lists(
    st.sampled_from(
        [
            "user",
            "item",
            "timestamp",
            "rating",
            "userId",
            "movieId",
            "ts",
            "date",
            "x",
            "",
            "user_id",
            "item_id",
        ]
    ),
    min_size=0,
    max_size=5,
)


@st.composite
def table_files(draw):
    ext = draw(st.sampled_from([".csv", ".tsv", ".txt", ".dat", ".csv.gz", ".parquet"]))
    sep = "\t" if ext in (".tsv", ".txt", ".dat") else ","
    header = draw(HEADER)
    width = max(len(header), 1)
    rows = draw(st.lists(st.lists(CELL, min_size=0, max_size=width + 1), max_size=8))
    lines = [sep.join(header)] + [sep.join(r) for r in rows]
    text = "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))
    raw = draw(st.one_of(st.just(text.encode("utf-8", "surrogatepass")), st.binary(max_size=64)))
    options = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "columns": st.dictionaries(
                    st.sampled_from(["user", "item", "timestamp", "rating", "bogus"]),
                    st.one_of(st.none(), st.sampled_from(header or ["user"])),
                    max_size=3,
                ),
                "sep": st.sampled_from([",", "\t", ";", "::"]),
                "timestamp_unit": st.sampled_from(["s", "ms", "us"]),
                "has_header": st.booleans(),
                "names": st.lists(
                    st.sampled_from(["user", "item", "timestamp"]), max_size=4, unique=True
                ),
            },
        )
    )
    return ext, raw, options


def _file_reader(workdir, case):
    ext, raw, options = case
    _count("file reader")
    path = workdir / f"t{next(SERIAL)}{ext}"
    if ext.endswith(".gz"):
        import gzip

        raw = gzip.compress(raw)
    path.write_bytes(raw)
    try:
        inter = read_file(path, **options)
    except SeqRecError:
        return
    finally:
        path.unlink(missing_ok=True)
    assert len(inter.user) == len(inter.item) > 0


test_fuzz_file_reader, test_fuzz_file_reader_full = _sizes(N_FILES, case=table_files())(
    _file_reader
)


# --- config loader ---------------------------------------------------------------------------
KEYS = [
    "seed",
    "output",
    "data.name",
    "data.min_rating",
    "data.dedup",
    "data.filter",
    "data.min_item",
    "split.protocol",
    "split.valid",
    "split.refit",
    "eval.ks",
    "eval.seen_filter",
    "eval.chunk_size",
    "model.name",
    "model.rank",
    "model.scaling",
    "model.dim",
    "model.betas",
    "train.epochs",
    "train.lr",
    "train.loss",
    "train.device",
    "model.user_rank",
    "model.clip_ranks",
    "bogus.key",
    "data",
    "model",
    "",
]
VALUES = st.one_of(
    st.sampled_from(
        [
            "abc",
            "1",
            "1.5",
            "-3",
            "0",
            "true",
            "maybe",
            "[1, 2]",
            "[]",
            "[0.9]",
            "[0.9, 0.99]",
            "none",
            "inf",
            "nan",
            "1e400",
            "{a = 1}",
            '"x"',
            "sasrec",
            "puresvd",
            "pop",
            "ga-satf",
            "temporal",
            "3W",
            "0W",
            "k_core",
            "history",
            "2**70",
            "99999999999999999999999",
            "cuda:9",
        ]
    ),
    st.text(max_size=8),
)
OVERRIDE = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS), VALUES), st.text(max_size=12)
)

VALUE_TREE = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-(2**65), 2**65), st.floats(), st.text(max_size=5)
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(KEYS + ["name", "epochs"]), children, max_size=3),
    ),
    max_leaves=8,
)


def _config_overrides(overrides):
    _count("config overrides")
    try:
        load_experiment(None, overrides).model_config()
    except SeqRecError:
        pass


test_fuzz_config_overrides, test_fuzz_config_overrides_full = _sizes(
    N_OVERRIDES, overrides=st.lists(OVERRIDE, max_size=4)
)(_config_overrides)


@st.composite
def config_files(draw):
    fmt = draw(st.sampled_from(["toml", "yaml"]))
    tree = draw(
        st.dictionaries(
            st.sampled_from(["data", "split", "model", "train", "eval", "seed", "output", "bogus"]),
            VALUE_TREE,
            max_size=4,
        )
    )
    if fmt == "yaml":
        import yaml

        text = yaml.safe_dump(tree) if draw(st.booleans()) else draw(st.text(max_size=40))
    else:
        text = json.dumps(tree) if draw(st.booleans()) else draw(st.text(max_size=40))
    return fmt, text


def _config_files(workdir, case):
    fmt, text = case
    _count("config files")
    path = workdir / f"c{next(SERIAL)}.{fmt}"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        parse_text(text, fmt)
        load_experiment(path).model_config()
    except SeqRecError:
        pass
    finally:
        path.unlink(missing_ok=True)


test_fuzz_config_files, test_fuzz_config_files_full = _sizes(N_CONFIG_TEXT, case=config_files())(
    _config_files
)


# --- artifact loader -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def artifacts(workdir):
    from seqrec.models.factorization.pop import Pop, PopConfig
    from seqrec.models.factorization.svd import PureSVD, PureSVDConfig
    from seqrec.models.sasrec import SASRec, SASRecConfig
    from seqrec.testing.synthetic import leave_last_out_small, markov_sequences

    train, valid, _ = leave_last_out_small(markov_sequences(n_users=12, n_items=10))
    out = {}
    for name, model in {
        "pop": Pop(PopConfig()),
        "puresvd": PureSVD(PureSVDConfig(rank=3)),
        "sasrec": SASRec(
            model_settings(SASRecConfig, dim=8, n_blocks=1, n_heads=1, max_len=6, epochs=1)
        ),
    }.items():
        model.fit(train, valid if name == "sasrec" else None).save(workdir / "art" / name)
        out[name] = workdir / "art" / name
    return out


def _rehash(path: Path) -> None:
    """Record the files' current checksums: the parser behind the checksum gets fuzzed too."""
    import hashlib

    meta_path = path / "model.json"
    meta = json.loads(meta_path.read_text())
    for name in list(meta.get("files", {})):
        if (path / name).exists():
            data = (path / name).read_bytes()
            meta["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    meta_path.write_text(json.dumps(meta))


def _mutate_json(meta, data):
    """Replace or add one value somewhere in the tree."""
    node = meta
    for _ in range(data.draw(st.integers(0, 2))):
        if isinstance(node, dict) and node:
            child = node[data.draw(st.sampled_from(sorted(node)))]
            if isinstance(child, (dict, list)) and child:
                node = child
    value = data.draw(VALUE_TREE)
    if isinstance(node, dict):
        key = data.draw(st.one_of(st.sampled_from(sorted(node) or ["x"]), st.text(max_size=4)))
        if data.draw(st.booleans()) or not node:
            node[key] = value
        else:
            node.pop(data.draw(st.sampled_from(sorted(node))))
    elif isinstance(node, list) and node:
        node[data.draw(st.integers(0, len(node) - 1))] = value


def _artifact_loader(artifacts, workdir, data):
    from seqrec.models.base import Recommender

    _count("artifact loader")
    name = data.draw(st.sampled_from(sorted(artifacts)))
    path = workdir / f"a{next(SERIAL)}"
    shutil.copytree(artifacts[name], path)
    try:
        target = data.draw(st.sampled_from(["model.json", "state.npz", "vocab.npz"]))
        how = data.draw(st.sampled_from(["json", "truncate", "flip", "random", "empty", "swap"]))
        if target == "model.json" and how == "json":
            meta = json.loads((path / "model.json").read_text())
            _mutate_json(meta, data)
            (path / "model.json").write_text(json.dumps(meta))
        else:
            blob = bytearray((path / target).read_bytes())
            if how == "truncate":
                blob = blob[: data.draw(st.integers(0, len(blob)))]
            elif how in ("flip", "json"):
                for _ in range(data.draw(st.integers(1, 4))):
                    blob[data.draw(st.integers(0, len(blob) - 1))] ^= data.draw(st.integers(1, 255))
            elif how == "random":
                blob = bytearray(data.draw(st.binary(max_size=256)))
            elif how == "empty":
                blob = bytearray()
            else:  # another model's file of the same name
                other = artifacts[data.draw(st.sampled_from(sorted(artifacts)))] / target
                blob = bytearray(other.read_bytes())
            (path / target).write_bytes(bytes(blob))
            if target != "model.json" and data.draw(st.booleans()):
                _rehash(path)
        try:
            model = Recommender.load(path)
        except SeqRecError:
            return
        recs = model.recommend([["i1", "i2"]], k=3)  # what loads must also answer
        assert len(recs[0].items) <= 3
    finally:
        shutil.rmtree(path, ignore_errors=True)


test_fuzz_artifact_loader, test_fuzz_artifact_loader_full = _sizes(N_ARTIFACT, data=st.data())(
    _artifact_loader
)


# --- HTTP API --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client(artifacts):
    return TestClient(create_app(artifacts["sasrec"]), raise_server_exceptions=False)


ITEM = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from(["i1", "i3", "i10", "i99", ""]),
    st.text(max_size=4),
    st.floats(),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
)
BODY = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "history": st.one_of(st.lists(ITEM, max_size=8), ITEM),
            "k": st.one_of(
                st.integers(-5, 2000),
                st.integers(-(2**70), 2**70),
                st.floats(),
                st.text(max_size=3),
                st.none(),
            ),
            "exclude_seen": st.one_of(
                st.booleans(), st.integers(-2, 2), st.text(max_size=3), st.none()
            ),
            "extra": VALUE_TREE,
        },
    ),
    VALUE_TREE,
)


def _http_api(client, method, route, body, raw):
    _count("HTTP API")
    if raw is not None:
        resp = client.request(
            method, route, content=raw, headers={"content-type": "application/json"}
        )
    else:
        try:
            payload = json.dumps(body, allow_nan=True)
        except (TypeError, ValueError):
            return
        resp = client.request(
            method, route, content=payload, headers={"content-type": "application/json"}
        )
    assert resp.status_code < 500, (resp.status_code, resp.text[:200])
    if resp.status_code == 200 and route == "/recommend" and method == "POST":
        answer = resp.json()
        assert len(answer["items"]) == len(answer["scores"]) and np.isfinite(answer["scores"]).all()


test_fuzz_http_api, test_fuzz_http_api_full = _sizes(
    N_HTTP,
    method=st.sampled_from(["POST", "POST", "POST", "GET", "PUT"]),
    route=st.sampled_from(["/recommend", "/recommend", "/health", "/info", "/nope", "/recommend/"]),
    body=BODY,
    raw=st.one_of(st.none(), st.binary(max_size=40)),
)(_http_api)
