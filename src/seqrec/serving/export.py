"""Export a fitted neural recommender to ONNX (or TorchScript) for serving without seqrec.

    seqrec export runs/my-sasrec/model --format onnx --out model.onnx

The exported graph maps left-padded item ids ``items`` int64 ``[B, max_len]`` (0 = PAD, the
most recent item last; seqrec internal ids, see the artifact's ``vocab.npz``) and, for models
that read time, ``timestamps`` int64 ``[B, max_len]`` (Unix seconds, 0 at PAD), and for
models with a user table (MF, FPMC, Caser), ``users`` int64 ``[B]`` (internal user rows;
out of range = unknown user), to ``scores`` float32
``[B, n_items + 1]`` for the next item. Column 0 (PAD) is ``-inf``, as in
``Recommender.score``. The batch size is dynamic; the length is fixed at ``max_len`` (pad on
the left). Every row must hold at least one item: the popularity fallback of an empty
history stays on the Python side. Seen items are not filtered by the graph. A masked-item
model (BERT4Rec) appends its mask token inside the graph, after the last ``max_len - 1``
items, as its ``scoring_batch`` does.

LRURec's recurrence is complex-valued, which ONNX cannot express; its graph replaces the
parallel scan by the equivalent real arithmetic ``h_t = sum_{s<=t} lam^(t-s) u_s`` with
``lam^k = exp(k log|lam|) (cos k theta + i sin k theta)`` split into real and imaginary
parts (an ``[L, L, N]`` power table per layer). ``--format torchscript`` traces the same
graph for runtimes that take TorchScript (which torch 2.13 marks deprecated). The parity of either format with
``Recommender.score`` is what :func:`parity` measures and the tests check.

Beside the graph, ``<export>.items.csv`` maps each score column (``index``) to the raw item id
as read (``item``) and its ``title``; the ONNX file's metadata (``seqrec.items``) and the
TorchScript file's extra file of the same name name it.
"""

from __future__ import annotations

import copy
import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from seqrec.data.batching import SequenceBatch, left_pad
from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError, DataError

log = logging.getLogger(__name__)

FORMATS = ("onnx", "torchscript")


INPUTS = ("items", "timestamps", "users")


def input_names(model: Any) -> tuple[str, ...]:
    """The graph's inputs: ``items`` always; ``timestamps`` when the model's scores read time
    (HSTU's time bias, LSAN's context) and ``users`` when they read the user id (MF, FPMC,
    Caser), each found by scoring the same items with two different values of it."""
    cached = getattr(model, "_export_inputs", None)
    if cached is not None:
        return cached
    graph = _graph_class(model)(copy.deepcopy(model.encoder).cpu().eval(), INPUTS)
    items, times, users = _example(model, INPUTS)
    names = ["items"]
    with torch.no_grad():
        base = graph(items, times, users)
        if not torch.equal(base, graph(items, times * 3 + 86_400, users)):
            names.append("timestamps")
        if not torch.equal(base, graph(items, times, users + 1)):
            names.append("users")
    model._export_inputs = tuple(names)
    return model._export_inputs


def uses_time(model: Any) -> bool:
    """Whether the model's scores read timestamps (see :func:`input_names`)."""
    return "timestamps" in input_names(model)


class ScoreGraph(nn.Module):
    """``(items [B, L], timestamps [B, L]?, users [B]?) -> scores [B, I + 1]`` over any
    ``SequenceEncoder``; ``inputs`` names the positional arguments."""

    def __init__(self, encoder: nn.Module, inputs: tuple[str, ...]) -> None:
        super().__init__()
        self.encoder = encoder
        self.inputs = tuple(inputs)

    def hidden(
        self, items: torch.Tensor, timestamps: torch.Tensor | None, users: torch.Tensor | None
    ) -> torch.Tensor:
        mask_token = getattr(self.encoder, "mask_token", None)
        if mask_token is not None:  # BERT4Rec: the oldest item drops out, the mask follows
            items = torch.cat((items[:, 1:], torch.full_like(items[:, :1], mask_token)), dim=1)
            if timestamps is not None:
                timestamps = torch.cat((timestamps[:, 1:], timestamps[:, -1:]), dim=1)
        batch = SequenceBatch(items=items, mask=items.ne(0), timestamps=timestamps, users=users)
        last = getattr(self.encoder, "encode_last", None)  # as Recommender.score does
        return last(batch) if last is not None else self.encoder(batch)[:, -1]  # [B, D]

    def forward(
        self,
        items: torch.Tensor,
        second: torch.Tensor | None = None,
        third: torch.Tensor | None = None,
    ) -> torch.Tensor:
        # named positional parameters (not *args): torch.export needs a fixed signature
        args = (items, second, third)[: len(self.inputs)]
        given = dict(zip(self.inputs, args, strict=True))
        hidden = self.hidden(given["items"], given.get("timestamps"), given.get("users"))
        logits = self.encoder.score(hidden)
        pad = torch.full_like(logits[:, :1], float("-inf"))
        return torch.cat((pad, logits[:, 1:]), dim=1)


