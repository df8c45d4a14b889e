"""Data sources: the shipped dataset, every raw-format parser on tiny files written here,
malformed input -> one-line DataError, name/dir resolution, and download without the network."""

from __future__ import annotations

import gzip
import io
import json
import lzma
import urllib.error
import zipfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqrec.data.preprocess import preprocess
from seqrec.data.sources import (
    _io,
    amazon,
    cache,
    data_dir,
    dataset_names,
    describe_source,
    download,
    load,
    movielens,
    shared_files,
    steam,
    yelp,
)
from seqrec.errors import ConfigError, DataError, UnknownNameError

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
_shared_present = pytest.mark.skipif(
    not (SHARED / "ml-1m.seq.tsv.xz").is_file(), reason="../shared/data not present"
)


def needs_shared(test):
    """Real data: skipped without ../shared/data, and in the slow tier."""
    return pytest.mark.slow(_shared_present(test))


def write(path: Path, text: str | bytes, encoding: str = "utf-8") -> Path:
    data = text.encode(encoding) if isinstance(text, str) else text
    if path.suffix == ".gz":
        data = gzip.compress(data)
    elif path.suffix == ".xz":
        data = lzma.compress(data)
    path.write_bytes(data)
    return path


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """No test reads the user's cache or data dir unless it sets them."""
    monkeypatch.setenv("SEQREC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SEQREC_DATA_DIR", raising=False)


# --- shipped dataset ------------------------------------------------------------------------------
def test_shipped_ml_latest_small():
    inter = load("ml-latest-small")
    assert (len(inter), inter.n_users, inter.n_items) == (100836, 610, 9724)
    assert inter.has_time and inter.timestamp.min() == 828124615
    assert inter.rating is not None and set(np.unique(inter.rating)) <= set(np.arange(1, 11) / 2)
    titles = dict(zip(inter.items["item"].tolist(), inter.items["title"].tolist(), strict=True))
    assert titles[1] == "Toy Story (1995)"
    assert "Comedy" in inter.items["genres"][inter.items["item"] == 1][0]
    prepared = preprocess(inter)
    assert prepared.vocab.titles is not None and prepared.vocab.title(1) is not None


def test_names_and_describe():
    names = dataset_names()
    for n in (
        "ml-latest-small",
        "ml-1m",
        "ml-1m-ts",
        "ml-100k",
        "amazon-beauty",
        "amazon-sports",
        "amazon-toys-s3rec",
        "amazon-videogames",
        "yelp2020",
        "lastfm",
        "diginetica-train",
        "yoochoose-test",
        "steam",
        "ml-20m",
    ):
        assert n in names
    assert "6,040 users" in describe_source("ml-1m")
    assert "\n" not in describe_source("ml-1m")
    assert "download" in describe_source("ml-1m", verbose=True)
    with pytest.raises(UnknownNameError, match="known: .*ml-1m"):
        describe_source("ml-2m")


def test_unknown_name_lists_known():
    with pytest.raises(UnknownNameError) as err:
        load("movielens-1m")
    msg = str(err.value)
    assert "unknown dataset 'movielens-1m'" in msg and "ml-latest-small" in msg and "\n" not in msg


# --- MovieLens raw formats ------------------------------------------------------------------------
def test_ml100k_udata_and_uitem(tmp_path):
    udata = write(
        tmp_path / "u.data",
        "196\t242\t3\t881250949\n186\t302\t3\t891717742\n196\t302\t5\t881250950\n",
    )
    flags = ["0"] * 19
    flags[5] = flags[8] = "1"  # Comedy, Drama
    uitem = write(
        tmp_path / "u.item",
        f"242|Kolya (1996)|24-Jan-1997||http://x|{'|'.join(flags)}\n"
        f"302|L.A. Confidential (1997)|01-Jan-1997||http://y|{'|'.join(['0'] * 18 + ['1'])}\n"
        f"303|Caf\u00e9 (1997)|01-Jan-1997||http://z|{'|'.join(['0'] * 19)}\n",
        encoding="latin-1",
    )
    inter = movielens.read_udata(udata, uitem)
    assert inter.user.tolist() == [196, 186, 196] and inter.item.tolist() == [242, 302, 302]
    assert inter.timestamp.tolist() == [881250949, 891717742, 881250950] and inter.has_time
    assert inter.rating.tolist() == [3, 3, 5]
    side = dict(
        zip(
            inter.items["item"].tolist(),
            zip(inter.items["title"], inter.items["genres"], strict=True),
            strict=True,
        )
    )
    assert side[242] == ("Kolya (1996)", "Comedy|Drama")
    assert side[302][1] == "Western"
    assert side[303][0] == "Caf\u00e9 (1997)"  # latin-1 decoded


def test_ml1m_ratings_dat_and_movies(tmp_path, caplog):
    ratings = write(
        tmp_path / "ratings.dat",
        "1::1193::5::978300760\n1::661::3::978302109\n2::1193::4::978298413\n",
    )
    # movies.dat is Latin-1 (ML-1M's line 73: "Misérables"): decoded as such, and without the
    # "not UTF-8" warning meant for a user's own file of unknown encoding
    (tmp_path / "movies.dat").write_bytes(
        "1193::One Flew Over the Cuckoo's Nest (1975)::Drama\n73::Mis\u00e9rables, Les (1995)::Drama|Musical\n"
        "661::James and the Giant Peach (1996)::Animation|Children's|Musical\n".encode("latin-1")
    )
    with caplog.at_level("WARNING"):
        inter = movielens.read_movielens_dir(tmp_path)
    assert "not UTF-8" not in caplog.text
    assert inter.items["title"][inter.items["item"] == 73][0] == "Mis\u00e9rables, Les (1995)"
    assert inter.user.tolist() == [1, 1, 2] and inter.item.tolist() == [1193, 661, 1193]
    assert inter.timestamp.tolist() == [978300760, 978302109, 978298413]
    assert inter.items["title"][inter.items["item"] == 661][0] == "James and the Giant Peach (1996)"
    assert inter.name == tmp_path.name
    # load() on the file itself dispatches to the same reader
    assert load(ratings).item.tolist() == [1193, 661, 1193]


