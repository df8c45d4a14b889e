"""Own data from the config: column mapping, separator, header-less files, time units,
file order without timestamps, item metadata, and milliseconds refused as seconds."""

import numpy as np
import polars as pl
import pytest

from seqrec.config import DataSection, load_experiment
from seqrec.data.preprocess import PreprocessConfig, preprocess
from seqrec.data.sources import load
from seqrec.errors import ConfigError, DataError
from seqrec.experiment import prepare_data, run_experiment
from seqrec.testing.synthetic import write_log_csv

COLS = "user=customer,item=sku,timestamp=event_ms"


def _load(section: DataSection):
    return load(section.name, **section.read_options())


def test_set_keys_build_the_reader_options(tmp_path):
    exp = load_experiment(
        None,
        [
            f"data.name={tmp_path}/x.csv",
            f"data.columns={COLS}",
            "data.sep=tab",
            "data.time_unit=ms",
            "data.names=a,b,c",
        ],
    )
    opts = exp.data.read_options()
    assert opts == {
        "columns": {"user": "customer", "item": "sku", "timestamp": "event_ms"},
        "sep": "\t",
        "timestamp_unit": "ms",
        "names": ["a", "b", "c"],
        "has_header": False,
    }
    assert DataSection().read_options() == {}  # named datasets get no options
    assert (
        DataSection(columns="user=u,timestamp=none").read_options()["columns"]["timestamp"] is None
    )


@pytest.mark.parametrize(
    "bad",
    [
        {"time_unit": "hours"},
        {"columns": "user"},
        {"columns": "user=a,=b"},
        {"item_columns": "title=t"},
    ],
)
def test_bad_data_keys_are_config_errors(bad):
    with pytest.raises(ConfigError) as err:
        DataSection(**bad)
    assert "\n" not in str(err.value)


def test_milliseconds_are_read_as_such_by_default_and_refused_as_explicit_seconds(tmp_path):
    write_log_csv(tmp_path / "log.csv", time_unit="ms")
    with pytest.raises(DataError) as err:
        _load(DataSection(name=str(tmp_path / "log.csv"), columns=COLS, time_unit="s"))
    msg = str(err.value)
    assert "milliseconds" in msg and "data.time_unit=ms" in msg and "event_ms" in msg
    for unit in ("auto", "ms"):
        inter = _load(DataSection(name=str(tmp_path / "log.csv"), columns=COLS, time_unit=unit))
        # 2021-01-01 .. a few days later, in seconds
        assert (
            1_609_459_200 <= inter.timestamp.min()
            and inter.timestamp.max() < 1_609_459_200 + 10 * 86400
        )
        implied = " (their size: past the year 5000 as seconds)" if unit == "auto" else ""
        assert f"timestamps read as milliseconds{implied}, stored as Unix seconds" in inter.notes


def test_units_agree_seconds_milliseconds_iso(tmp_path):
    got = {}
    for unit in ("s", "ms", "iso"):
        write_log_csv(tmp_path / f"{unit}.csv", time_unit=unit, seed=3)
        inter = _load(DataSection(name=str(tmp_path / f"{unit}.csv"), columns=COLS, time_unit=unit))
        order = np.lexsort((inter.item, inter.user))
        got[unit] = inter.timestamp[order]
    assert np.array_equal(got["s"], got["iso"])
    # milliseconds carry a sub-second jitter that flooring removes
    assert np.array_equal(got["s"], got["ms"])
    with pytest.raises(DataError, match="not dates"):
        _load(DataSection(name=str(tmp_path / "s.csv"), columns=COLS, time_unit="iso"))


def test_microseconds_and_nanoseconds_are_told_by_their_size(tmp_path):
    for unit, scale in (("us", 10**6), ("ns", 10**9)):
        path = tmp_path / f"{unit}.csv"
        path.write_text(
            f"user_id,item_id,timestamp\n1,2,{1609459200 * scale}\n1,3,{1609459201 * scale}\n"
        )
        with pytest.raises(
            DataError, match=f"{'micro' if unit == 'us' else 'nano'}seconds.*time_unit={unit}"
        ):
            load(path, timestamp_unit="s")
        assert (
            load(path).timestamp.tolist()
            == load(path, timestamp_unit=unit).timestamp.tolist()
            == [1609459200, 1609459201]
        )
    seconds = tmp_path / "s.csv"  # plain seconds stay seconds
    seconds.write_text("user_id,item_id,timestamp\n1,2,1609459200\n1,3,1609459201\n")
    assert load(seconds).timestamp.tolist() == [1609459200, 1609459201]
    assert not any("timestamps read as" in n for n in load(seconds).notes)


def test_file_order_without_timestamps_and_headerless_tab_file(tmp_path):
    path = tmp_path / "events.txt"
    path.write_text("u1\tb\nu1\ta\nu2\tc\nu1\tc\n")
    section = DataSection(
        name=str(path), names="who,what", columns="user=who,item=what,timestamp=none", sep="\\t"
    )
    inter = _load(section)
    assert not inter.has_time
    prepared = preprocess(inter, PreprocessConfig())
    seqs = prepared.sequences()
    first = seqs.items[seqs.offsets[0] : seqs.offsets[1]]
    assert list(prepared.vocab.decode(first)) == ["b", "a", "c"]  # file order, not sorted
    assert list(prepared.user_raw) == ["u1", "u2"]  # string user ids keep their text


