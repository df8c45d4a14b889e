"""`seqrec recommend` for a stored user and for a batch file, with allow/deny lists; unknown
ids named; removed (filtered) ids told apart from never-seen ones."""

import numpy as np
import polars as pl
import pytest

from seqrec.cli.main import main
from seqrec.models.base import Recommender
from seqrec.serving import text_arrays
from seqrec.serving.batch import read_requests
from seqrec.serving.histories import FILE
from seqrec.testing.synthetic import write_log_csv


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch")
    info = write_log_csv(tmp / "log.csv", n_users=30, n_items=20, time_unit="ms")
    with open(tmp / "log.csv", "a") as fh:  # a user with 2 events: the 5-core drops them
        fh.write("lonely,sku1,1609459200000\nlonely,sku2,1609459260000\n")
    assert (
        main(
            [
                "train",
                "--set",
                f"data.name={tmp / 'log.csv'}",
                "--set",
                "data.columns=user=customer,item=sku,timestamp=event_ms",
                "--set",
                "data.time_unit=ms",
                "--set",
                "model.name=lrurec",
                "--set",
                "train.epochs=1",
                "--set",
                "model.dim=8",
                "--set",
                "model.max_len=10",
                "--set",
                "train.num_threads=1",
                "--out",
                str(tmp / "run"),
            ]
        )
        == 0
    )
    return tmp, tmp / "run" / "model", info


def test_user_histories_are_stored_without_pickle(run):
    tmp, artifact, info = run
    with np.load(artifact / FILE, allow_pickle=False) as npz:
        assert {"raw__utf8", "raw__offsets", "offsets", "items", "removed__utf8"} <= set(npz.files)
        assert all(npz[k].dtype != object for k in npz.files)
        assert "lonely" in text_arrays.unpack(npz, "removed", "users.npz").tolist()
    model = Recommender.load(artifact)
    users = model.user_histories
    assert len(users) == 30
    # the stored history is the user's whole log in time order (the file was shuffled)
    log = pl.read_csv(tmp / "log.csv").filter(pl.col("customer") == "c5").sort("event_ms")
    kept = [s for s in log["sku"].to_list() if not model.vocab.is_removed(s)]
    assert users.raw_histories(["c5"], model.vocab)[0] == kept


def test_recommend_for_a_known_user(run, capsys):
    tmp, artifact, info = run
    assert main(["recommend", str(artifact), "--user", "c5", "-k", "3"]) == 0
    out = capsys.readouterr().out
    model = Recommender.load(artifact)
    (direct,) = model.recommend(model.user_histories.raw_histories(["c5"], model.vocab), k=3)
    assert "user c5:" in out
    for item in direct.items:
        assert item in out
    # several users: one table each, in the order given (a comma list or a repeated --user)
    for argv in (["--user", "c5,c7"], ["--user", "c5", "--user", "c7"]):
        assert main(["recommend", str(artifact), *argv, "-k", "3"]) == 0
        both = capsys.readouterr().out
        assert both.index("user c5:") < both.index("user c7:") and both.startswith(out)


def test_the_run_directory_stands_for_its_artifact_and_a_user_id_as_history_is_named(run, capsys):
    tmp, artifact, info = run
    assert main(["recommend", str(artifact.parent), "--user", "c5", "-k", "3"]) == 0
    by_run = capsys.readouterr().out
    assert main(["recommend", str(artifact), "--user", "c5", "-k", "3"]) == 0
    assert capsys.readouterr().out == by_run and "user c5:" in by_run
    assert main(["recommend", str(artifact), "c5", "-k", "3"]) == 0  # the user typed as an item
    assert (
        "'c5' is a user id: for that user's stored history pass --user c5"
        in capsys.readouterr().out
    )
    assert main(["recommend", str(tmp), "--user", "c5"]) == 2  # no model here, nor in tmp/model
    assert "not a seqrec artifact" in capsys.readouterr().err
    assert (
        main(["recommend", str(artifact / "model.json"), "--user", "c5", "-k", "3"]) == 0
    )  # a file of it
    assert capsys.readouterr().out == by_run
    model = Recommender.load(artifact.parent)  # the Python API takes the run directory too
    assert (
        model.recommend([["sku1"]], k=3)[0].items
        == Recommender.load(artifact).recommend([["sku1"]], k=3)[0].items
    )


def test_unknown_and_removed_users_are_named(run, capsys):
    tmp, artifact, info = run
    assert main(["recommend", str(artifact), "--user", "ghost"]) == 2
    err = capsys.readouterr().err
    assert "ghost" in err and "never seen" in err
    assert main(["recommend", str(artifact), "--user", "lonely"]) == 2
    err = capsys.readouterr().err
    assert "lonely" in err and "removed by preprocessing" in err