def test_ml20m_ratings_csv_with_quoted_titles(tmp_path):
    write(
        tmp_path / "ratings.csv",
        "userId,movieId,rating,timestamp\r\n1,2,3.5,1112486027\r\n1,29,4.0,1112484676\r\n",
    )
    write(
        tmp_path / "movies.csv",
        'movieId,title,genres\n2,Jumanji (1995),Adventure\n29,"City of Lost Children, The (1995)",Drama|Sci-Fi\n',
    )
    inter = load(tmp_path)
    assert inter.item.tolist() == [2, 29] and inter.rating.tolist() == [3.5, 4.0]
    assert inter.timestamp.tolist() == [1112486027, 1112484676]
    assert inter.items["title"].tolist() == ["Jumanji (1995)", "City of Lost Children, The (1995)"]


# --- Amazon -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["2014", "2018"])
def test_amazon_ratings_csv_layouts(tmp_path, layout, caplog):
    rows = [
        ("AUSER1XYZ0001", "B000ITEM01", 5.0, 1390694400),
        ("AUSER2XYZ0002", "0205616461", 3.0, 1390780800),
        ("AUSER1XYZ0001", "0205616461", 4.0, 1390867200),
    ]
    lines = [(u, i) if layout == "2014" else (i, u) for u, i, *_ in rows]
    text = "".join(f"{a},{b},{r},{t}\n" for (a, b), (_, _, r, t) in zip(lines, rows, strict=True))
    fname = "ratings_Beauty.csv" if layout == "2014" else "Beauty.csv"  # the releases' names
    inter = amazon.read_ratings_csv(write(tmp_path / fname, text), layout=layout)
    raw = inter.items["raw_id"][inter.item]
    assert raw.tolist() == [i for _, i, _, _ in rows]
    assert inter.user[0] == inter.user[2] != inter.user[1]
    assert inter.timestamp.tolist() == [t for *_, t in rows] and inter.rating.tolist() == [5, 3, 4]
    if layout == "2014":  # recognised by its file name
        assert load(tmp_path / "ratings_Beauty.csv").item.tolist() == inter.item.tolist()
    else:  # or read generically with the column names given
        generic_inter = load(
            tmp_path / fname, has_header=False, names=["item", "user", "rating", "timestamp"]
        )
        assert generic_inter.items["raw_id"][generic_inter.item].tolist() == raw.tolist()
    with pytest.raises(ConfigError, match="layout"):
        amazon.read_ratings_csv(tmp_path / fname, layout="2015")
    assert "is this a" not in caplog.text  # the right layout does not warn
    other = "2018" if layout == "2014" else "2014"
    with caplog.at_level("WARNING", logger="seqrec.data.sources.amazon"):
        amazon.read_ratings_csv(tmp_path / fname, layout=other)
    assert f"is this a {layout} file" in caplog.text


def test_amazon_review_json_gz_and_remap(tmp_path):
    recs = [
        {
            "reviewerID": "A2",
            "asin": "B01",
            "overall": 5.0,
            "unixReviewTime": 1318896000,
            "helpful": [0, 0],
            "reviewText": "great\nstuff",
        },
        {
            "reviewerID": "A1",
            "asin": "B02",
            "overall": 2.0,
            "unixReviewTime": 1318982400,
            "style": {"Size:": " 1"},
        },
        {"reviewerID": "A2", "asin": "B02", "overall": 4.0, "unixReviewTime": 1318896000},
    ]
    path = write(tmp_path / "reviews_Beauty_5.json.gz", "".join(json.dumps(r) + "\n" for r in recs))
    inter = load(path)  # sniffed as Amazon by its keys
    assert inter.items["raw_id"][inter.item].tolist() == ["B01", "B02", "B02"]
    assert inter.rating.tolist() == [5, 2, 4]
    prepared = preprocess(inter)
    assert sorted(prepared.vocab.raw.tolist()) == ["B01", "B02"]
    assert prepared.vocab.encode(["B02"]).tolist() == [2]


# --- Steam --------------------------------------------------------------------------------------------
def test_steam_python_literal_lines(tmp_path):
    lines = [
        "{'username': 'Chaos Syren', 'hours': 0.1, 'products': 41, 'product_id': '725280', "
        "'page_order': 0, 'date': '2017-12-17', 'text': \"it's 'username': 'fake'\", 'early_access': False}",
        "{'username': \"O'Brien\", 'product_id': '328100', 'date': '2017-10-16', 'text': 'ok'}",
        "{'username': 'Caf\\xe9', 'product_id': '725280', 'date': '2018-01-04'}",
        "{'username': 'old style', 'product_id': 35140, 'date': u'2014-03-01'}",  # regex miss
        "",
    ]
    inter = steam.read_reviews(write(tmp_path / "steam_reviews.json.gz", "\n".join(lines)))
    assert len(inter) == 4
    assert inter.items is None  # canonical integer ids stay integers
    assert inter.item.tolist() == [725280, 328100, 725280, 35140]
    assert inter.timestamp.tolist() == [1513468800, 1508112000, 1515024000, 1393632000]
    assert len(set(inter.user.tolist())) == 4
    assert load(tmp_path / "steam_reviews.json.gz").item.tolist() == inter.item.tolist()


