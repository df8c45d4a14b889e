"""Item attributes as side information: reading, the primary-category rule, and survival
through parsing cache, preprocessing (filtering + id remap) and splitting."""

from __future__ import annotations

import lzma
import os
from pathlib import Path

import numpy as np
import pytest

from seqrec.data.attributes import ItemAttributes
from seqrec.data.interactions import Interactions
from seqrec.data.preprocess import PreprocessConfig, preprocess
from seqrec.data.sources import cache, load
from seqrec.data.sources.shared_files import read_item_attributes_tsv
from seqrec.data.splits import leave_last_out
from seqrec.errors import DataError

SHARED = Path(
    os.environ.get("SEQREC_DATA_DIR")
    or Path(__file__).resolve().parents[2].parent / "shared" / "data"
)


def attrs(rows):
    """rows: (item, position, attribute, kind)."""
    item, pos, att, kind = zip(*rows, strict=True)
    return ItemAttributes(np.array(item), np.array(att), np.array(kind), np.array(pos))


def test_primary_category_skips_roots_and_picks_the_most_widespread():
    # category 2 is on every item (a root); 10 is on items 1-3, 11 on 1 only, 12 on 4-5
    table = attrs(
        [
            (1, 0, 7, "brand"),
            (1, 1, 2, "category"),
            (1, 2, 11, "category"),
            (1, 3, 10, "category"),
            (2, 0, 2, "category"),
            (2, 1, 10, "category"),
            (3, 0, 10, "category"),
            (3, 1, 2, "category"),
            (4, 0, 2, "category"),
            (4, 1, 12, "category"),
            (5, 0, 12, "category"),
            (5, 1, 2, "category"),
            (6, 0, 2, "category"),
            (6, 1, 8, "brand"),
        ]
    )
    classes, n = table.primary_category(6)
    # 10 (3 items) -> class 2, 12 (2 items) -> class 3; item 6 has only the root -> OTHER (1)
    assert classes.tolist() == [0, 2, 2, 2, 3, 3, 1] and n == 3
    folded, n = table.primary_category(6, max_classes=2)
    assert folded.tolist() == [0, 2, 2, 2, 1, 1, 1] and n == 2
    brands, n = table.primary_category(6, kind="brand")
    assert brands.tolist() == [0, 2, 1, 1, 1, 1, 3] and n == 3
    assert table.primary_category(6, kind="tag") == (pytest.approx([0, 1, 1, 1, 1, 1, 1]), 1)


def test_ties_prefer_the_earlier_entry():
    table = attrs(
        [
            (1, 0, 5, "category"),
            (1, 1, 6, "category"),
            (2, 0, 6, "category"),
            (2, 1, 5, "category"),
            (3, 0, 9, "category"),
        ]
    )
    classes, _ = table.primary_category(3, max_share=1.0)
    # 5 and 6 each on two items: item 1 takes 5 (first), item 2 takes 6 (first)
    assert classes[1] != classes[2] and classes[3] not in (classes[1], classes[2])


def test_bad_tables_raise():
    with pytest.raises(DataError, match="rows"):
        ItemAttributes(np.array([1, 2]), np.array([1]), np.array(["category"]), np.array([0]))
    with pytest.raises(DataError, match="integers"):
        ItemAttributes(np.array([1.5]), np.array([1]), np.array(["category"]), np.array([0]))


def _log(side):
    # items 10, 20, 30, 40; item 40 occurs once and is dropped by a 2-core filter
    user = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    item = np.array([10, 20, 30, 20, 10, 30, 30, 10, 20, 40])
    return Interactions(user, item, np.arange(10), item_attributes=side, has_time=False)


def test_attributes_survive_filtering_remap_and_split():
    side = attrs(
        [
            (10, 0, 1, "category"),
            (20, 0, 2, "category"),
            (30, 0, 1, "category"),
            (40, 0, 3, "category"),
            (99, 0, 3, "category"),
        ]
    )
    prepared = preprocess(_log(side), PreprocessConfig(filter="k_core", min_item=2))
    vocab = prepared.vocab
    assert vocab.raw.tolist() == [10, 20, 30]
    att = vocab.attributes
    assert sorted(zip(att.item.tolist(), att.attribute.tolist(), strict=True)) == [
        (1, 1),
        (2, 2),
        (3, 1),
    ]
    assert any("item attributes re-keyed" in n for n in prepared.interactions.notes)
    split = leave_last_out(prepared.sequences())
    for seqs in (split.train, split.train_valid, split.test.histories()):
        assert seqs.vocab.attributes is att and seqs.has_time is False
    classes, _ = split.train.vocab.attributes.primary_category(split.train.n_items, max_share=1.0)
    assert classes[1] == classes[3] != classes[2]  # raw 10 and 30 share category 1


def test_item_attribute_tsv_and_parse_cache_roundtrip(tmp_path, monkeypatch):
    monkeypatch.setenv("SEQREC_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "a.item_attributes.tsv.xz"
    path.write_bytes(
        lzma.compress(
            b"item_id\tposition\tattribute_id\tkind\n1\t0\t5\tbrand\n"
            b"1\t1\t2\tcategory\n2\t0\t2\tcategory\n"
        )
    )
    side = read_item_attributes_tsv(path)
    assert side.kinds() == ["brand", "category"] and side.item.tolist() == [1, 1, 2]
    inter = _log(side)
    cache.put("k", inter)
    back = cache.get("k")
    assert back is not None and back.item_attributes is not None
    for col in ("item", "attribute", "kind", "position"):
        assert getattr(back.item_attributes, col).tolist() == getattr(side, col).tolist()
    bad = tmp_path / "b.tsv.xz"
    bad.write_bytes(lzma.compress(b"item_id\tattribute_id\n1\t2\n"))
    with pytest.raises(DataError, match="position"):
        read_item_attributes_tsv(bad)


@pytest.mark.slow  # real data
@pytest.mark.skipif(
    not (SHARED / "yelp2020-5core.s3rec.time.tsv.xz").is_file(), reason="../shared/data not present"
)
@pytest.mark.parametrize(
    "name,n_items,has_time,kinds",
    [
        ("amazon-beauty-s3rec", 12101, False, ["brand", "category"]),
        ("yelp2020-s3rec-time", 20033, True, ["category"]),
    ],
)
def test_shared_s3rec_datasets_carry_their_attributes(
    name, n_items, has_time, kinds, monkeypatch, tmp_path
):
    monkeypatch.setenv("SEQREC_CACHE_DIR", str(tmp_path))
    inter = load(name, root=SHARED)
    assert inter.has_time is has_time and inter.item_attributes.kinds() == kinds
    seqs = preprocess(inter, PreprocessConfig(filter="none")).sequences()
    assert seqs.n_items == n_items and seqs.has_time is has_time
    classes, n = seqs.vocab.attributes.primary_category(n_items)
    assert classes[0] == 0 and (classes[1:] >= 1).all() and n > 2
    if name == "amazon-beauty-s3rec":  # the coarse level: six-ish classes, no item left over
        assert n <= 10 and (classes[1:] > 1).all()
