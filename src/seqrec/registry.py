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
    "puresvd": ("seqrec.models.factorization.svd:PureSVDConfig", "seqrec.models.factorization.svd:PureSVD"),  # PureSVD-N: scaling != 1
    "ga-satf": ("seqrec.models.factorization.satf:GASATFConfig", "seqrec.models.factorization.satf:GASATF"),
    "la-satf": ("seqrec.models.factorization.satf:LASATFConfig", "seqrec.models.factorization.satf:LASATF"),
    "sasrec": ("seqrec.models.sasrec:SASRecConfig", "seqrec.models.sasrec:SASRec"),
    "lrurec": ("seqrec.models.lrurec:LRURecConfig", "seqrec.models.lrurec:LRURec"),
    "hstu": ("seqrec.models.hstu:HSTUConfig", "seqrec.models.hstu:HSTU"),
    "lsan": ("seqrec.models.lsan:LSANConfig", "seqrec.models.lsan:LSAN"),
    "bert4rec": ("seqrec.models.bert4rec:BERT4RecConfig", "seqrec.models.bert4rec:BERT4Rec"),
    "fmlprec": ("seqrec.models.fmlprec:FMLPRecConfig", "seqrec.models.fmlprec:FMLPRec"),
    "mf": ("seqrec.models.mf:MFConfig", "seqrec.models.mf:MF"),
    "fism": ("seqrec.models.fism:FISMConfig", "seqrec.models.fism:FISM"),
    "fpmc": ("seqrec.models.fpmc:FPMCConfig", "seqrec.models.fpmc:FPMC"),
    "gru4rec": ("seqrec.models.gru4rec:GRU4RecConfig", "seqrec.models.gru4rec:GRU4Rec"),
    "narm": ("seqrec.models.narm:NARMConfig", "seqrec.models.narm:NARM"),
    "caser": ("seqrec.models.caser:CaserConfig", "seqrec.models.caser:Caser"),
}


def _resolve(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def model_names() -> list[str]:
    return sorted(MODELS)


def get_model(name: str) -> tuple[type, type]:
    """(config class, model class) of ``name``; an unknown name lists the known ones."""
    if name not in MODELS:
        raise UnknownNameError(f"unknown model {name!r}{did_you_mean(name, MODELS)}; "
                               f"known models: {', '.join(model_names())}")
    config_path, model_path = MODELS[name]
    return _resolve(config_path), _resolve(model_path)
