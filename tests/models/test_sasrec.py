import pytest
import torch

from seqrec.data.batching import SequenceBatch
from seqrec.errors import ConfigError
from seqrec.models.layers import causal_padding_mask
from seqrec.models.neural_config import settings
from seqrec.models.sasrec import SASRec, SASRecConfig, SASRecEncoder
from seqrec.testing.conformance import ConformanceSuite, fitted
from seqrec.testing.same_path import assert_same_forward_and_backward, padded_batch


class TestSASRecConformance(ConformanceSuite):
    model_cls = SASRec
    config_kwargs = {"dim": 16, "n_blocks": 2, "n_heads": 2, "dropout": 0.1}
    bad_configs = [{"dim": 0}, {"dim": 15, "n_heads": 2}, {"layout": "post"}, {"dropout": 1.5}]


class TestSASRecPreLNLayout(ConformanceSuite):
    model_cls = SASRec
    config_kwargs = {"dim": 16, "n_blocks": 1, "n_heads": 1, "layout": "pre_ln"}
    # the layout-independent checks run once, in the class above
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None
    test_exclude_seen = None


class TestSASRecDrossVariant(ConformanceSuite):
    """Reference layout plus the Dross code's choices: output projection, N(0, 0.02) init,
    attention dropout."""

    model_cls = SASRec
    config_kwargs = {
        "dim": 16,
        "n_blocks": 1,
        "n_heads": 2,
        "layout": "reference",
        "attn_out_proj": True,
        "init": "normal",
        "attn_dropout": 0.1,
    }
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None
    test_exclude_seen = None


class TestSASRecPostLNBlock(ConformanceSuite):
    """The FMLP-Rec line's block: post-LN, GELU FFN 4D, N(0, 0.02) init, output projection."""

    model_cls = SASRec
    config_kwargs = {
        "dim": 16,
        "n_blocks": 2,
        "n_heads": 2,
        "layout": "post_ln",
        "ffn_dim": 64,
        "attn_out_proj": True,
        "init": "normal",
        "attn_dropout": 0.1,
    }
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None
    test_exclude_seen = None