def test_steam_blocks_match_whole_file(tmp_path):
    lines = [
        f"{{'username': 'u{i % 7}', 'product_id': '{100 + i % 5}', 'date': '2017-01-{1 + i % 28:02d}', "
        f"'text': '{'x' * (i % 13)}'}}"
        for i in range(60)
    ]
    path = write(tmp_path / "s.json.xz", "\n".join(lines) + "\n")
    whole = steam.read_reviews(path)
    small = steam.read_reviews(path, block_bytes=700)  # several blocks, lines cut across reads
    assert len(whole) == 60
    for col in ("user", "item", "timestamp"):
        assert np.array_equal(getattr(whole, col), getattr(small, col))
    lines[41] = "{'username': 'x', 'product_id': oops}"
    with pytest.raises(DataError, match="line 42 is not a Python dict literal"):
        steam.read_reviews(write(tmp_path / "b.json", "\n".join(lines)), block_bytes=100)
    with pytest.raises(DataError, match="empty"):
        steam.read_reviews(write(tmp_path / "e.json.gz", "\n\n"))


def test_steam_never_evaluates_code(tmp_path):
    marker = tmp_path / "pwned"
    bad = f"{{'username': __import__('pathlib').Path('{marker}').touch(), 'product_id': '1'}}"
    good = "{'username': 'a', 'product_id': '1', 'date': '2017-01-01'}"
    with pytest.raises(DataError, match="line 2 is not a Python dict literal"):
        steam.read_reviews(write(tmp_path / "s.json", good + "\n" + bad + "\n"))
    assert not marker.exists()


# --- Yelp -----------------------------------------------------------------------------------------------
def test_yelp_review_json(tmp_path):
    recs = [
        {
            "review_id": "r1",
            "user_id": "u1",
            "business_id": "b9",
            "stars": 4,
            "useful": 0,
            "text": "nice",
            "date": "2019-01-02 03:04:05",
        },
        {
            "review_id": "r2",
            "user_id": "u2",
            "business_id": "b1",
            "stars": 2.0,
            "text": "meh",
            "date": "2019-01-03 00:00:00",
        },
    ]
    path = write(tmp_path / "review.json", "".join(json.dumps(r) + "\n" for r in recs))
    inter = yelp.read_reviews(path)
    assert inter.items["raw_id"][inter.item].tolist() == ["b9", "b1"]
    assert inter.timestamp.tolist() == [1546398245, 1546473600] and inter.rating.tolist() == [4, 2]
    assert load(path).timestamp.tolist() == inter.timestamp.tolist()


# --- generic ------------------------------------------------------------------------------------------------
def test_generic_csv_with_mapping_and_string_ids(tmp_path):
    path = write(
        tmp_path / "log.csv.gz", "who,what,when,stars\nann,x1,10,1\nbob,x0,5,2\nann,x0,7,3\n"
    )
    inter = load(
        path, columns={"user": "who", "item": "what", "timestamp": "when", "rating": "stars"}
    )
    assert inter.items["raw_id"][inter.item].tolist() == ["x1", "x0", "x0"]
    assert inter.user.tolist() == [0, 1, 0] and inter.timestamp.tolist() == [10, 5, 7]
    assert inter.rating.tolist() == [1, 2, 3] and inter.name == "log"


def test_generic_keeps_leading_zero_ids(tmp_path):
    inter = load(
        write(tmp_path / "z.csv", "user_id,item_id\n1,0205616461\n2,0205616461\n2,12\n"),
        columns={"timestamp": None},
    )
    assert inter.items["raw_id"][inter.item].tolist() == ["0205616461", "0205616461", "12"]
    inter = load(
        write(tmp_path / "n.csv", "user_id,item_id\n1,205616461\n2,12\n"),
        columns={"timestamp": None},
    )
    assert inter.items is None and inter.item.tolist() == [205616461, 12]


def test_generic_tsv_aliases_no_time_and_parquet(tmp_path):
    tsv = write(tmp_path / "seq.tsv", "session_id\titem_id\n3\t7\n3\t8\n1\t7\n")
    with pytest.raises(DataError, match="no timestamp column .*session_id, item_id.*None"):
        load(tsv)  # never a silent fallback to file order
    inter = load(tsv, columns={"timestamp": None})
    assert inter.user.tolist() == [3, 3, 1] and not inter.has_time
    assert inter.timestamp.tolist() == [0, 1, 2]
    pq = tmp_path / "x.parquet"
    pl.DataFrame({"userId": [1, 2], "movieId": [5, 6], "ts": [1000_000, 2000_000]}).write_parquet(
        pq
    )
    inter = load(pq, columns={"timestamp": "ts"}, timestamp_unit="ms")
    assert inter.timestamp.tolist() == [1000, 2000] and inter.has_time
    # pandas' "category" columns arrive as Categorical / Enum: ids like strings
    cat = tmp_path / "cat.parquet"
    pl.DataFrame({"user": ["b", "a", "b"], "item": ["x", "y", "x"], "ts": [1, 2, 3]}).with_columns(
        pl.col("user").cast(pl.Categorical), pl.col("item").cast(pl.Enum(["y", "x"]))
    ).write_parquet(cat)
    inter = load(cat)
    assert inter.user.tolist() == [1, 0, 1] and inter.items["raw_id"].tolist() == ["x", "y"]