def test_item_metadata_file_gives_titles_and_categories(tmp_path):
    write_log_csv(tmp_path / "log.csv", time_unit="s")
    (tmp_path / "items.csv").write_text(
        "product,name,tags\nsku1,First thing,a|b\nsku2,Second,c\nnot-in-log,Other,x\n"
    )
    exp = load_experiment(
        None,
        [
            f"data.name={tmp_path / 'log.csv'}",
            f"data.columns={COLS}",
            f"data.item_file={tmp_path / 'items.csv'}",
            "data.item_columns=item=product,title=name,categories=tags",
        ],
    )
    prepared = prepare_data(exp).prepared
    vocab = prepared.vocab
    one, two, three = vocab.encode(["sku1", "sku2", "sku3"])
    assert vocab.title(one) == "First thing" and vocab.category(one) == "a|b"
    # the categories are item attributes too (what LSAN reads): a, b for sku1, c for sku2
    attrs = prepared.interactions.item_attributes
    assert attrs is not None and sorted(attrs.item.tolist()) == sorted([one, one, two])
    assert vocab.title(two) == "Second" and vocab.category(two) == "c"
    assert vocab.title(three) is None and vocab.category(three) is None
    with pytest.raises(DataError, match="no column 'nope'"):
        load(
            tmp_path / "log.csv",
            columns={"user": "customer", "item": "sku", "timestamp": "event_ms"},
            item_file=tmp_path / "items.csv",
            item_columns={"title": "nope"},
        )


def test_integer_ids_match_metadata_by_text(tmp_path):
    (tmp_path / "r.csv").write_text("user_id,item_id,timestamp\n1,10,5\n1,20,6\n2,10,7\n")
    (tmp_path / "m.csv").write_text("item_id,title\n10,Ten\n30,Thirty\n")
    prepared = preprocess(load(tmp_path / "r.csv", item_file=tmp_path / "m.csv"))
    ten, twenty = prepared.vocab.encode([10, 20])
    assert prepared.vocab.title(ten) == "Ten" and prepared.vocab.title(twenty) is None
    openpyxl = pytest.importorskip("openpyxl")  # the same item table as a workbook
    book = openpyxl.Workbook()
    for row in (["item_id", "title"], [10, "Ten"], [30, "Thirty"]):
        book.active.append(row)
    book.save(tmp_path / "m.xlsx")
    prepared = preprocess(load(tmp_path / "r.csv", item_file=tmp_path / "m.xlsx"))
    assert prepared.vocab.title(prepared.vocab.encode([10])[0]) == "Ten"


def test_preprocessing_records_removed_items_and_users(tmp_path):
    info = write_log_csv(tmp_path / "log.csv", time_unit="s", rare_items=3)
    exp = load_experiment(None, [f"data.name={tmp_path / 'log.csv'}", f"data.columns={COLS}"])
    prepared = prepare_data(exp).prepared
    assert sorted(prepared.vocab.removed.tolist()) == sorted(info["rare"])
    assert all(prepared.vocab.is_removed(r) for r in info["rare"])
    assert not prepared.vocab.is_removed("sku1") and not prepared.vocab.is_removed("ghost")


def test_reproduction_identities_recorded_before_the_read_keys_still_match():
    """Results stored by `seqrec reproduce` before these keys existed are not invalidated."""
    from seqrec.config import Experiment
    from seqrec_lab.runner import identity
    from seqrec_lab.spec import RunSpec

    old_keys = {"name", "root", "min_rating", "dedup", "filter", "min_item", "min_user"}
    spec = RunSpec("r", "r", 0, Experiment(data=DataSection(name="amazon-beauty")))
    assert set(identity(spec, "f")["data"]) == old_keys
    changed = DataSection(name="x.csv", time_unit="ms", columns="user=u").identity()
    assert changed["time_unit"] == "ms" and changed["columns"] == "user=u"


def test_missing_timestamp_column_hint_names_the_config_key(tmp_path):
    path = tmp_path / "no-time.csv"
    path.write_text("user_id,item_id\n1,2\n1,3\n")
    with pytest.raises(DataError, match="data.columns=timestamp=<name> or timestamp=none"):
        _load(DataSection(name=str(path)))
    inter = _load(DataSection(name=str(path), columns="timestamp=none"))
    assert not inter.has_time and inter.item.tolist() == [2, 3]


