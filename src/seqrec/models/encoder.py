"""``SequenceEncoder``: the torch-side interface every neural model implements.

A concrete encoder is built as ``Encoder(config, n_items)``: the config is the frozen model
dataclass, ``n_items`` comes from the data at fit time. ``TorchRecommender``
(``seqrec.models.torch_recommender``) wraps any encoder with the trainer and implements the
``Recommender`` interface on top of it.
"""

from __future__ import annotations

import torch
from torch import nn

from seqrec.data.batching import SequenceBatch


class SequenceEncoder(nn.Module):
    """Base class: ``forward(batch) -> [B, L, D]``; ``score(hidden) -> [..., n_items + 1]``.

    Subclasses must set ``self.n_items`` and implement ``forward`` and ``output_embeddings``.
    Outputs at position ``t`` may depend only on inputs at positions ``<= t`` (causality) and
    must not depend on PAD positions; bidirectional models (BERT4Rec, FMLP-Rec) are the
    exception and say so with ``causal = False`` on their ``TorchRecommender``.
    """

    n_items: int

    def forward(self, batch: SequenceBatch) -> torch.Tensor:  # [B, L, D]
        raise NotImplementedError

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Prediction-layer weight ``[n_items + 1, D]`` (row 0 = PAD) and optional bias."""
        raise NotImplementedError

    def no_decay_names(self) -> set[str]:
        """Parameters exempt from weight decay when ``decay_biases_and_norms`` is off: every
        parameter of a LayerNorm and every parameter named ``bias``. Subclasses add their own
        bias-like parameters."""
        names = set()
        for mod_name, mod in self.named_modules():
            for p_name, _ in mod.named_parameters(recurse=False):
                if isinstance(mod, nn.LayerNorm) or p_name == "bias":
                    names.add(f"{mod_name}.{p_name}" if mod_name else p_name)
        return names

    def score(self, hidden: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """Logits over the whole catalogue for hidden states ``[B, D]`` (or ``[..., D]``
        without ``out``); ``out`` is an optional ``[B, I + 1]`` buffer written in place."""
        weight, bias = self.output_embeddings()
        if out is None:
            logits = hidden @ weight.T
            return logits if bias is None else logits + bias
        torch.mm(hidden, weight.T, out=out)
        if bias is not None:
            out += bias
        return out