def test_generic_bom_and_latin1(tmp_path):
    inter = load(write(tmp_path / "bom.csv", b"\xef\xbb\xbfuser_id,item_id,timestamp\n1,2,3\n"))
    assert inter.user.tolist() == [1] and inter.timestamp.tolist() == [3]
    # Latin-1 is read as Windows-1252 (test_an_8_bit_file_is_read_as_windows_1252...)
    assert (
        len(load(write(tmp_path / "l1.csv", b"user_id,item_id,timestamp,title\n1,2,3,Caf\xe9\n")))
        == 1
    )


def test_generic_dates_and_custom_separator(tmp_path):
    path = write(tmp_path / "d.txt", "u::i::day\n1::2::2020-01-02\n1::3::2020-01-01\n")
    inter = load(path, sep="::", columns={"user": "u", "item": "i", "timestamp": "day"})
    assert inter.timestamp.tolist() == [1577923200, 1577836800]
    with pytest.raises(ConfigError, match="unknown option"):
        load(path, separator="::")


@settings(max_examples=25, deadline=None)
# timestamps stay below 10^11 s (the year 5138): larger ones are refused as milliseconds
@given(
    st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(1, 10**9), st.integers(0, 10**11 - 1)),
        min_size=1,
        max_size=30,
    )
)
def test_generic_roundtrip(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("rt") / "r.csv"
    path.write_text("user_id,item_id,timestamp\n" + "".join(f"{u},{i},{t}\n" for u, i, t in rows))
    inter = load(path)
    assert inter.user.tolist() == [r[0] for r in rows]
    assert inter.item.tolist() == [r[1] for r in rows]
    assert inter.timestamp.tolist() == [r[2] for r in rows]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=6), min_size=1, max_size=40))
def test_factorize_roundtrip(values):
    codes, uniques = _io.factorize(pl.Series(values, dtype=pl.String))
    assert uniques[codes].tolist() == values
    assert codes.min() == 0 and codes.max() == len(set(values)) - 1
    assert uniques.tolist() == sorted(set(values))


# --- malformed input ----------------------------------------------------------------------------------------
def one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


def test_missing_column_names_it_and_lists_present(tmp_path):
    path = write(tmp_path / "x.csv", "user_id,thing,timestamp\n1,2,3\n")
    with pytest.raises(DataError) as err:
        load(path)
    assert "no item column" in one_line(err) and "user_id, thing, timestamp" in str(err.value)
    with pytest.raises(DataError) as err:
        load(path, columns={"item": "item_id"})
    assert "no column 'item_id'" in one_line(err)
    with pytest.raises(DataError) as err:
        movielens.read_ratings_csv(
            write(tmp_path / "ratings.csv", "userId,movie,rating,timestamp\n1,2,3,4\n")
        )
    assert "no column 'movieId'" in one_line(err) and "userId, movie, rating, timestamp" in str(
        err.value
    )


@pytest.mark.parametrize(
    "header, roles",
    [
        # UCI Online Retail, an e-shop export, RetailRocket: none names a column with an exact alias
        ("CustomerID,StockCode,InvoiceDate,Quantity", ("CustomerID", "StockCode", "InvoiceDate")),
        (
            "customer-id,Product SKU,purchase_date,price",
            ("customer-id", "Product SKU", "purchase_date"),
        ),
        ("timestamp,visitorid,event,itemid", ("visitorid", "itemid", "timestamp")),
        (
            "Visitor_ID,user_agent,Item,created_at",
            ("Visitor_ID", "Item", "created_at"),
        ),  # alias first
    ],
)
def test_columns_without_an_exact_alias_are_guessed_from_their_names(tmp_path, header, roles):
    cols = header.split(",")
    values = {cols.index(roles[0]): "u{}", cols.index(roles[1]): "i{}", cols.index(roles[2]): "{}"}
    rows = [",".join(values.get(j, "x").format(r) for j in range(len(cols))) for r in range(1, 4)]
    inter = load(write(tmp_path / "shop.csv", header + "\n" + "\n".join(rows) + "\n"))
    assert len(inter) == 3 and inter.has_time
    assert f"(user={roles[0]}, item={roles[1]}, timestamp={roles[2]})" in inter.notes[0]


def test_a_duration_is_never_guessed_as_the_timestamp(tmp_path):
    path = write(tmp_path / "x.csv", "user_id,item_id,watch_time\nu,a,30\nu,b,12\n")
    with pytest.raises(DataError, match="no timestamp column"):
        load(path)
    path = write(tmp_path / "y.csv", "user_id,item_id,time_spent,event_date\nu,a,30,2021-01-01\n")
    assert "timestamp=event_date" in load(path).notes[0]


def test_two_columns_that_could_be_the_item_are_not_guessed(tmp_path):
    path = write(tmp_path / "x.csv", "user,product_id_old,product_code,timestamp\n1,2,3,4\n")
    with pytest.raises(DataError) as err:
        load(path)
    assert "several columns could be the item (product_id_old, product_code)" in one_line(err)
    assert "data.columns=item=<name>" in str(err.value)
    assert len(load(path, columns={"item": "product_code"})) == 1