def test_a_file_too_small_to_split_is_refused_before_training_with_the_reason(tmp_path):
    # two users with 2 and 1 interactions: the 5-core filter empties the file (the error says how
    # to switch it off), and without the filter leave-last-out has no validation targets
    path = tmp_path / "tiny.csv"
    path.write_text("user,item,timestamp\n1,10,5\n1,11,6\n2,10,7\n")
    with pytest.raises(DataError, match="5-core.*data.filter=none"):
        prepare_data(load_experiment(None, [f"data.name={path}"]))
    with pytest.raises(
        DataError, match="no validation targets.*2 users.*longest history 2.*at least 3"
    ):
        prepare_data(load_experiment(None, [f"data.name={path}", "data.filter=none"]))
    path.write_text(path.read_text() + "1,12,8\n")  # user 1 now has 3: one target each
    split = prepare_data(load_experiment(None, [f"data.name={path}", "data.filter=none"])).split
    assert len(split.valid) == len(split.test) == 1
    # ... but no training pair: a sequential model is refused with the reason, Pop still trains
    with pytest.raises(DataError, match="longest has 1.*at least 4 to leave a training pair.*pop"):
        run_experiment(
            load_experiment(None, [f"data.name={path}", "data.filter=none", "model.name=sasrec"])
        )
    _, record = run_experiment(
        load_experiment(None, [f"data.name={path}", "data.filter=none", "model.name=pop"])
    )
    assert record["metrics"]["test"]


def test_a_semicolon_csv_is_read_with_a_note_and_an_ambiguous_one_names_the_separator(tmp_path):
    """Excel in European locales saves "CSV" with ';': read it when every line agrees."""
    path = tmp_path / "log.csv"
    path.write_text("user;item;timestamp\n1;2;10\n1;3;11\n2;3;12\n")
    inter = load(str(path))
    assert inter.item.tolist() == load(str(path), sep=";").item.tolist() == [2, 3, 3]
    assert any("[semicolon-separated]" in n for n in inter.notes)
    path.write_text("user;item;timestamp\n1;2;10\n1;3;11;x\n2;3;12\n")  # lines disagree: no guess
    with pytest.raises(DataError, match=r"looks ;-separated; pass sep=';' .*data\.sep=';'"):
        load(str(path))


def test_a_file_without_a_header_line_is_read_in_the_movielens_layout(tmp_path):
    """First line all numbers / dates: data, read as user, item[, rating], time, with a note."""
    path = tmp_path / "log.tsv"
    path.write_text("7\t10\t1700000000\n7\t11\t1700000060\n8\t10\t1700000001\n")
    inter = load(str(path))
    assert (inter.user.tolist(), inter.item.tolist()) == ([7, 7, 8], [10, 11, 10])
    assert inter.timestamp.tolist() == [1700000000, 1700000060, 1700000001]
    assert any("no header line, columns taken as user,item,timestamp" in n for n in inter.notes)
    path.write_text("7\t10\t4\t1700000000\n7\t11\t5\t1700000060\n")  # u.data: rating third
    inter = load(str(path))
    assert inter.rating.tolist() == [4, 5] and inter.timestamp.tolist() == [1700000000, 1700000060]
    renamed = tmp_path / "ml-100k.u.data"  # u.data renamed: '.data' is tab-separated text
    renamed.write_text(path.read_text())
    assert load(str(renamed)).rating.tolist() == [4, 5]
    path.write_text("7,10,2024-01-02\n7,11,2024-01-03\n")
    assert (
        load(str(path), sep=",").timestamp.tolist()[1]
        - load(str(path), sep=",").timestamp.tolist()[0]
        == 86400
    )
    path.write_text("7\t10\t4\n7\t11\t5\n")  # a rating, not a time: no guess, the names hint
    with pytest.raises(DataError, match="data.names=a,b,c"):
        load(str(path))
    path.write_text("u7\t10\t1700000000\n")  # letters: a header line, read as one
    with pytest.raises(DataError, match="no user column"):
        load(str(path))


def test_utf16_spreadsheet_text_is_read_and_binary_files_are_named(tmp_path):
    # Excel's 'Unicode Text' is UTF-16 with a byte-order mark; its rows must read as UTF-8 would
    text = "user\titem\ttimestamp\n1\t10\t100\n1\t11\t101\n2\t10\t102\n"
    (tmp_path / "u16.tsv").write_bytes(text.encode("utf-16"))
    (tmp_path / "u8.tsv").write_text(text)
    a, b = load(str(tmp_path / "u16.tsv")), load(str(tmp_path / "u8.tsv"))
    assert list(a.item) == list(b.item) and list(a.timestamp) == list(b.timestamp)
    import zipfile

    with zipfile.ZipFile(tmp_path / "book.csv", "w") as z:  # an .xlsx is a zip archive
        z.writestr("sheet.xml", "x" * 100)
    with pytest.raises(DataError, match="not a text table .*binary"):
        load(str(tmp_path / "book.csv"))
    (tmp_path / "book.xls").write_bytes((tmp_path / "book.csv").read_bytes())  # old Excel: not read
    with pytest.raises(DataError, match="a spreadsheet: save it as CSV"):
        load(str(tmp_path / "book.xls"))
    (tmp_path / "book.xlsx").write_bytes((tmp_path / "book.csv").read_bytes())  # a damaged workbook
    with pytest.raises(DataError, match="book.xlsx"):
        load(str(tmp_path / "book.xlsx"))