def test_post_ln_block_is_the_fmlprec_line_wiring():
    """Embeddings LN(E + P) unscaled, LN(x + Attn(x)), LN(x + W2 GELU(W1 x)), no final LN:
    checked against the formula written out with the encoder's own weights."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    cfg = SASRecConfig(
        max_len=5,
        dim=8,
        n_blocks=1,
        dropout=0.0,
        layout="post_ln",
        ffn_dim=32,
        attn_out_proj=True,
    )
    enc = SASRecEncoder(cfg, n_items=9).eval()
    assert enc.scale == 1.0 and isinstance(enc.final_norm, torch.nn.Identity)
    items = torch.tensor([[1, 2, 3, 4, 5]])
    got = enc(SequenceBatch(items=items, mask=items.ne(0)))
    x = enc.emb_norm(enc.item_emb(items) + enc.pos_emb(torch.arange(5))[None])
    blk = enc.blocks[0]
    q = blk.attn.q(x)
    k, v = blk.attn.kv(x).split(8, dim=-1)
    att = (q @ k.transpose(1, 2) / 8**0.5).masked_fill(~torch.ones(5, 5).tril().bool(), -1e9)
    x = blk.attn_norm(x + blk.attn.out(att.softmax(-1) @ v))
    x = blk.ffn_norm(x + blk.ffn.fc2(F.gelu(blk.ffn.fc1(x))))
    assert torch.allclose(got, x, atol=1e-5)


class TestSASRecPositionsFromStart(ConformanceSuite):
    """Positions counted from the oldest item of the window (right-padded implementations)."""

    model_cls = SASRec
    config_kwargs = {"dim": 16, "n_blocks": 1, "layout": "reference", "positions": "from_start"}
    test_all_losses = None
    test_bad_configs = None
    test_seeded_refit = None
    test_exclude_seen = None


def test_positions_from_start_number_the_window_from_its_oldest_item():
    torch.manual_seed(0)
    # pre_ln: the embedding enters the blocks unscaled, which _encode_from_embeddings assumes
    enc = SASRecEncoder(
        SASRecConfig(max_len=6, dim=8, positions="from_start", dropout=0.0, layout="pre_ln"),
        n_items=9,
    ).eval()
    items = torch.tensor([[0, 0, 0, 3, 4, 5]])
    got = enc(SequenceBatch(items=items, mask=items.ne(0)))
    # the same items right-aligned in a shorter window, i.e. the embedding the from_start
    # scheme must reproduce: positions 0, 1, 2 for items 3, 4, 5
    x = enc.item_emb(items[:, 3:]) + enc.pos_emb(torch.arange(3))[None]
    assert not torch.allclose(enc.pos_emb.weight[0], enc.pos_emb.weight[3])
    from_end = SASRecEncoder(
        SASRecConfig(max_len=6, dim=8, dropout=0.0, layout="pre_ln"), n_items=9
    ).eval()
    from_end.load_state_dict(enc.state_dict())
    assert not torch.allclose(from_end(SequenceBatch(items=items, mask=items.ne(0))), got)
    assert torch.allclose(got[:, 3:], _encode_from_embeddings(enc, x), atol=1e-6)
    with pytest.raises(ConfigError):
        SASRecConfig(positions="middle")


def _encode_from_embeddings(enc, x):
    valid = torch.ones(x.shape[:2], dtype=torch.bool)
    mask = causal_padding_mask(valid)
    for block in enc.blocks:
        x = block(x, mask, valid, False)
    return enc.final_norm(x)


def test_attention_output_projection_is_optional():
    plain = SASRecEncoder(SASRecConfig(max_len=4, dim=8), n_items=9)
    projected = SASRecEncoder(SASRecConfig(max_len=4, dim=8, attn_out_proj=True), n_items=9)
    n_plain = sum(p.numel() for p in plain.parameters())
    n_proj = sum(p.numel() for p in projected.parameters())
    assert plain.blocks[0].attn.out is None and n_proj - n_plain == 2 * (8 * 8 + 8)


def _reference_attention(att, query, keys, allowed):
    """Plain softmax(QK^T / sqrt(d_h) + A) V with per-head split, as in the paper."""
    b, length, dim = query.shape
    h = att.n_heads
    q = att.q(query).view(b, length, h, dim // h).transpose(1, 2)
    k, v = att.kv(keys).view(b, length, 2, h, dim // h).permute(2, 0, 3, 1, 4)
    logits = q @ k.transpose(-1, -2) / (dim // h) ** 0.5
    logits = logits.masked_fill(~allowed[:, None], float("-inf"))
    return (torch.softmax(logits, -1) @ v).transpose(1, 2).reshape(b, length, dim)


@pytest.mark.parametrize("heads", [1, 4])
def test_sdpa_attention_matches_plain_reference_outputs_and_grads(heads):
    from seqrec.models.layers import causal_padding_mask
    from seqrec.models.sasrec import CausalSelfAttention

    torch.manual_seed(0)
    att = CausalSelfAttention(16, heads, 0.0).double()
    x = torch.randn(3, 7, 16, dtype=torch.float64, requires_grad=True)
    valid = torch.ones(3, 7, dtype=torch.bool)
    valid[1, :3] = False
    valid[2, :6] = False
    allowed = causal_padding_mask(valid)
    ours = att(x, x, allowed)
    ref = _reference_attention(att, x, x, allowed)
    assert torch.allclose(ours, ref)
    g1 = torch.autograd.grad(ours[valid].sum(), [x, att.q.weight])
    g2 = torch.autograd.grad(ref[valid].sum(), [x, att.q.weight])
    assert all(torch.allclose(a, b) for a, b in zip(g1, g2, strict=True))


def test_fully_padded_rows_give_zero_not_nan():
    enc = SASRecEncoder(SASRecConfig(max_len=6, dim=8), n_items=9).eval()
    items = torch.tensor([[0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 2, 3]])
    out = enc(SequenceBatch(items=items, mask=items.ne(0)))
    assert torch.isfinite(out).all() and torch.all(out[0] == 0) and torch.all(out[1, :3] == 0)


def test_layouts_differ_and_reference_scales_embeddings():
    torch.manual_seed(0)
    pre = SASRecEncoder(
        SASRecConfig(max_len=6, dim=8, dropout=0.0, layout="pre_ln"), n_items=9
    ).eval()
    ref = SASRecEncoder(SASRecConfig(max_len=6, dim=8, dropout=0.0, layout="reference"), 9).eval()
    ref.load_state_dict(pre.state_dict())  # same parameters, different wiring
    items = torch.tensor([[0, 0, 4, 1, 2, 3]])
    b = SequenceBatch(items=items, mask=items.ne(0))
    assert ref.scale == pytest.approx(8**0.5) and pre.scale == 1.0
    assert not torch.allclose(pre(b), ref(b))


def test_too_long_input_and_unavailable_device_raise():
    enc = SASRecEncoder(SASRecConfig(max_len=4, dim=8), n_items=9)
    items = torch.ones(1, 5, dtype=torch.long)
    with pytest.raises(ConfigError):
        enc(SequenceBatch(items=items, mask=items.ne(0)))
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError):
            SASRec(settings(SASRecConfig, device="cuda"))


def test_an_unavailable_gpu_is_explained(monkeypatch):
    from seqrec.models.torch_recommender import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(ConfigError, match="CPU-only build.*device='cpu'.*bootstrap"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.version, "cuda", "12.6")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(
        ConfigError, match="built for CUDA 12.6 but sees no GPU.*CUDA_VISIBLE_DEVICES=''"
    ):
        resolve_device("cuda:0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(ConfigError, match="shows 2 GPU.*cuda:0 .. cuda:1"):
        resolve_device("cuda:2")
    assert resolve_device("auto").type == "cuda"


def test_item_embedding_is_shared_with_prediction_layer():
    enc = SASRecEncoder(SASRecConfig(max_len=4, dim=8), n_items=9)
    weight, bias = enc.output_embeddings()
    assert weight is enc.item_emb.weight and bias is None


def test_l2_norm_gives_cosine_scores_divided_by_temperature():
    torch.manual_seed(0)
    enc = SASRecEncoder(SASRecConfig(max_len=6, dim=8, l2_norm=True, temperature=0.05), 9).eval()
    items = torch.tensor([[0, 0, 4, 1, 2, 3]])
    h = enc.encode_last(SequenceBatch(items=items, mask=items.ne(0)))
    weight, _ = enc.output_embeddings()
    scores = h @ weight[1:].T
    assert torch.allclose(h.norm(dim=-1), torch.ones(1))
    assert scores.abs().max() <= 1 / 0.05 + 1e-4 and scores.abs().max() > 1.0


def test_resume_accepts_a_run_started_before_a_config_field_existed(tmp_path):
    import json

    from seqrec.models.torch_recommender import _check_same_config

    cfg = SASRecConfig(max_len=6, dim=8)
    _check_same_config(tmp_path, cfg, "sasrec", 9)
    meta = json.loads((tmp_path / "run.json").read_text())
    del meta["config"]["l2_norm"]  # as written by an older version
    (tmp_path / "run.json").write_text(json.dumps(meta))
    _check_same_config(tmp_path, cfg, "sasrec", 9)  # the missing field is its default: same run
    with pytest.raises(ConfigError, match="l2_norm"):
        _check_same_config(tmp_path, SASRecConfig(max_len=6, dim=8, l2_norm=True), "sasrec", 9)


def test_normal_init_draws_small_weights_and_zero_biases():
    torch.manual_seed(0)
    enc = SASRecEncoder(SASRecConfig(max_len=8, dim=32, init="normal"), n_items=500)
    assert abs(enc.item_emb.weight[1:].std().item() - 0.02) < 0.002
    assert torch.all(enc.item_emb.weight[0] == 0) and torch.all(enc.blocks[0].attn.q.bias == 0)
    assert torch.all(enc.blocks[0].attn_norm.weight == 1)
    xavier = SASRecEncoder(SASRecConfig(max_len=8, dim=32), n_items=500)
    assert xavier.blocks[0].attn.q.weight.std() > 3 * enc.blocks[0].attn.q.weight.std()
    with pytest.raises(ConfigError):
        SASRecConfig(init="uniform")


@pytest.mark.parametrize("layout", ["pre_ln", "post_ln", "reference"])
@pytest.mark.parametrize("positions", ["from_end", "from_start"])
@pytest.mark.parametrize("n_blocks", [1, 2, 3])
def test_encode_last_equals_the_full_forward_on_padded_batches(layout, positions, n_blocks):
    """encode_last runs the blocks but the last on right-padded rows without a mask (see its
    docstring): the last position's state equals the masked full forward's, for rows of every
    length (none, one, all), and a batch without PAD takes plain causal attention."""
    torch.manual_seed(0)
    cfg = settings(
        SASRecConfig,
        dim=16,
        n_heads=2,
        max_len=12,
        layout=layout,
        positions=positions,
        n_blocks=n_blocks,
    )
    enc = SASRecEncoder(cfg, n_items=30).eval()
    items = torch.randint(1, 31, (6, 10))
    for row, n in enumerate([10, 1, 0, 4, 9, 7]):
        items[row, : 10 - n] = 0
    batch = SequenceBatch(items=items, mask=items.ne(0))
    with torch.inference_mode():
        want = enc(batch)[:, -1]
        torch.testing.assert_close(enc.encode_last(batch), want, rtol=1e-5, atol=1e-6)
        full = SequenceBatch(items=items[:1], mask=items[:1].ne(0))  # no PAD: no mask at all
        torch.testing.assert_close(enc.encode_last(full), want[:1], rtol=1e-5, atol=1e-6)
    assert want[2].abs().max() == 0  # an empty history's state is zero (PAD output)


@pytest.mark.parametrize(
    "layout, attn_dropout, l2_norm",
    [
        ("reference", 0.0, False),
        ("reference", 0.2, True),
        ("pre_ln", 0.2, False),
        ("post_ln", 0.2, False),
        ("post_ln", 0.0, True),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_training_at_real_positions_only_computes_the_plain_blocks(
    layout, attn_dropout, l2_norm, dtype
):
    """In training on CPU every layout runs its position-wise work at the real positions only:
    the same outputs, gradients and dropout stream as the plain blocks on the padded batch."""
    batch = padded_batch()
    cfg = SASRecConfig(
        dim=16,
        max_len=12,
        n_heads=2,
        dropout=0.3,
        attn_dropout=attn_dropout,
        l2_norm=l2_norm,
        layout=layout,
        attn_out_proj=layout == "post_ln",
    )

    def build():
        enc = SASRecEncoder(cfg, 40).to(dtype).train()
        assert enc._rows_path(batch.items.float())  # training on CPU takes the fast path
        return enc

    def plain():
        fast = SASRecEncoder._rows_path
        SASRecEncoder._rows_path = lambda self, x: False
        return lambda: setattr(SASRecEncoder, "_rows_path", fast)

    assert_same_forward_and_backward(build, batch, plain)


def test_model_selection_on_ndcg_at_20_validates_at_20():
    """``val_metric = "NDCG@20"`` (the FMLP-Rec line's selection) validates at k = 20 as well
    as 10 and selects on it; the default validates at 10 only."""
    from seqrec.testing.conformance import _data

    _, _, valid, _ = _data()
    at20 = fitted(SASRec, {"dim": 16}, val_metric="NDCG@20", epochs=2)
    assert {"NDCG@10", "NDCG@20", "HR@20"} <= set(at20.validation_metrics(valid))
    log = at20.training_log
    assert log.best_metric == max(h["metrics"]["NDCG@20"] for h in log.history)
    plain = fitted(SASRec, {"dim": 16}, epochs=2)
    assert "NDCG@20" not in plain.validation_metrics(valid)