@pytest.mark.parametrize("tail", ["\n\n", "\r\n\r\n", ",,\n,,\n", "\n  \n\t\n", '"","",""\n'])
def test_blank_lines_at_the_end_are_not_rows(tmp_path, tail):
    """Spreadsheet exports end with blank lines or lines of commas: not rows of empty ids."""
    body = "user,item,timestamp\nu1,a,1\nu1,b,2\nu2,a,3"
    inter = load(write(tmp_path / "x.csv", body + "\n" + tail))
    assert len(inter) == 3 and len(load(write(tmp_path / "y.csv", body))) == 3  # no final newline
    middle = load(write(tmp_path / "z.csv", "user,item,timestamp\nu1,a,1\n,,\nu2,a,3\n"))
    assert len(middle) == 2 and any("the first at line 3" in n for n in middle.notes)  # named
    with pytest.raises(DataError, match="header but no rows"):
        load(write(tmp_path / "h.csv", "user,item,timestamp\n" + tail))


def test_garbage_line_says_column_line_and_value(tmp_path):
    good = "".join(f"{u}::{u + 1}::3::97830076{u}\n" for u in range(1, 6))
    path = write(tmp_path / "ratings.dat", good + "7::abc::4::978300760\n")
    with pytest.raises(DataError) as err:
        movielens.read_ratings_dat(path)
    msg = one_line(err)
    assert "column 'item'" in msg and "'abc'" in msg and "line 6" in msg
    path = write(tmp_path / "t.tsv", "user_id\titem_id\n1\t2\n1\t2\t9\n")
    with pytest.raises(DataError) as err:
        load(path, columns={"timestamp": None})
    assert "line 3 has 3 fields, expected 2" in one_line(err)
    path = write(tmp_path / "e.csv", "user_id,item_id,timestamp\n1,2,3\n1,,4\n")
    with pytest.raises(DataError) as err:
        load(path)
    assert "column 'item_id' is empty at line 3" in one_line(err)
    path = write(tmp_path / "g.csv", "user,item,timestamp\n1,2,3\n1,3,4\nnot,a,number\n")
    with pytest.raises(DataError) as err:
        load(path, columns={"user": "user", "item": "item"})
    assert "column 'timestamp'" in one_line(err) and "'number' at line 4" in str(err.value)
    with pytest.raises(
        DataError, match="mixes Unix seconds and dates, e.g. '2020-01-01' at line 3"
    ):
        load(write(tmp_path / "mix.csv", "user_id,item_id,timestamp\n1,2,3\n1,3,2020-01-01\n"))
    path = write(tmp_path / "w.csv", "user,item,timestamp\n1,2,yesterday\n")
    with pytest.raises(DataError, match="column 'timestamp' must hold a time.*'yesterday'"):
        load(path)
    path = write(
        tmp_path / "bad.json",
        '{"reviewerID": "A", "asin": "B", "overall": 1, "unixReviewTime": 1}\n{oops\n',
    )
    with pytest.raises(DataError) as err:
        load(path)
    assert "line 2 is not valid JSON" in one_line(err)


@pytest.mark.parametrize("content", [b"", b"\n\n", b"user_id,item_id\n"])
def test_empty_files(tmp_path, content):
    path = tmp_path / "empty.csv"
    path.write_bytes(content)
    with pytest.raises(DataError, match="empty|no rows") as err:
        load(path)
    one_line(err)
    with pytest.raises(DataError, match="empty"):
        amazon.read_reviews_json(write(tmp_path / "r.json.gz", content))


def test_wrong_json_keys_and_unknown_format(tmp_path):
    path = write(
        tmp_path / "r.json", json.dumps({"reviewerID": "A", "asin": "B", "overall": 1}) + "\n"
    )
    with pytest.raises(
        DataError, match="no key 'unixReviewTime'.*keys of the first line: reviewerID"
    ):
        load(path)
    with pytest.raises(DataError, match="cannot tell the format"):
        load(write(tmp_path / "x.weird", "a,b\n1,2\n"))


# --- shared data dir resolution ----------------------------------------------------------------------------
def test_data_dir_resolution(tmp_path, monkeypatch):
    (tmp_path / "mine").mkdir()
    assert data_dir(tmp_path / "mine") == tmp_path / "mine"
    monkeypatch.setenv("SEQREC_DATA_DIR", str(tmp_path / "env"))
    assert data_dir() == tmp_path / "env"  # env wins even if absent (so the error names it)
    with pytest.raises(DataError) as err:
        load("ml-1m")
    msg = one_line(err)
    assert str(tmp_path / "env") in msg and "SEQREC_DATA_DIR" in msg
    assert "seqrec data download ml-1m" in msg


def test_named_dataset_from_root(tmp_path):
    write(tmp_path / "lastfm-hetrec.s3rec.tsv.xz", "user_id\titem_id\n1\t1\n1\t2\n2\t1\n")
    inter = load("lastfm", root=tmp_path)
    assert inter.name == "lastfm" and inter.item.tolist() == [1, 2, 1] and not inter.has_time
    with pytest.raises(ConfigError, match="takes no options"):
        load("lastfm", root=tmp_path, sep=",")