class LRURealGraph(ScoreGraph):
    """LRURec in real arithmetic (ONNX has no complex tensors); same outputs as the scan."""

    def hidden(
        self, items: torch.Tensor, timestamps: torch.Tensor | None, users: torch.Tensor | None
    ) -> torch.Tensor:
        enc = self.encoder
        mask = items.ne(0).unsqueeze(-1).to(enc.embedding.weight.dtype)  # [B, L, 1]
        x = enc._embed(items)
        n = items.shape[1]
        k = torch.arange(n, device=items.device)
        lag = (k[:, None] - k[None, :]).to(x.dtype)  # [L, L], t - s
        causal = (lag >= 0).to(x.dtype)[..., None]  # [L, L, 1]
        lag = lag.clamp(min=0)[..., None]
        for block in enc.blocks:
            lru = block.lru
            log_r = -torch.exp(lru.nu_log)  # log |lam|, [N]
            theta = torch.exp(lru.theta_log)
            mag = torch.exp(lag * log_r) * causal  # [L, L, N]
            p_re, p_im = mag * torch.cos(lag * theta), mag * torch.sin(lag * theta)
            gamma = torch.exp(lru.gamma_log)
            u_re = (x @ lru.B_re.T + lru.b_re) * gamma * mask  # [B, L, N]
            u_im = (x @ lru.B_im.T + lru.b_im) * gamma * mask
            h_re = torch.einsum("tsn,bsn->btn", p_re, u_re) - torch.einsum(
                "tsn,bsn->btn", p_im, u_im
            )
            h_im = torch.einsum("tsn,bsn->btn", p_re, u_im) + torch.einsum(
                "tsn,bsn->btn", p_im, u_re
            )
            y = h_re @ lru.C_re.T - h_im @ lru.C_im.T + lru.c
            x = block.ffn(lru.norm(y + x))
        return x[:, -1]


def score_graph(model: Any) -> ScoreGraph:
    """The exportable scoring module of a fitted neural ``model`` (eval mode, on CPU)."""
    if getattr(model, "encoder", None) is None:
        raise ConfigError(
            f"only neural models can be exported; {model.name!r} has no torch encoder "
            "(factorization models are NumPy arrays in state.npz already)"
        )
    names = input_names(model)
    encoder = copy.deepcopy(model.encoder).cpu().eval()  # the model itself stays on its device
    return _graph_class(model)(encoder, names).eval()


def _graph_class(model: Any) -> type[ScoreGraph]:
    return LRURealGraph if model.name == "lrurec" else ScoreGraph


def _example(model: Any, names: tuple[str, ...], batch: int = 2) -> tuple[torch.Tensor, ...]:
    length = model.config.max_len
    items = torch.zeros(batch, length, dtype=torch.long)
    take = min(length, 3)
    items[:, -take:] = (torch.arange(take) % model.n_items) + 1
    # hours apart, zero at PAD (as left_pad writes them)
    times = (torch.arange(length, dtype=torch.long) * 3600 + 1_600_000_000).repeat(batch, 1)
    values = {
        "items": items,
        "timestamps": times * items.ne(0),
        "users": torch.zeros(batch, dtype=torch.long),
    }
    return tuple(values[n] for n in names)


def example_inputs(model: Any, batch: int = 2) -> tuple[torch.Tensor, ...]:
    """Dummy inputs of the exported signature (a few real items per row)."""
    return _example(model, input_names(model), batch)


