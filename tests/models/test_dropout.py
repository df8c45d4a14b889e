"""The CPU dropout every neural model uses (``seqrec.models.layers.Dropout``): dropout's
distribution and gradient, nn.Dropout's behaviour elsewhere, and no model left on nn.Dropout."""

import pytest
import torch
from torch import nn

from seqrec.models.layers import Dropout, cpu_dropout
from seqrec.registry import get_model, model_names


@pytest.mark.parametrize("p", [0.1, 0.2, 0.5, 0.9])
def test_keeps_one_minus_p_and_scales_the_kept_values(p):
    torch.manual_seed(0)
    x = torch.ones(400_000)
    y = cpu_dropout(x, p)
    kept = y != 0
    n = x.numel()
    sd = (p * (1 - p) / n) ** 0.5
    assert abs(kept.float().mean().item() - (1 - p)) < 5 * sd  # binomial, 5 sd
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / (1 - p)))
    assert abs(y.mean().item() - 1.0) < 5 * sd / (1 - p)  # unbiased, like inverted dropout


def test_gradient_is_the_mask_and_the_draw_follows_the_seed():
    x = torch.randn(64, 50, 32, requires_grad=True)
    torch.manual_seed(3)
    y = cpu_dropout(x, 0.5)
    y.sum().backward()
    mask = (y.detach() != 0).float() * 2.0
    assert torch.equal(x.grad, mask)
    torch.manual_seed(3)
    assert torch.equal(cpu_dropout(x, 0.5), y)  # deterministic under the torch seed
    assert not torch.equal(cpu_dropout(x, 0.5), y)  # and a fresh mask on the next call


def test_module_is_nn_dropout_outside_cpu_training():
    d = Dropout(0.5)
    assert isinstance(d, nn.Dropout) and d.state_dict() == {}
    x = torch.randn(8, 16)
    d.eval()
    assert torch.equal(d(x), x)
    d.train()
    assert (d(x) == 0).any()
    assert torch.equal(Dropout(0.0)(x), x)
    assert torch.equal(cpu_dropout(x, 1.0), torch.zeros_like(x))
    xb = x.to(torch.bfloat16)  # autocast hands over bfloat16 activations
    yb = d(xb)
    assert yb.dtype == torch.bfloat16 and set(
        yb[yb != 0].div(xb[yb != 0]).float().unique().tolist()
    ) == {2.0}


@pytest.mark.parametrize("name", model_names())
def test_no_neural_model_uses_torchs_slow_cpu_dropout(name):
    """A model built with ``nn.Dropout`` would train up to 20% slower on CPU (bernoulli_)."""
    config_cls, model_cls = get_model(name)
    if not hasattr(model_cls, "build_encoder"):
        pytest.skip(f"{name} is not a neural model")
    encoder = model_cls(config_cls()).build_encoder(50)
    plain = [n for n, m in encoder.named_modules() if type(m) is nn.Dropout]
    assert plain == []
    assert any(isinstance(m, Dropout) for m in encoder.modules()) or not _has_dropout(config_cls())


def _has_dropout(cfg) -> bool:
    return any(getattr(cfg, f, 0) for f in ("dropout", "dropout_embed"))