def test_an_xlsx_workbook_reads_its_first_sheet(tmp_path, monkeypatch):
    """UCI Online Retail's layout (CustomerID, StockCode with letters, InvoiceDate) in a workbook
    with a second sheet; without openpyxl the answer says what to do."""
    import datetime as dt
    import sys

    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Orders"
    sheet.append(["CustomerID", "StockCode", "InvoiceDate"])
    rows = [
        (12346, 85123, dt.datetime(2024, 1, 1, 10)),
        (12346, "85123A", dt.datetime(2024, 1, 2, 9)),
        (12347, 85123, dt.datetime(2024, 1, 1, 11)),
    ]
    for row in rows:
        sheet.append(list(row))
    book.create_sheet("Notes").append(["not data"])
    book.save(tmp_path / "retail.xlsx")
    inter = load(str(tmp_path / "retail.xlsx"))
    assert inter.user.tolist() == [12346, 12346, 12347]  # integer ids kept
    assert inter.items["raw_id"].tolist() == ["85123", "85123A"]
    assert inter.timestamp.tolist() == [1704103200, 1704186000, 1704106800]
    assert any("[sheet 'Orders', the first of 2]" in n for n in inter.notes)
    monkeypatch.setitem(sys.modules, "openpyxl", None)  # not installed
    with pytest.raises(DataError, match="save it as CSV, or install openpyxl"):
        load(str(tmp_path / "retail.xlsx"))


def test_an_in_memory_table_reads_like_the_same_file(tmp_path):
    import datetime as dt

    import polars as pl

    frame = pl.DataFrame(
        {
            "customer": ["a", "a", "b", "b", "c"],
            "sku": [10, 11, 11, 12, 10],
            "when": [dt.datetime(2020, 1, 1, h) for h in (1, 2, 1, 3, 5)],
        }
    )
    cols = {"user": "customer", "item": "sku", "timestamp": "when"}
    frame.write_csv(tmp_path / "log.csv")
    from_file, from_frame = load(str(tmp_path / "log.csv"), columns=cols), load(frame, columns=cols)
    for field in ("user", "item", "timestamp"):
        assert np.array_equal(getattr(from_file, field), getattr(from_frame, field)), field
    as_dict = load({"user": [1, 1, 2], "item": ["x", "y", "x"], "timestamp": [3, 4, 5]})
    assert len(as_dict.item) == 3
    with pytest.raises(DataError, match="column 'user' is empty"):
        load({"user": [1, None], "item": [1, 2], "timestamp": [1, 2]})
    with pytest.raises(DataError, match="no timestamp column"):
        load({"user": [1], "item": [2]})
    with pytest.raises(DataError, match="expected a Polars or pandas DataFrame"):
        load(42)


def test_slash_dates_are_read_in_the_order_the_values_allow_and_ambiguity_is_refused(tmp_path):
    def log(*times):
        path = tmp_path / "log.csv"
        path.write_text(
            "user,item,timestamp\n" + "".join(f"1,{i},{t}\n" for i, t in enumerate(times))
        )
        return str(path)

    import datetime as dt

    def utc(*args):
        return int(dt.datetime(*args, tzinfo=dt.timezone.utc).timestamp())

    # a 13th in the first field: day first, for every row (also 05/03, which alone is ambiguous)
    assert list(load(log("13/02/2020", "05/03/2020")).timestamp) == [
        utc(2020, 2, 13),
        utc(2020, 3, 5),
    ]
    assert list(load(log("02/13/2020 10:30", "03/05/2020 08:00")).timestamp) == [
        utc(2020, 2, 13, 10, 30),
        utc(2020, 3, 5, 8, 0),
    ]
    with pytest.raises(
        DataError,
        match=r"column 'timestamp': dates like '01/02/2020' read as "
        r"day/month and as month/day alike; set .*time_format",
    ):
        load(log("01/02/2020", "03/04/2020"))
    path = log("01/02/2020", "03/04/2020")
    assert list(load(path, time_format="%m/%d/%Y").timestamp) == [utc(2020, 1, 2), utc(2020, 3, 4)]
    with pytest.raises(DataError, match="got '31/02/2020' at line 3"):  # no such day
        load(log("13/02/2020", "31/02/2020"))
    with pytest.raises(DataError, match="got '02/13/2020' at line 3"):  # orders mixed in one file
        load(log("13/02/2020", "02/13/2020"))


def test_repeated_header_lines_of_joined_files_are_skipped_with_a_warning(tmp_path, caplog):
    """`cat jan.csv feb.csv > log.csv` repeats the header; it is not a row ('timestamp' is no time)."""
    part = "user,item,timestamp\r\n1,2,10\r\n1,3,11\r\n"
    path = tmp_path / "log.csv"
    path.write_text(part + part.replace("1,", "2,"), newline="")
    with caplog.at_level("WARNING"):
        inter = load(str(path))
    assert inter.user.tolist() == [1, 1, 2, 2] and inter.item.tolist() == [2, 3, 2, 3]
    assert "skipped 1 repeated header line(s), the first at line 4" in caplog.text
    caplog.clear()
    path.write_text(part)  # one header: nothing said, nothing copied
    with caplog.at_level("WARNING"):
        assert load(str(path)).item.tolist() == [2, 3]
    assert "header" not in caplog.text


