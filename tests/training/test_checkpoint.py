import random

import numpy as np
import pytest
import torch

from seqrec.errors import DataError
from seqrec.training.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state


def test_roundtrip_and_no_temp_files(tmp_path):
    payload = {"w": torch.arange(5.0), "n": 3, "nested": {"a": [1, 2.5, None], "s": "x"}}
    path = save_checkpoint(tmp_path / "last.pt", payload)
    save_checkpoint(path, {**payload, "n": 4})  # overwrite atomically
    out = load_checkpoint(path)
    assert (
        out["n"] == 4 and torch.equal(out["w"], payload["w"]) and out["nested"] == payload["nested"]
    )
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def test_arbitrary_objects_are_refused(tmp_path):
    torch.save({"x": Evil()}, tmp_path / "bad.pt")
    with pytest.raises(DataError):
        load_checkpoint(tmp_path / "bad.pt")
    with pytest.raises(DataError):
        load_checkpoint(tmp_path / "missing.pt")


def test_rng_state_roundtrip(tmp_path):
    torch.manual_seed(1), np.random.seed(2), random.seed(3)
    save_checkpoint(tmp_path / "r.pt", {"rng": rng_state()})
    expected = (torch.rand(3), np.random.rand(3), [random.random() for _ in range(3)])
    set_rng_state(load_checkpoint(tmp_path / "r.pt")["rng"])
    got = (torch.rand(3), np.random.rand(3), [random.random() for _ in range(3)])
    assert torch.equal(expected[0], got[0])
    np.testing.assert_array_equal(expected[1], got[1])
    assert expected[2] == got[2]


def test_damaged_checkpoint_is_one_line(tmp_path):
    path = save_checkpoint(tmp_path / "last.pt", {"x": 1})
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(DataError) as info:
        load_checkpoint(path)
    assert "\n" not in str(info.value) and "--fresh" in str(info.value)
