"""Lazy Parquet preprocessing equals the eager pipeline, for a file and a partitioned dataset."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from seqrec.config import load_experiment
from seqrec.data.interactions import Interactions
from seqrec.data.parquet import is_parquet, prepare_parquet, scan
from seqrec.data.preprocess import PreprocessConfig, preprocess
from seqrec.data.sources.generic import read_file
from seqrec.errors import DataError
from seqrec.experiment import prepare_data


def _log(n: int = 6000, seed: int = 0) -> pl.DataFrame:
    """Skewed users and items, many same-second ties, repeated pairs, ratings 1..5."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "user_id": rng.zipf(1.6, n) % 400,
            "item_id": (rng.zipf(1.4, n) % 300) * 7 + 11,  # sparse raw ids
            "ts": rng.integers(0, 500, n) * 1000,  # ms, ties
            "rating": rng.integers(1, 6, n).astype(np.float64),
        }
    )


COLUMNS = {"user": "user_id", "item": "item_id", "timestamp": "ts", "rating": "rating"}
CONFIGS = [
    PreprocessConfig(filter="k_core", min_item=5),
    PreprocessConfig(min_rating=3.0, dedup=True, filter="min_count", min_item=3, min_user=4),
    PreprocessConfig(filter="none"),
]


def _same(lazy, eager) -> None:
    for col in ("user", "item", "timestamp", "rating"):
        np.testing.assert_array_equal(
            getattr(lazy.interactions, col), getattr(eager.interactions, col)
        )
    np.testing.assert_array_equal(lazy.vocab.raw, eager.vocab.raw)
    np.testing.assert_array_equal(lazy.user_raw, eager.user_raw)
    assert lazy.fingerprint() == eager.fingerprint()


@pytest.fixture
def no_eager_read(monkeypatch):
    """The lazy path must never read a whole file into memory."""

    def refuse(*a, **k):
        raise AssertionError("eager read_parquet called")

    monkeypatch.setattr(pl, "read_parquet", refuse)


@pytest.mark.parametrize("config", CONFIGS, ids=["k_core", "min_count+dedup+implicit", "none"])
def test_single_file_matches_eager_preprocessing(tmp_path, config):
    path = tmp_path / "log.parquet"
    _log().write_parquet(path)
    eager = preprocess(read_file(path, columns=COLUMNS, timestamp_unit="ms"), config)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            pl, "read_parquet", lambda *a, **k: (_ for _ in ()).throw(AssertionError("eager"))
        )
        lazy = prepare_parquet(path, config, columns=COLUMNS, timestamp_unit="ms")
    _same(lazy, eager)
    assert any("-core (" in n for n in lazy.interactions.notes) == (config.filter == "k_core")