def test_rows_with_an_empty_user_item_or_time_are_skipped_with_a_warning(tmp_path, caplog):
    """An export's guest checkouts (no customer) or deleted products: skipped and counted, not
    a stop; when half the rows or more are empty the column is suspect and the error stays."""
    path = tmp_path / "orders.csv"
    path.write_text("customer,sku,ts\n1,a,10\n,b,11\n1,c,12\n2,a,13\n2,,14\n2,c,\n3,a,16\n")
    with caplog.at_level("WARNING"):
        inter = load(str(path))
    assert inter.user.tolist() == [1, 1, 2, 3] and inter.timestamp.tolist() == [10, 12, 13, 16]
    note = "3 of 7 rows skipped: an empty user, item or time (customer 1, sku 1, ts 1; the first at line 3)"
    assert note in inter.notes and note in caplog.text
    path.write_text("customer,sku,ts\n1,a,10\n,b,11\n,c,12\n2,a,13\n")
    with pytest.raises(
        DataError, match="column 'customer' is empty at line 3 \\(2 empty values\\)"
    ):
        load(str(path))


def test_a_folder_of_part_files_reads_as_one_log(tmp_path):
    """Spark / Hive output (part-*.parquet, _SUCCESS) or monthly CSV exports: one log, in name
    order; a bad value is named by its part and that part's line."""
    whole = "user,item,timestamp\nu1,a,1\nu1,b,2\nu2,a,3\nu2,c,4\nu3,b,5\n"
    expected = load(write_text(tmp_path / "whole.csv", whole))
    parts = tmp_path / "export"
    parts.mkdir()
    lines = whole.splitlines()
    write_text(parts / "part-0.csv", "\n".join(lines[:3]) + "\n")
    write_text(parts / "part-1.csv.gz", None, gzip_text="\n".join([lines[0], *lines[3:]]) + "\n")
    write_text(parts / "_SUCCESS", "")
    inter = load(str(parts))
    assert (inter.user.tolist(), inter.item.tolist(), inter.timestamp.tolist()) == (
        expected.user.tolist(),
        expected.item.tolist(),
        expected.timestamp.tolist(),
    )
    assert any(
        n.startswith("read 2 part files of export/ (part-0.csv .. part-1.csv.gz)")
        for n in inter.notes
    )
    pq = tmp_path / "pq"
    pq.mkdir()
    frame = pl.read_csv(tmp_path / "whole.csv")
    frame[:2].write_parquet(pq / "part-00000.parquet")
    frame[2:].write_parquet(pq / "part-00001.parquet")
    assert load(str(pq)).timestamp.tolist() == expected.timestamp.tolist()
    write_text(
        parts / "part-2.csv", "timestamp,user,item\n6,u4,a\n7,u4,b\n"
    )  # same columns, reordered
    assert load(str(parts)).timestamp.tolist()[-2:] == [6, 7]
    write_text(parts / "part-2.csv", "user,item,timestamp\nu4,a,6\nu4,b,later\n")
    with pytest.raises(DataError, match="got 'later' at line 3 of part-2.csv"):
        load(str(parts))
    write_text(parts / "part-2.csv", "customer,sku\n1,2\n")
    with pytest.raises(DataError, match="part-2.csv"):
        load(str(parts))
    (parts / "part-2.csv").unlink()
    with pytest.raises(ConfigError, match="timestamp_unit must be one of"):  # read_file's checks
        load(str(parts), timestamp_unit="hours")
    write_text(parts / "notes.md", "x")
    with pytest.raises(DataError, match="not a folder of part files of one log.*notes.md"):
        load(str(parts))