def export_model(model: Any, out: str | Path, fmt: str = "onnx") -> Path:
    """Write ``model``'s scoring graph to ``out`` as ONNX or TorchScript.

    Raises:
        ConfigError: an unknown format, a model without an encoder, or ONNX export unavailable.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"export format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    model._check_fitted()
    graph = score_graph(model)
    args = example_inputs(model)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    names = list(graph.inputs)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if fmt == "torchscript":
            traced = torch.jit.trace(graph, args, check_trace=False)
            sidecar = write_item_map(model, out)
            torch.jit.save(traced, str(out), _extra_files={META_ITEMS: sidecar.name})
            return out
        try:
            import onnxscript  # noqa: F401  (the torch.export-based exporter needs it)
        except ImportError:
            raise ConfigError(
                "ONNX export needs the 'export' extra: pip install 'seqrec[export]'"
                " (or use --format torchscript)"
            ) from None
        batch = torch.export.Dim("batch", min=1)
        # the exporter logs optional-op registrations (torchvision absent) at WARNING
        quiet = logging.getLogger("torch.onnx")
        level, quiet.level = quiet.level, logging.ERROR
        try:
            program = torch.onnx.export(
                graph,
                args,
                input_names=names,
                output_names=["scores"],
                dynamic_shapes=tuple({0: batch} for _ in args),
                dynamo=True,
                verbose=False,
            )
        except Exception as exc:  # the exporter raises many types; name the op and the fallback
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(
                f"ONNX cannot express {model.name}: {first[:300]}; use --format torchscript"
            ) from None
        finally:
            quiet.setLevel(level)
        program.save(str(out))
    sidecar = write_item_map(model, out)
    _name_item_map(out, sidecar, model)
    return out


#: the key that names the item map inside an export (ONNX metadata, TorchScript extra file)
META_ITEMS = "seqrec.items"


def item_map_path(out: str | Path) -> Path:
    """The CSV beside an export that maps its score columns to raw item ids."""
    out = Path(out)
    return out.with_name(out.name + ".items.csv")


def write_item_map(model: Any, out: str | Path) -> Path:
    """Write ``<export>.items.csv``: ``index`` (the column of ``scores`` and the id to feed in
    ``items``), ``item`` (the raw id as read) and ``title`` when the artifact has titles. The
    graph speaks seqrec's internal ids; this file is how a runtime without seqrec maps them."""
    import polars as pl

    from seqrec.atomic import atomic_write

    n = int(model.n_items)
    vocab = getattr(model, "vocab", None)
    raw = np.arange(1, n + 1) if vocab is None else np.asarray(vocab.raw)
    cols: dict[str, Any] = {
        "index": np.arange(1, n + 1, dtype=np.int64),
        "item": [str(r) for r in raw.tolist()],
    }
    if vocab is not None and vocab.titles is not None:
        cols["title"] = [vocab.title(i) for i in range(1, n + 1)]
    path = item_map_path(out)
    text = pl.DataFrame(cols).write_csv()
    atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))
    return path


def _name_item_map(out: Path, sidecar: Path, model: Any) -> None:
    """Record in the ONNX file's metadata where its item map is and what the graph reads."""
    import onnx

    proto = onnx.load(str(out))
    meta = {
        META_ITEMS: sidecar.name,
        "seqrec.model": model.name,
        "seqrec.inputs": ",".join(input_names(model)),
        "seqrec.max_len": str(model.config.max_len),
    }
    for key, value in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(proto, str(out))


def padded_inputs(model: Any, histories: Sequences) -> dict[str, np.ndarray]:
    """The graph inputs for ``histories`` (the most recent ``max_len`` items, left-padded)."""
    if len(histories) and histories.lengths.min() == 0:
        raise DataError("every history must hold at least one item for the exported graph")
    items, times = left_pad(histories, np.arange(len(histories)), model.config.max_len)
    feed = {"items": items}
    names = input_names(model)
    if "timestamps" in names:
        if times is None:
            raise DataError(f"{model.name} reads timestamps: give histories with timestamps")
        feed["timestamps"] = times
    if "users" in names:
        if histories.users is None:
            raise DataError(f"{model.name} reads the user id: give histories with users")
        feed["users"] = np.asarray(histories.users, dtype=np.int64)
    return feed


def load_exported(path: str | Path, fmt: str = "onnx", threads: int = 1):
    """A function ``feed -> scores`` over an exported file (onnxruntime for ONNX, torch.jit for
    TorchScript), loaded once."""
    if fmt == "torchscript":
        with warnings.catch_warnings():  # torch 2.13 marks TorchScript deprecated
            warnings.simplefilter("ignore", DeprecationWarning)
            module = torch.jit.load(str(path))

        def run_ts(feed: dict[str, np.ndarray]) -> np.ndarray:
            args = [torch.from_numpy(feed[k]) for k in INPUTS if k in feed]
            with torch.no_grad():
                return module(*args).numpy()

        return run_ts
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}

    def run_onnx(feed: dict[str, np.ndarray]) -> np.ndarray:
        return session.run(["scores"], {k: v for k, v in feed.items() if k in wanted})[0]

    return run_onnx


def run_exported(path: str | Path, feed: dict[str, np.ndarray], fmt: str = "onnx") -> np.ndarray:
    """Scores from an exported file for one feed (see :func:`load_exported`)."""
    return load_exported(path, fmt)(feed)


def parity(model: Any, path: str | Path, histories: Sequences, fmt: str = "onnx") -> float:
    """Max absolute difference between the exported file's scores and ``model.score`` over
    every item column (column 0, PAD, is ``-inf`` in both and skipped)."""
    ref = model.score(histories)
    got = run_exported(path, padded_inputs(model, histories), fmt)
    if got.shape != ref.shape:
        raise DataError(f"exported scores have shape {got.shape}, expected {ref.shape}")
    return float(np.abs(got[:, 1:].astype(np.float64) - ref[:, 1:]).max())