def test_hive_partitioned_dataset_matches_eager_on_the_files_in_path_order(tmp_path, no_eager_read):
    df = _log(8000, seed=1).with_columns((pl.col("ts") // 100_000).alias("day"))
    root = tmp_path / "events"
    parts = []
    for day in sorted(df["day"].unique().to_list()):
        d = root / f"day={day}"
        d.mkdir(parents=True)
        chunk = df.filter(pl.col("day") == day).drop("day")
        for j, piece in enumerate(chunk.iter_slices(700)):  # several files per partition
            piece.write_parquet(d / f"part-{j:03d}.parquet")
            parts.append(piece)
    assert is_parquet(root) and not is_parquet(tmp_path / "missing")
    whole = pl.concat(parts)
    eager_inter = Interactions(
        whole["user_id"].to_numpy(),
        whole["item_id"].to_numpy(),
        whole["ts"].to_numpy() // 1000,
        whole["rating"].to_numpy(),
    )
    config = PreprocessConfig(filter="k_core", min_item=3)
    lazy = prepare_parquet(root, config, columns=COLUMNS, timestamp_unit="ms")
    _same(lazy, preprocess(eager_inter, config))
    assert "day" not in scan(root, COLUMNS).collect_schema().names()


def test_string_ids_and_datetimes(tmp_path):
    df = _log(3000, seed=2)
    df = df.with_columns(
        pl.format("u{}", "user_id").alias("user_id"),
        pl.format("B{}", "item_id").alias("item_id"),
        pl.from_epoch(pl.col("ts") // 1000, time_unit="s").alias("ts"),
    )
    path = tmp_path / "log.parquet"
    df.write_parquet(path)
    config = PreprocessConfig(filter="k_core", min_item=3)
    lazy = prepare_parquet(path, config, columns=COLUMNS)
    eager = preprocess(read_file(path, columns=COLUMNS), config)
    assert list(lazy.vocab.raw) == sorted(lazy.vocab.raw)
    # same interactions in the same order, whatever numbering each gave the strings
    np.testing.assert_array_equal(
        lazy.vocab.decode(lazy.interactions.item), eager.vocab.decode(eager.interactions.item)
    )
    np.testing.assert_array_equal(lazy.interactions.timestamp, eager.interactions.timestamp)


def test_bad_data_is_refused(tmp_path):
    path = tmp_path / "nulls.parquet"
    pl.DataFrame({"user_id": [1, None, None], "item_id": [1, 2, 3], "ts": [1, 2, 3]}).write_parquet(
        path
    )
    with pytest.raises(DataError, match="null"):  # most rows empty: the column is suspect
        prepare_parquet(path, PreprocessConfig(filter="none"))
    pl.DataFrame(
        {"user_id": [1, None, 2, 2, 2], "item_id": [1, 2, 3, 4, 5], "ts": [1, 2, 3, None, 5]}
    ).write_parquet(path)
    prepared = prepare_parquet(path, PreprocessConfig(filter="none"))  # a few: skipped, as eagerly
    assert prepared.interactions.timestamp.tolist() == [1, 3, 5]
    assert (
        "2 of 5 rows skipped: an empty user, item or time (user 1, timestamp 1)"
        in prepared.interactions.notes
    )
    eager = preprocess(read_file(path), PreprocessConfig(filter="none"))
    assert eager.interactions.timestamp.tolist() == prepared.interactions.timestamp.tolist()
    path = tmp_path / "notime.parquet"
    pl.DataFrame({"user_id": [1, 2], "item_id": [1, 2]}).write_parquet(path)
    with pytest.raises(DataError, match="timestamp"):
        prepare_parquet(path, PreprocessConfig(filter="none"))
    path = tmp_path / "tiny.parquet"
    pl.DataFrame({"user_id": [1, 2], "item_id": [1, 2], "ts": [1, 2]}).write_parquet(path)
    with pytest.raises(DataError, match="removed every"):
        prepare_parquet(path, PreprocessConfig(filter="k_core", min_item=5))


def test_experiment_reads_a_parquet_dataset_lazily(tmp_path, no_eager_read):
    root = tmp_path / "ds"
    (root / "part=0").mkdir(parents=True)
    _log(4000, seed=3).rename({"ts": "timestamp"}).with_columns(
        pl.col("timestamp") // 1000
    ).write_parquet(root / "part=0" / "a.parquet")
    exp = load_experiment(None, [f"data.name={root}", "data.min_item=3"])
    data = prepare_data(exp)
    assert data.prepared.n_items > 10 and len(data.split.valid) == data.prepared.n_users
    assert Path(exp.data.name) == root


def test_train_reads_a_parquet_file_with_its_column_mapping_unit_and_text_times(tmp_path):
    """`seqrec train x.parquet --set data.columns=...` used to ignore the mapping on the lazy
    path; milliseconds follow from their size there too; text times go to the eager reader."""
    base = pl.DataFrame(
        {
            "a": [1, 1, 1, 2, 2, 2],
            "b": [5, 6, 7, 5, 7, 6],
            "c": [1_700_000_000_000 + i * 1000 for i in range(6)],
        }
    )
    base.write_parquet(tmp_path / "renamed.parquet")
    exp = load_experiment(
        None,
        [
            f"data.name={tmp_path / 'renamed.parquet'}",
            "data.filter=none",
            "data.columns=user=a,item=b,timestamp=c",
        ],
    )
    lazy = prepare_data(exp).prepared
    assert lazy.interactions.timestamp.tolist() == [1_700_000_000 + i for i in range(6)]
    assert any("lazily" in n for n in lazy.interactions.notes)
    # the same unit note as the eager reader's (one helper writes both)
    unit = "timestamps read as milliseconds (their size: past the year 5000 as seconds), stored as Unix seconds"
    assert (
        unit in lazy.interactions.notes
        and unit
        in read_file(
            tmp_path / "renamed.parquet", columns={"user": "a", "item": "b", "timestamp": "c"}
        ).notes
    )
    base.with_columns(
        pl.from_epoch("c", time_unit="ms").dt.strftime("%Y-%m-%d %H:%M:%S")
    ).write_parquet(tmp_path / "text.parquet")
    exp = load_experiment(
        None,
        [
            f"data.name={tmp_path / 'text.parquet'}",
            "data.filter=none",
            "data.columns=user=a,item=b,timestamp=c",
        ],
    )
    eager = prepare_data(exp).prepared
    assert eager.interactions.timestamp.tolist() == lazy.interactions.timestamp.tolist()
    assert not any("lazily" in n for n in eager.interactions.notes)