# --- parse cache --------------------------------------------------------------------------------------------
def test_parse_cache_hit_is_identical_and_invalidated_by_edits(tmp_path, monkeypatch):
    path = write(
        tmp_path / "ml-1m.seq.tsv.xz", "user_id\titem_id\trating\n1\t5\t4\n1\t6\t3\n2\t5\t1\n"
    )
    write(tmp_path / "ml-1m.movies.dat.xz", "5::Five (1995)::Drama\n6::Six (1996)::Comedy|Drama\n")
    first = load("ml-1m", root=tmp_path)
    assert len(list((tmp_path / "cache" / "parsed").glob("*.json"))) == 1

    def boom(*args, **kwargs):
        raise AssertionError("parsed again instead of using the cache")

    monkeypatch.setattr(shared_files, "read_ml1m_seq", boom)
    again = load("ml-1m", root=tmp_path)
    for col in ("user", "item", "timestamp", "rating"):
        assert np.array_equal(getattr(first, col), getattr(again, col))
    assert again.items["title"].tolist() == ["Five (1995)", "Six (1996)"]
    assert (again.name, again.has_time, again.notes) == (first.name, first.has_time, first.notes)
    # the movies' genres became item categories and were cached with the rest
    assert np.array_equal(again.item_attributes.attribute, first.item_attributes.attribute)
    with pytest.raises(AssertionError, match="parsed again"):
        load("ml-1m", root=tmp_path, cache=False)
    write(path, "user_id\titem_id\trating\n1\t5\t4\n1\t6\t3\n2\t5\t1\n3\t6\t2\n")  # edited
    with pytest.raises(AssertionError, match="parsed again"):
        load("ml-1m", root=tmp_path)
    monkeypatch.setenv("SEQREC_PARSE_CACHE", "0")
    assert not cache.enabled()
    assert cache.clear() == 4 and not list((tmp_path / "cache" / "parsed").iterdir())


def test_parse_cache_ignores_corrupt_entry(tmp_path):
    write(tmp_path / "lastfm-hetrec.s3rec.tsv.xz", "user_id\titem_id\n1\t1\n1\t2\n")
    load("lastfm", root=tmp_path)
    for f in (tmp_path / "cache" / "parsed").glob("*.parquet"):
        f.write_bytes(b"garbage")
    assert load("lastfm", root=tmp_path).item.tolist() == [1, 2]


# --- download (no network) --------------------------------------------------------------------------------
def test_fetch_file_url_checksum(tmp_path):
    src = write(tmp_path / "src.bin", b"seqrec" * 1000)
    expected = download._sha256(src)
    seen = []
    dest = tmp_path / "out" / "f.bin"
    assert (
        download.fetch(src.as_uri(), dest, expected, progress=lambda d, t: seen.append(d))
        == expected
    )
    assert dest.read_bytes() == src.read_bytes() and seen[-1] == 6000
    dest2 = tmp_path / "out" / "g.bin"
    with pytest.raises(DataError, match="sha256 mismatch") as err:
        download.fetch(src.as_uri(), dest2, "0" * 64)
    one_line(err)
    assert not dest2.exists() and not list((tmp_path / "out").glob("*.part"))