def test_removed_items_told_apart_from_never_seen(run, capsys):
    tmp, artifact, info = run
    assert main(["recommend", str(artifact), "sku1", info["rare"][0], "zzz9", "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert f"'{info['rare'][0]}' (removed by preprocessing)" in out
    assert "'zzz9' (never seen)" in out


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_batch_file_of_users_and_histories(run, ext, capsys):
    tmp, artifact, info = run
    (tmp / "users.csv").write_text("user\nc1\nc2\nc3\n")
    out = tmp / f"top.{ext}"
    assert (
        main(
            [
                "recommend",
                str(artifact),
                "--input",
                str(tmp / "users.csv"),
                "--output",
                str(out),
                "-k",
                "4",
            ]
        )
        == 0
    )
    table = pl.read_csv(out) if ext == "csv" else pl.read_parquet(out)
    assert table.height == 12 and table["rank"].to_list()[:4] == [1, 2, 3, 4]
    model = Recommender.load(artifact)
    hist = model.user_histories.raw_histories(["c2"], model.vocab)
    (direct,) = model.recommend(hist, k=4)
    got = table.filter(pl.col("user").cast(pl.String) == "c2").sort("rank")["item"].to_list()
    assert got == [str(i) for i in direct.items]
    # histories, with a deny file and an allow list
    (tmp / "hist.csv").write_text("user,history\na,sku1 sku2\nb,sku3|sku4\n")
    (tmp / "deny.txt").write_text("# never these\n" + "\n".join(direct.items[:2]) + "\n")
    allow = ",".join(f"sku{i}" for i in range(1, 12))
    assert (
        main(
            [
                "recommend",
                str(artifact),
                "--input",
                str(tmp / "hist.csv"),
                "--output",
                str(out),
                "-k",
                "5",
                "--deny",
                str(tmp / "deny.txt"),
                "--allow",
                allow,
            ]
        )
        == 0
    )
    table = pl.read_csv(out) if ext == "csv" else pl.read_parquet(out)
    items = set(table["item"].to_list())
    assert items <= {f"sku{i}" for i in range(1, 12)} and not items & set(direct.items[:2])
    assert set(table["user"].cast(pl.String).to_list()) == {"a", "b"}


def test_batch_unknown_users_get_the_fallback_and_are_named(run, capsys):
    """The one rule of every path: an unknown user is an error naming it; with --unknown-users
    empty (a nightly batch that one new user must not stop) it gets the popularity ranking, and
    a note names it (and says whether preprocessing removed it)."""
    tmp, artifact, info = run
    (tmp / "u2.csv").write_text("user\nc1\nnobody\nlonely\n")
    args = ["recommend", str(artifact), "--input", str(tmp / "u2.csv")]
    assert main([*args, "--output", str(tmp / "x.csv"), "-k", "3"]) == 2
    err = capsys.readouterr().err
    assert "'nobody'" in err and "'lonely'" in err and not (tmp / "x.csv").exists()
    assert (
        main(
            [
                *args,
                "--output",
                str(tmp / "x.csv"),
                "-k",
                "3",
                "--unknown-users",
                "empty",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "2 user id(s) unknown to the artifact got the popularity ranking" in out
    assert "'nobody' (never seen)" in out and "'lonely' (removed by preprocessing)" in out
    table = pl.read_csv(tmp / "x.csv")
    assert table.height == 9 and set(table["user"].to_list()) == {"c1", "nobody", "lonely"}
    new = table.filter(pl.col("user") == "nobody")["item"].to_list()
    assert new == table.filter(pl.col("user") == "lonely")["item"].to_list()  # the same fallback
    # the fallback rows say so (their scores are counts, on another scale than the model's)
    marked = dict(zip(table["user"].to_list(), table["fallback"].to_list(), strict=True))
    assert marked == {"c1": None, "nobody": "popularity", "lonely": "popularity"}
    (tmp / "u3.csv").write_text("user\nc1\nnobody\n")
    assert (
        main(
            [
                "recommend",
                str(artifact),
                "--input",
                str(tmp / "u3.csv"),
                "--output",
                str(tmp / "x.parquet"),
                "-k",
                "2",
                "--unknown-users",
                "empty",
            ]
        )
        == 0
    )
    assert pl.read_parquet(tmp / "x.parquet")["fallback"].to_list() == [
        None,
        None,
        "popularity",
        "popularity",
    ]
    assert main(["recommend", str(artifact), "--user", "nobody"]) == 2
    assert "'nobody'" in capsys.readouterr().err
    capsys.readouterr()
    assert main(["recommend", str(artifact), "--user", "nobody", "--unknown-users", "empty"]) == 0
    assert "note: empty history, showing the popularity ranking" in capsys.readouterr().out


def test_long_format_requests_group_by_user_in_time_order(tmp_path):
    (tmp_path / "long.csv").write_text("user_id,item_id,timestamp\nb,x,5\na,y,9\na,z,3\nb,w,1\n")
    reqs = read_requests(tmp_path / "long.csv")
    assert [(r.key, r.history) for r in reqs] == [("b", ["w", "x"]), ("a", ["z", "y"])]


def test_bad_combinations_are_one_line_errors(run, capsys):
    tmp, artifact, info = run
    for argv in (
        ["sku1", "--user", "c1"],
        ["--input", str(tmp / "users.csv"), "--user", "c1"],
        ["--output", str(tmp / "o.csv")],
        ["sku1", "--allow", "sku1,never-heard"],
    ):
        assert main(["recommend", str(artifact), *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1


def test_damaged_users_file_is_a_one_line_error(run, tmp_path):
    import shutil

    from seqrec.errors import DataError

    tmp, artifact, info = run
    copy = tmp_path / "art"
    shutil.copytree(artifact, copy)
    (copy / FILE).write_bytes((artifact / FILE).read_bytes()[:100])
    with pytest.raises(DataError) as err:
        Recommender.load(copy)
    assert FILE in str(err.value) and "\n" not in str(err.value)


def test_a_resave_without_histories_drops_the_stale_users_file(run, tmp_path):
    import shutil

    tmp, artifact, info = run
    copy = tmp_path / "art"
    shutil.copytree(artifact, copy)
    model = Recommender.load(copy)
    assert model.user_histories is not None
    model.user_histories = None
    model.save(copy)
    assert not (copy / FILE).exists() and Recommender.load(copy).user_histories is None


def test_a_request_file_without_a_user_column_lists_the_file_own_header(tmp_path):
    path = tmp_path / "requests.csv"
    path.write_text("who,what,when\nc1,a,1\n")
    from seqrec.errors import DataError

    with pytest.raises(DataError, match="columns present: who, what, when;"):
        read_requests(path)
    path.write_text("CustomerID,product_sku,ts\nc1,a,1\nc1,b,2\n")  # names a log reader guesses
    (req,) = read_requests(path)
    assert req.key == "c1" and req.history == ["a", "b"]


def test_the_example_query_of_serve_is_a_stored_user(run):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from seqrec.serving.service import create_app

    _, artifact, _ = run
    app = create_app(artifact)
    user = str(Recommender.load(artifact).user_histories.raw[0])
    assert app.state.example_query == f"user={user}&k=5"
    body = TestClient(app).get(f"/recommend?{app.state.example_query}").json()
    assert len(body["items"]) == 5 and body["fallback"] is None


def test_batch_without_output_is_csv_on_stdout_and_reads_semicolons_and_xlsx(run, capsys):
    """`seqrec recommend RUN --input users.csv` (no --output): CSV on stdout, notes on stderr,
    the same rows as the file; a Excel-style ';' file and an .xlsx read alike."""
    import io

    tmp, artifact, _ = run
    (tmp / "eu.csv").write_text("customer;segment\nc1;a\nc2;b\nnobody;c\n")
    empty = ["--unknown-users", "empty"]
    assert (
        main(["recommend", str(artifact), "--input", str(tmp / "eu.csv"), "-k", "3", *empty]) == 0
    )
    out, err = capsys.readouterr()
    streamed = pl.read_csv(io.StringIO(out))
    assert streamed.columns[:4] == ["user", "rank", "item", "score"] and streamed.height == 9
    assert "'nobody' (never seen)" in err and "note" not in out
    assert (
        main(
            [
                "recommend",
                str(artifact),
                "--input",
                str(tmp / "eu.csv"),
                "-k",
                "3",
                "--output",
                str(tmp / "eu-top.csv"),
                *empty,
            ]
        )
        == 0
    )
    assert pl.read_csv(tmp / "eu-top.csv").equals(streamed)
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    for row in (["customer"], ["c1"], ["c2"], ["nobody"]):
        book.active.append(row)
    book.save(tmp / "users.xlsx")
    capsys.readouterr()
    assert (
        main(["recommend", str(artifact), "--input", str(tmp / "users.xlsx"), "-k", "3", *empty])
        == 0
    )
    assert pl.read_csv(io.StringIO(capsys.readouterr().out)).equals(streamed)