def write_text(path, text, gzip_text=None):
    import gzip

    if gzip_text is not None:
        path.write_bytes(gzip.compress(gzip_text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize("without_pyarrow", [False, True])
def test_a_pandas_frame_with_category_nullable_and_tz_columns(without_pyarrow, monkeypatch):
    """A notebook's pandas frame (H&M's customer_id / article_id / t_dat): category ids, a
    nullable Int64 column with a gap, tz-aware dates; pyarrow (not a dependency) or not."""
    pd = pytest.importorskip("pandas")
    from seqrec.data.sources import generic

    if without_pyarrow:  # what pl.from_pandas raises for such columns when pyarrow is missing

        def no_pyarrow(frame):
            raise ImportError("pyarrow is required for converting a pandas dataframe to Polars")

        monkeypatch.setattr(generic.pl, "from_pandas", no_pyarrow)
    frame = pd.DataFrame(
        {
            "customer_id": pd.Series(["a", "a", "b", "b", "b"], dtype="category"),
            "article_id": pd.Series([10, 11, None, 10, 12], dtype="Int64"),
            "t_dat": pd.to_datetime(
                ["2024-01-01", "2024-01-02", "2024-01-01", "2024-01-03", "2024-01-04"]
            ).tz_localize("UTC"),
        }
    )
    inter = load(frame)
    assert inter.item.tolist() == [10, 11, 10, 12] and inter.user.tolist() == [0, 0, 1, 1]
    assert inter.timestamp.tolist() == [1704067200, 1704153600, 1704240000, 1704326400]
    assert (
        "read the frame table (user=customer_id, item=article_id, timestamp=t_dat)" in inter.notes
    )


def test_a_pandas_frame_whose_float_id_column_has_blanks_skips_those_rows(monkeypatch):
    """pd.read_csv of Online Retail: CustomerID is float64 with NaN for guest checkouts; the
    rows are skipped as a file's empty ids are (pyarrow is not a dependency, so the frame goes
    through the numpy path), and a table's bad value is named by its row, not a line."""
    pd = pytest.importorskip("pandas")
    from seqrec.data.sources import generic

    def no_pyarrow(frame):
        raise ImportError("pyarrow is required for converting a pandas dataframe to Polars")

    monkeypatch.setattr(generic.pl, "from_pandas", no_pyarrow)
    frame = pd.DataFrame(
        {
            "CustomerID": [12346.0, None, 12346.0, 12347.0, 12347.0],
            "StockCode": ["85123A", "71053", "71053", "22423", "85123A"],
            "InvoiceDate": ["12/13/2010 8:26"] * 2 + ["12/14/2010 9:00"] * 3,
        }
    )
    inter = load(frame)
    assert inter.user.tolist() == [12346, 12346, 12347, 12347] and len(inter) == 4
    assert any("1 of 5 rows skipped" in n and "the first at row 2" in n for n in inter.notes)
    frame["StockCode"] = [None, None, None, 4, 5]  # half or more empty: the error stays
    frame["CustomerID"] = [1.0, 2.0, 2.5, 3.0, 4.0]
    with pytest.raises(DataError, match=r"got 2\.5 at row 3 \(1-based\)"):
        load(frame.assign(StockCode=[1, 2, 3, 4, 5]))


def test_lists_of_records_or_tuples_and_lazy_frames_read_like_a_table():
    rows = [("a", "x", 3), ("a", "y", 4), ("b", "x", 5)]
    expected = load({"user": ["a", "a", "b"], "item": ["x", "y", "x"], "timestamp": [3, 4, 5]})
    records = [{"customer": u, "sku": i, "ts": t} for u, i, t in rows]
    for given in (rows, records, pl.DataFrame(records).lazy()):
        inter = load(given)
        assert (inter.user.tolist(), inter.item.tolist(), inter.timestamp.tolist()) == (
            expected.user.tolist(),
            expected.item.tolist(),
            expected.timestamp.tolist(),
        ), type(given)
    assert load([(1, 2, 5, 100), (1, 3, 4, 101)]).rating.tolist() == [
        5,
        4,
    ]  # user, item, rating, time
    with pytest.raises(DataError, match="rows as tuples must all be"):
        load([(1, 2, 3), (1, 2)])
    with pytest.raises(DataError, match="a list of records"):
        load([1, 2, 3])


def test_whole_numbers_written_as_decimals_are_integer_ids(tmp_path, caplog):
    """pandas writes an integer column with a gap as floats: 12346.0 is user 12346 (else
    `seqrec recommend --user 12346` would not find it); 1.5 stays a text id."""
    path = tmp_path / "export.csv"
    path.write_text(
        "CustomerID,StockCode,InvoiceDate\n12346.0,85123A,1\n12347.0,71053,2\n12346.0,71053,3\n"
    )
    with caplog.at_level("WARNING"):
        inter = load(str(path))
    assert inter.user.tolist() == [12346, 12347, 12346]
    assert "whole numbers written as decimals (12346.0)" in caplog.text
    assert load({"user": ["1.5", "2.0"], "item": [1, 2], "timestamp": [1, 2]}).user.tolist() == [
        0,
        1,
    ]


def test_a_zip_archive_as_downloaded_is_read(tmp_path):
    """Kaggle / GroupLens downloads: the one log inside (README and macOS metadata ignored), a
    folder of parts, or a MovieLens folder; several unrelated logs are named; errors name the
    archive's member, not a temporary folder."""
    import zipfile

    log = "user,item,timestamp\nu1,a,1\nu1,b,2\nu2,a,3\n"
    with zipfile.ZipFile(tmp_path / "kaggle.zip", "w") as z:
        z.writestr("data/events.csv", log)
        z.writestr("README.txt", "about the data")
        z.writestr("__MACOSX/data/._events.csv", "x")
    inter = load(str(tmp_path / "kaggle.zip"))
    assert inter.name == "kaggle" and inter.item.tolist() == [0, 1, 0]
    with zipfile.ZipFile(tmp_path / "ml.zip", "w") as z:
        z.writestr(
            "ml-mini/ratings.csv",
            "userId,movieId,rating,timestamp\n1,1,4.0,9\n1,3,4.0,10\n2,1,3.0,11\n",
        )
    assert load(str(tmp_path / "ml.zip")).item.tolist() == [1, 3, 1]
    with zipfile.ZipFile(tmp_path / "two.zip", "w") as z:
        z.writestr("a/x.csv", log)
        z.writestr("b/y.csv", log)
    with pytest.raises(DataError, match="two.zip: expected one log file .* found a/x.csv, b/y.csv"):
        load(str(tmp_path / "two.zip"))
    with zipfile.ZipFile(tmp_path / "bad.zip", "w") as z:
        z.writestr("log.csv", "user,item,timestamp\nu1,a,soon\n")
    with pytest.raises(DataError, match=r"^.*bad.zip: log.csv: column 'timestamp'") as err:
        load(str(tmp_path / "bad.zip"))
    assert "seqrec-zip-" not in str(err.value)


def test_recbole_atomic_files_are_read_with_their_item_file(tmp_path):
    """RecBole's dataset hub: NAME.inter (tab, "name:type" header) beside NAME.item (titles as
    token_seq keep their spaces, genres as token_seq become categories) and NAME.user; the
    file, its folder and a zip of the folder read alike."""
    import zipfile

    folder = tmp_path / "ml-mini"
    folder.mkdir()
    inter = (
        "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"
        "1\t10\t4.0\t881250949\n1\t20\t3.0\t881250950\n2\t10\t5.0\t881250951\n"
    )
    item = (
        "item_id:token\tmovie_title:token_seq\trelease_year:token\tgenre:token_seq\n"
        "10\tToy Story\t1995\tAnimation Children's Comedy\n20\tJumanji\t1995\tAdventure\n"
    )
    (folder / "ml-mini.inter").write_text(inter)
    (folder / "ml-mini.item").write_text(item)
    (folder / "ml-mini.user").write_text("user_id:token\tage:token\n1\t24\n2\t53\n")
    with zipfile.ZipFile(tmp_path / "ml-mini.zip", "w") as z:
        for f in folder.iterdir():
            z.write(f, f"ml-mini/{f.name}")
    for given in (folder / "ml-mini.inter", folder, tmp_path / "ml-mini.zip"):
        log = load(str(given))
        assert log.item.tolist() == [10, 20, 10] and log.timestamp.tolist()[0] == 881250949
        assert log.rating.tolist() == [4.0, 3.0, 5.0]
        assert "RecBole atomic header" in log.notes[0] and "user=user_id" in log.notes[0]
        assert log.items["title"].tolist() == ["Toy Story", "Jumanji"]
        assert log.items["genres"].tolist() == ["Animation|Children's|Comedy", "Adventure"]


def test_one_row_per_user_with_lists_is_exploded_into_interactions(tmp_path):
    """generative-recommenders' sasrec_format.csv (quoted "a,b,c" lists aligned across
    columns), a pandas frame of Python lists saved by to_csv ("[1, 2]"), JSON arrays."""
    import json

    hstu = (
        "index,user_id,sequence_item_ids,sequence_ratings,sequence_timestamps\n"
        '0,1,"3186,1721,1270","4,4,5","978300019,978300055,978300056"\n'
        '1,2,"1198,1210","5,4","978298124,978298151"\n'
    )
    log = load(str(write_text(tmp_path / "sasrec_format.csv", hstu)))
    assert log.item.tolist() == [3186, 1721, 1270, 1198, 1210] and log.user.tolist() == [
        1,
        1,
        1,
        2,
        2,
    ]
    assert log.timestamp.tolist()[:2] == [978300019, 978300055] and log.rating.tolist()[2] == 5.0
    assert any("2 rows exploded into 5 interactions" in n for n in log.notes)
    listed = load(
        str(write_text(tmp_path / "pandas.csv", 'user,items\nu1,"[10, 20, 30]"\nu2,"[20]"\n'))
    )
    assert listed.item.tolist() == [10, 20, 30, 20] and not listed.has_time
    assert any("the order of each list is its time order" in n for n in listed.notes)
    records = [
        {"user": "a", "items": ["x", "y"], "timestamps": [5, 6]},
        {"user": "b", "items": ["y"], "timestamps": [7]},
    ]
    arrays = load(
        str(write_text(tmp_path / "s.jsonl", "".join(json.dumps(r) + "\n" for r in records)))
    )
    assert arrays.timestamp.tolist() == [5, 6, 7] and len(arrays) == 3
    bad = hstu.replace('"4,4,5"', '"4,4"')
    with pytest.raises(
        DataError,
        match="row 1 lists 3 items in 'sequence_item_ids' but 2 values in 'sequence_ratings'",
    ):
        load(str(write_text(tmp_path / "bad.csv", bad)))


def test_spaces_around_header_names_are_not_part_of_them(tmp_path):
    path = tmp_path / "hand.csv"
    path.write_text(" customer , sku ,ts \r\nc1,a,1\r\nc1,b,2\r\n")
    for columns in (None, {"user": "customer", "item": "sku", "timestamp": "ts"}):
        inter = load(str(path), columns=columns)
        assert inter.timestamp.tolist() == [1, 2]
        assert "read hand.csv (user=customer, item=sku, timestamp=ts)" in inter.notes


def test_a_column_of_mixed_time_units_is_refused_with_its_rows(tmp_path):
    """Half seconds, half milliseconds was read whole as milliseconds: half the rows in 1970."""
    path = tmp_path / "mixed.csv"
    path.write_text(
        "user_id,item_id,timestamp\n1,2,1609459200\n1,3,1609459201000\n2,2,1609459300\n"
        "2,3,1609459301000\n"
    )
    with pytest.raises(DataError) as err:
        load(path)
    msg = str(err.value)
    assert (
        "mixes time units" in msg and "2 look like seconds (the first at line 2: 1609459200)" in msg
    )
    assert (
        "2 look like milliseconds (the first at line 3: 1609459201000)" in msg and "\n" not in msg
    )
    assert load(path, timestamp_unit="ms").timestamp.min() < 10**7  # asked for: read as told
    parquet = tmp_path / "mixed.parquet"
    pl.read_csv(path).write_parquet(parquet)
    with pytest.raises(DataError, match="mixes time units"):
        load(parquet)
    from seqrec.data.parquet import NeedsEagerRead, prepare_parquet

    with pytest.raises(NeedsEagerRead, match="mixes numbers of different time units"):
        prepare_parquet(parquet, PreprocessConfig(filter="none"))


def test_mixed_units_property(tmp_path_factory):
    """Any mixture of s / ms / us / ns in one column: the right times or a one-line error,
    never a silent mis-read."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    scale = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}

    @settings(
        max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        st.lists(
            st.tuples(st.integers(10**8, 4 * 10**9), st.sampled_from(sorted(scale))),
            min_size=1,
            max_size=12,
        )
    )
    def check(rows):
        path = tmp_path_factory.mktemp("mix") / "log.csv"
        lines = [f"{i % 3},{i},{sec * scale[unit]}" for i, (sec, unit) in enumerate(rows)]
        path.write_text("user_id,item_id,timestamp\n" + "\n".join(lines) + "\n")
        try:
            inter = load(path)
        except DataError as exc:
            assert "\n" not in str(exc)
            assert len({u for _, u in rows}) > 1, f"one unit refused: {exc}"
            return
        truth = {(i % 3, i): sec for i, (sec, _) in enumerate(rows)}
        got = {
            (int(u), int(it)): int(t)
            for u, it, t in zip(inter.user, inter.item, inter.timestamp, strict=True)
        }
        assert got == truth

    check()


def test_yoochoose_clicks_without_a_header(tmp_path):
    """session, ISO time, item, category: the text category ('S') was guessed as a rating and
    the 9-digit item as the time; the category is now named among the ignored columns."""
    path = tmp_path / "clicks.dat"
    path.write_text(
        "1,2014-04-07T10:51:09.277Z,214536502,0\n1,2014-04-07T10:54:09.868Z,214536500,0\n"
        "2,2014-04-07T13:56:37.614Z,214662742,S\n2,2014-04-07T13:57:19.373Z,214662743,S\n"
    )
    inter = load(path)
    assert sorted(set(inter.item.tolist())) == [214536500, 214536502, 214662742, 214662743]
    assert inter.timestamp.min() == 1396867869  # 2014-04-07 10:51:09 UTC
    assert any("columns taken as user,timestamp,item,category" in n for n in inter.notes)
    assert "ignored column: category" in inter.notes


def test_classic_mac_line_endings(tmp_path):
    """CR alone ended each line: the file was 'a header but no rows'."""
    path = tmp_path / "mac.csv"
    path.write_bytes(b"user_id,item_id,timestamp\r1,2,1609459200\r1,3,1609459201\r")
    inter = load(path)
    assert inter.item.tolist() == [2, 3] and any("CR alone" in n for n in inter.notes)


def test_dates_with_and_without_a_zone_name_one_of_each(tmp_path):
    path = tmp_path / "tz.csv"
    path.write_text(
        "user_id,item_id,timestamp\n1,2,2020-01-01T10:00:00\n1,3,2020-01-01T11:00:00+02:00\n"
    )
    with pytest.raises(
        DataError,
        match=r"mixes dates with a time zone and dates without one "
        r"\('2020-01-01T11:00:00\+02:00' at line 3, '2020-01-01T10:00:00' at line 2\)",
    ):
        load(path)
    path.write_text(
        "user_id,item_id,timestamp\n1,2,2020-01-01T10:00:00Z\n1,3,2020-01-01T11:00:00+02:00\n"
    )
    assert load(path).timestamp.tolist() == [1577872800, 1577869200]  # both zones honoured


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_lists_under_a_one_item_name(tmp_path, kind):
    """A one-row-per-user table whose list column is called item_id ('got List(Int64)')."""
    frame = pl.DataFrame({"user_id": [1, 2], "item_id": [[1, 2, 3], [2, 3]]})
    path = tmp_path / f"seq.{kind}"
    if kind == "parquet":
        frame.write_parquet(path)
    else:
        path.write_text('user_id,item_id\n1,"[1, 2, 3]"\n2,"[2, 3]"\n')
    inter = load(path)
    assert inter.item.tolist() == [1, 2, 3, 2, 3]
    assert any(n.startswith("one row per user with lists (item_id)") for n in inter.notes)


def test_a_header_naming_a_column_twice_is_said(tmp_path):
    """Two columns of one name: the first was used without a note."""
    path = tmp_path / "dup.csv"
    path.write_text("user_id,item_id,timestamp,item_id\n1,2,1609459200,9\n1,3,1609459201,8\n")
    inter = load(path)
    assert inter.item.tolist() == [2, 3]
    assert (
        "ignored column: item_id_duplicated_0 (the header names 'item_id' twice; the first one is the item)"
        in inter.notes
    )