def test_offline_message(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError(OSError("Name or service not known"))

    monkeypatch.setattr(download.urllib.request, "urlopen", offline)
    with pytest.raises(DataError) as err:
        download.download("ml-1m", cache=tmp_path)
    msg = one_line(err)
    assert "cannot reach files.grouplens.org" in msg and "offline" in msg
    assert str(tmp_path / "ml-1m" / "ml-1m.zip") in msg and "SEQREC_DATA_DIR" in msg
    assert not list((tmp_path / "ml-1m").glob("*.part"))


def test_download_zip_then_load_from_cache(tmp_path, monkeypatch):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("ml-1m/ratings.dat", "1::10::5::100\n1::11::4::50\n2::10::3::70\n")
        zf.writestr("ml-1m/movies.dat", "10::Ten (1990)::Drama\n11::Eleven (1991)::Comedy\n")
    src = write(tmp_path / "ml-1m.zip", buf.getvalue())
    remote = download.Remote((src.as_uri(),), "ml-1m/ratings.dat")
    monkeypatch.setitem(download.REMOTES, "ml-1m", remote)
    target = download.download("ml-1m-ts")  # a dataset name maps to its original
    cache = tmp_path / "cache" / "ml-1m"
    assert target == cache / "ml-1m" / "ratings.dat"
    assert (cache / "ml-1m.zip.sha256").read_text().split()[0] == download._sha256(src)
    inter = load("ml-1m", root=tmp_path / "no-shared")  # shared file absent -> cached original
    assert inter.name == "ml-1m" and inter.has_time and inter.timestamp.tolist() == [100, 50, 70]
    assert inter.items["title"].tolist() == ["Ten (1990)", "Eleven (1991)"]
    # the recorded hash is enforced on the next download
    write(src, b"PK-not-the-same")
    with pytest.raises(DataError, match="sha256 mismatch"):
        download.download("ml-1m", force=True)


def _lrurec_pickle(tmp_path, data) -> Path:
    import pickle

    return write(tmp_path / "dataset.pkl", pickle.dumps(data))


def test_lrurec_pickle_keeps_its_order_and_original_ids(tmp_path, monkeypatch):
    # LRURec indices 1..n map back to the original ids; the order is train + val + test
    data = {
        "train": {1: [2, 1, 3], 2: [3, 2]},
        "val": {1: [1], 2: [1]},
        "test": {1: [2], 2: [3]},
        "umap": {10: 1, 20: 2},
        "smap": {100: 1, 200: 2, 300: 3},
    }
    src = _lrurec_pickle(tmp_path, data)
    remote = download.Remote((src.as_uri(),), "dataset.pkl", sha256=download._sha256(src))
    monkeypatch.setitem(download.REMOTES, "lrurec-ml1m", remote)
    download.download("ml-1m-lrurec")  # the dataset name maps to the pinned pickle
    inter = load("ml-1m-lrurec", root=tmp_path / "no-shared")
    assert inter.name == "ml-1m-lrurec" and not inter.has_time
    assert inter.user.tolist() == [10] * 5 + [20] * 4
    assert inter.item.tolist() == [200, 100, 300, 100, 200, 300, 200, 100, 300]


def test_lrurec_pickle_never_constructs_objects(tmp_path):
    import pickle

    from seqrec.data.sources.lrurec import read_preprocessed_pkl

    class Evil:
        def __reduce__(self):
            return (print, ("constructed",))

    bad = write(tmp_path / "evil.pkl", pickle.dumps({"train": Evil()}))
    with pytest.raises(DataError, match="refusing to load builtins.print"):
        read_preprocessed_pkl(bad)
    with pytest.raises(DataError, match="expected a dict with keys train"):
        read_preprocessed_pkl(_lrurec_pickle(tmp_path, {"train": {}}))
    with pytest.raises(DataError, match="missing from umap/smap"):
        read_preprocessed_pkl(
            _lrurec_pickle(
                tmp_path, {"train": {1: [5]}, "val": {}, "test": {}, "umap": {7: 1}, "smap": {9: 1}}
            )
        )


def test_download_refuses_unsafe_zip_and_unknown(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../evil.txt", "x")
    with pytest.raises(DataError, match="unsafe member"):
        download.extract_zip(write(tmp_path / "e.zip", buf.getvalue()), tmp_path / "into")
    assert not (tmp_path / "evil.txt").exists()
    with pytest.raises(UnknownNameError, match="downloadable: .*ml-100k"):
        download.download("lastfm")
    with pytest.raises(DataError, match="yelp.com/dataset"):
        download.download("yelp")


# --- shared files (real data, when present) ------------------------------------------------------------------
@needs_shared
def test_shared_ml1m():
    inter = load("ml-1m", root=SHARED)
    assert (len(inter), inter.n_users, inter.n_items) == (1000209, 6040, 3706)
    assert not inter.has_time and np.array_equal(inter.timestamp, np.arange(len(inter)))
    assert np.bincount(inter.rating.astype(int))[1:].tolist() == [
        56174,
        107557,
        261197,
        348971,
        226310,
    ]
    assert "Toy Story (1995)" in inter.items["title"].tolist()


@needs_shared
def test_shared_amazon_beauty():
    inter = load("amazon-beauty", root=SHARED)
    assert (len(inter), inter.n_users, inter.n_items) == (198502, 22363, 12101)
    assert inter.has_time and inter.timestamp.min() > 10**9


@needs_shared
def test_the_papers_own_file_layouts_read_as_the_registered_beauty(tmp_path):
    """Beauty written as the S3-Rec code keeps it (a user a line) and as the SASRec code does
    (`user item` lines), read by the generic reader, is the registered S3-Rec Beauty."""
    ref = load("amazon-beauty-s3rec", root=SHARED)
    order = np.lexsort((np.arange(len(ref)), ref.user))  # per user, in the file's order
    users, items = ref.user[order], ref.item[order]
    starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
    lines = [
        " ".join(map(str, [users[a], *items[a:b]]))
        for a, b in zip(starts, np.r_[starts[1:], len(users)], strict=True)
    ]
    (tmp_path / "Beauty.txt").write_text("\n".join(lines) + "\n")
    (tmp_path / "beauty_pairs.txt").write_text(
        "".join(f"{u} {i}\n" for u, i in zip(users, items, strict=True))
    )
    for name in ("Beauty.txt", "beauty_pairs.txt"):
        inter = load(str(tmp_path / name))
        assert len(inter) == len(ref) == 198502 and not inter.has_time
        assert np.array_equal(inter.user, users) and np.array_equal(inter.item, items)


@needs_shared
def test_shared_ml1m_raw_dat_agrees_with_seq_file():
    """The `::` parser on the raw ratings.dat part and the TSV parser agree on users 1-2999."""
    seq = load("ml-1m", root=SHARED)
    raw = load("ml-1m-ts", root=SHARED)
    assert (len(raw), raw.n_users, raw.n_items) == (487650, 2999, 3615) and raw.has_time
    part = seq.user < 3000

    def triples(u, i, r):
        return np.sort(u * 10**7 + i * 10 + r.astype(np.int64))

    assert np.array_equal(
        triples(seq.user[part], seq.item[part], seq.rating[part]),
        triples(raw.user, raw.item, raw.rating),
    )


def test_generic_json_lines_and_arrays_read_like_a_csv(tmp_path):
    """Event exports are often JSON: flat records read with the same roles, aliases, options."""
    records = [
        {"customer_id": "c1", "sku": "a", "ts": 1},
        {"customer_id": "c1", "sku": "b", "ts": 2},
        {"customer_id": "c2", "sku": "a", "ts": 3, "extra": {"nested": True}},
    ]
    lines = write(tmp_path / "events.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    array = write(tmp_path / "events.json", json.dumps(records))
    packed = tmp_path / "events.jsonl.xz"
    packed.write_bytes(lzma.compress(lines.read_bytes()))
    for path in (lines, array, packed):
        inter = load(path)
        assert len(inter) == 3 and inter.items["raw_id"][inter.item].tolist() == ["a", "b", "a"]
        assert "(user=customer_id, item=sku, timestamp=ts)" in inter.notes[0]
    ms = load(lines, columns={"item": "sku"}, timestamp_unit="ms")  # file options apply
    assert ms.timestamp.tolist() == [0, 0, 0]
    with pytest.raises(ConfigError, match="unknown option.*sep"):
        load(lines, sep=";")
    # an analytics export (Segment-style): nested objects become dotted columns
    segment = [
        {"userId": "u1", "properties": {"product_id": "p9", "price": 3.5}, "timestamp": 10},
        {"userId": "u1", "properties": {"product_id": "p4", "price": 1.0}, "timestamp": 11},
    ]
    nested = load(write(tmp_path / "segment.jsonl", "".join(json.dumps(r) + "\n" for r in segment)))
    assert nested.items["raw_id"][nested.item].tolist() == ["p9", "p4"]
    assert "(user=userId, item=properties.product_id, timestamp=timestamp)" in nested.notes[0]
    bad = write(
        tmp_path / "bad.jsonl", '{"user": "a", "item": 1, "ts": 1}\n{"user": "a" "item": 2}\n'
    )
    with pytest.raises(DataError, match="line 2 is not valid JSON"):
        load(bad)


def test_a_space_separated_file_without_header_gets_both_hints(tmp_path):
    path = write(tmp_path / "log.txt", "196 242 3.5 881250949\n186 302 4 891717742\n")
    with pytest.raises(DataError) as err:
        load(path)
    msg = one_line(err)
    assert "looks space-separated" in msg and "data.sep='space'" in msg
    assert (
        "does not look like column names" in msg and "data.names=user,item,timestamp,rating" in msg
    )
    inter = load(path, sep=" ", has_header=False, names=["user", "item", "rating", "timestamp"])
    assert len(inter) == 2


def test_space_separated_whole_numbers_are_sasrec_data_files(tmp_path):
    """SASRec's ml-1m.txt / Beauty.txt (BERT4Rec, S3-Rec alike): `user item` lines in each
    user's time order, no header, no time column: read in file order, every guess in a note.
    With a time column the same guess gives MovieLens' user, item, time."""
    inter = load(write(tmp_path / "ml-1m.txt", "1 10\n1 3\n2 3\n1 7\n2 10\n"))
    assert not inter.has_time and inter.item.tolist() == [10, 3, 3, 7, 10]
    assert (
        "read ml-1m.txt [space-separated] [no header line, columns taken as user,item] "
        "[no time column: the file order is the time order]"
    ) in inter.notes[0]
    timed = load(write(tmp_path / "log.txt", "196 242 881250949\n186 302 891717742\n"))
    assert timed.timestamp.tolist() == [881250949, 891717742]
    with pytest.raises(DataError, match="looks space-separated"):  # a datetime holds a space
        load(write(tmp_path / "t.txt", "u1 a 2020-01-01 10:00\nu1 b 2020-01-02 11:00\n"))
    s3rec = load(write(tmp_path / "Beauty.txt", "1 5 6 7\n2 6 8\n3 5 9 6 7\n"))  # a user a line
    assert s3rec.user.tolist() == [1, 1, 1, 2, 2, 3, 3, 3, 3] and s3rec.item.tolist()[:5] == [
        5,
        6,
        7,
        6,
        8,
    ]
    assert not s3rec.has_time and "S3-Rec's layout" in s3rec.notes[0]
    with pytest.raises(DataError, match="line 31 is not whole numbers"):  # past the sniffed lines
        load(write(tmp_path / "b.txt", "1 5 6 7\n2 6 8\n" * 15 + "3 x 9\n"))


def test_an_8_bit_file_is_read_as_windows_1252_and_damaged_utf8_is_named(tmp_path, caplog):
    """Excel's plain "CSV" on Windows is cp1252: read it (with a warning), not 'invalid utf-8'."""
    text = "user,item,timestamp\nu1,café,1\nu1,thé,2\nu2,café,3\n"
    path = tmp_path / "latin.csv"
    path.write_bytes(text.encode("cp1252"))
    with caplog.at_level("WARNING"):
        inter = load(path)
    assert sorted(set(inter.items["raw_id"].tolist())) == ["café", "thé"]
    assert "not UTF-8 (line 2): read as Windows-1252" in caplog.text
    damaged = tmp_path / "damaged.csv"
    damaged.write_bytes(text.encode("utf-8") + b"u3,caf\xe9,4\n")  # UTF-8 first, then one bad byte
    with pytest.raises(DataError, match="invalid UTF-8 at line 5"):
        load(damaged)


def test_head_lines_reads_the_first_lines_only():
    assert _io.head_lines(b"user,item\r\n1,2\n3,4\n", 2) == [b"user,item", b"1,2"]
    assert _io.head_lines(b"one line, no newline", 3) == [b"one line, no newline"]
    assert _io.head_lines(b"a\nb\n", 1) == [b"a"]


def test_amazon_reviews_23_items_are_their_parent_asin(tmp_path):
    # Reviews'23 lines carry both ids; the variant (asin) splits one product by colour and size
    records = [
        {
            "rating": 5.0,
            "user_id": "AG1",
            "asin": f"B{k}",
            "parent_asin": "P1",
            "timestamp": 1588615855070 + k * 1000,
        }
        for k in range(3)
    ]
    inter = load(
        write(tmp_path / "All_Beauty.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    )
    assert "item=parent_asin" in inter.notes[0] and inter.n_items == 1
