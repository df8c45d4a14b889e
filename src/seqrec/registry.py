"""Name -> (config class, model class). A plain dict you can grep; one line per model.

Entries are import paths resolved lazily so that ``import seqrec`` stays light and
factorization models never import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from seqrec.errors import UnknownNameError, did_you_mean

MODELS: dict[str, tuple[str, str]] = {
    # name: ("module:ConfigClass", "module:ModelClass")
    "pop": ("seqrec.models.factorization.pop:PopConfig", "seqrec.models.factorization.pop:Pop"),
    "puresvd": (
        "seqrec.models.factorization.svd:PureSVDConfig",
        "seqrec.models.factorization.svd:PureSVD",
    ),  # PureSVD-N: scaling != 1
    "ga-satf": (
        "seqrec.models.factorization.satf:GASATFConfig",
        "seqrec.models.factorization.satf:GASATF",
    ),
    "la-satf": (
        "seqrec.models.factorization.satf:LASATFConfig",
        "seqrec.models.factorization.satf:LASATF",
    ),
    "sasrec": ("seqrec.models.sasrec:SASRecConfig", "seqrec.models.sasrec:SASRec"),
    "lrurec": ("seqrec.models.lrurec:LRURecConfig", "seqrec.models.lrurec:LRURec"),
    "hstu": ("seqrec.models.hstu:HSTUConfig", "seqrec.models.hstu:HSTU"),
    "lsan": ("seqrec.models.lsan:LSANConfig", "seqrec.models.lsan:LSAN"),
    "bert4rec": ("seqrec.models.bert4rec:BERT4RecConfig", "seqrec.models.bert4rec:BERT4Rec"),
    "fmlprec": ("seqrec.models.fmlprec:FMLPRecConfig", "seqrec.models.fmlprec:FMLPRec"),
    "bsarec": ("seqrec.models.bsarec:BSARecConfig", "seqrec.models.bsarec:BSARec"),
    "tvrec": ("seqrec.models.tvrec:TVRecConfig", "seqrec.models.tvrec:TVRec"),
    "mf": ("seqrec.models.mf:MFConfig", "seqrec.models.mf:MF"),
    "fism": ("seqrec.models.fism:FISMConfig", "seqrec.models.fism:FISM"),
    "fpmc": ("seqrec.models.fpmc:FPMCConfig", "seqrec.models.fpmc:FPMC"),
    "gru4rec": ("seqrec.models.gru4rec:GRU4RecConfig", "seqrec.models.gru4rec:GRU4Rec"),
    "narm": ("seqrec.models.narm:NARMConfig", "seqrec.models.narm:NARM"),
    "caser": ("seqrec.models.caser:CaserConfig", "seqrec.models.caser:Caser"),
}


# What `seqrec models` shows: the model and its paper in one line (the module docstring has the
# equations, the choices made and every deviation). Kept here so that listing imports no model.
SUMMARIES: dict[str, str] = {
    "pop": "most popular items by training count: the floor every model must clear",
    "puresvd": "PureSVD (Cremonesi et al., RecSys 2010); scaling != 1 is PureSVD-N (Frolov & Oseledets)",
    "ga-satf": "GA-SATF: sequence-aware tensor factorization, global positional attention (Frolov & Oseledets, IEEE Access 2023)",
    "la-satf": "LA-SATF: sequence-aware tensor factorization, local attention over Hankel matrices (same paper)",
    "sasrec": "SASRec: causal self-attention (Kang & McAuley, ICDM 2018); full CE default, the paper's BCE one option away",
    "lrurec": "LRURec: linear recurrent units in the complex plane, parallel scan (Yue et al., WSDM 2024)",
    "hstu": "HSTU: pointwise SiLU attention with relative time + position bias, gated output (Zhai et al., ICML 2024)",
    "lsan": "LSAN: context-weighted quotient-remainder embeddings, twin attention (Li et al., CIKM 2021)",
    "bert4rec": "BERT4Rec: bidirectional Transformer trained as a Cloze task (Sun et al., CIKM 2019)",
    "fmlprec": "FMLP-Rec: all-MLP encoder with learnable frequency filters (Zhou et al., WWW 2022)",
    "bsarec": "BSARec: self-attention mixed with a low/high-pass frequency inductive bias (Shin et al., AAAI 2024)",
    "tvrec": "TV-Rec: time-variant convolutional filters from a graph-filter basis (Shin et al., NeurIPS 2025)",
    "mf": "MF: user and item factors plus item bias (Koren et al., IEEE Computer 2009); order-free",
    "fism": "FISM: factored item-to-item similarity, no user factor (Kabbur et al., KDD 2013); order-free",
    "fpmc": "FPMC: MF plus a factorized first-order Markov chain (Rendle et al., WWW 2010)",
    "gru4rec": "GRU4Rec: a GRU over the sequence (Hidasi et al., ICLR 2016 / CIKM 2018)",
    "narm": "NARM: GRU with global and local attention, bilinear decoder (Li et al., CIKM 2017)",
    "caser": "Caser: horizontal and vertical convolutions over the last L items (Tang & Wang, WSDM 2018)",
}


def _resolve(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def model_names() -> list[str]:
    return sorted(MODELS)


def canonical_model_name(name: str) -> str:
    """The registered spelling of a model name written as the papers write it: ``SASRec``,
    ``FMLP-Rec``, ``GA_SATF`` (case, ``-`` and ``_`` ignored); anything else as given, so the
    unknown-name error still names it."""
    if name in MODELS:
        return name

    def key(n: str) -> str:
        return "".join(c for c in n.lower() if c.isalnum())

    matches = [m for m in MODELS if key(m) == key(name)]
    return matches[0] if len(matches) == 1 else name


def get_model(name: str) -> tuple[type, type]:
    """(config class, model class) of ``name``; an unknown name lists the known ones."""
    if name not in MODELS:
        raise UnknownNameError(
            f"unknown model {name!r}{did_you_mean(name, MODELS)}; "
            f"known models: {', '.join(model_names())}"
        )
    config_path, model_path = MODELS[name]
    return _resolve(config_path), _resolve(model_path)


def settings_class(name: str) -> type:
    """The flat settings class of ``name``: its config's fields, and for a neural model the
    training and run fields too, as one dataclass (what experiment files, ``--set``, stored
    artifacts and run identities hold; :func:`seqrec.models.neural_config.settings_class`)."""
    from seqrec.models.neural_config import settings_class as flat

    return flat(get_model(name)[0])


def settings_fields(name: str) -> set[str]:
    """Every key a flat settings dict of model ``name`` may hold."""
    import dataclasses

    return {f.name for f in dataclasses.fields(settings_class(name))}
