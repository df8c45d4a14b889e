"""Text columns stored as UTF-8 bytes plus offsets, for ``.npz`` files read without pickle.

NumPy's own text arrays are fixed-width: every entry takes the width of the longest one, so a
single 50 MB id in a catalogue of a few hundred items asks for tens of GiB. Packed, a column
costs what its text costs. Unpacked columns are object arrays of ``str``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from seqrec.errors import DataError

BYTES, OFFSETS = "__utf8", "__offsets"


def pack(name: str, values: Iterable[Any]) -> dict[str, np.ndarray]:
    """``{name__utf8: uint8[total bytes], name__offsets: int64[n + 1]}``; None becomes ""."""
    encoded = [b"" if v is None else str(v).encode("utf-8", "surrogatepass") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return {name + BYTES: np.frombuffer(b"".join(encoded), dtype=np.uint8), name + OFFSETS: offsets}


def has(arrays: Mapping[str, np.ndarray], name: str) -> bool:
    return name + BYTES in arrays or name + OFFSETS in arrays


def unpack(arrays: Mapping[str, np.ndarray], name: str, source: str) -> np.ndarray:
    """The column ``name`` of ``arrays`` as an object array of ``str``; a damaged pair of arrays
    is a one-line ``DataError`` naming ``source``."""
    data, offsets = arrays.get(name + BYTES), arrays.get(name + OFFSETS)
    ok = (
        data is not None
        and offsets is not None
        and data.ndim == 1
        and data.dtype == np.uint8
        and offsets.ndim == 1
        and offsets.dtype.kind in "iu"
        and len(offsets) >= 1
        and offsets[0] == 0
        and offsets[-1] == len(data)
        and bool(np.all(np.diff(offsets) >= 0))
    )
    if not ok:
        raise DataError(
            f"{source}: the text column {name!r} is damaged (bytes and offsets disagree)"
        )
    raw = data.tobytes()
    bounds = offsets.tolist()
    out = np.empty(len(bounds) - 1, dtype=object)
    try:
        for i in range(len(out)):
            out[i] = raw[bounds[i] : bounds[i + 1]].decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise DataError(f"{source}: the text column {name!r} is not UTF-8") from None
    return out
