import numpy as np
import pytest
import torch

from seqrec.data.batching import SequenceBatch
from seqrec.errors import ConfigError
from seqrec.models.sasrec import SASRec, SASRecConfig, SASRecEncoder
from seqrec.testing.conformance import ConformanceSuite


class TestSASRecConformance(ConformanceSuite):
    model_cls = SASRec
    config_kwargs = {"dim": 16, "n_blocks": 2, "n_heads": 2, "dropout": 0.1}
    bad_configs = [{"dim": 0}, {"dim": 15, "n_heads": 2}, {"layout": "post"}, {"dropout": 1.5}]


class TestSASRecReferenceLayout(ConformanceSuite):
    model_cls = SASRec
    config_kwargs = {"dim": 16, "n_blocks": 1, "n_heads": 1, "layout": "reference"}
