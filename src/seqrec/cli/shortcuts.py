"""The newcomer's shortcuts of the command line: ``seqrec train shop.csv -m sasrec`` (DATA and
--model as leading ``--set`` overrides) and a run directory given where an artifact is expected."""

from __future__ import annotations

import argparse
from pathlib import Path

from seqrec.errors import ConfigError


def resolve_artifact(args: argparse.Namespace) -> None:
    """A run directory (``runs/shop-sasrec``) stands for its artifact (``runs/shop-sasrec/model``):
    ``seqrec train`` prints both, and the run directory is the one people remember."""
    if getattr(args, "artifact", None) is not None:  # evaluate also reads the run's experiment.json
        from seqrec.serving.artifact import artifact_dir

        args.artifact = str(artifact_dir(args.artifact))


def fold_shortcuts(args: argparse.Namespace) -> None:
    """Turn the DATA / --model shortcuts into leading ``--set`` overrides (an explicit --set of the
    same key is a conflict, not a silent winner)."""
    data, models = getattr(args, "data_shortcut", None), getattr(args, "model_shortcut", None)
    models = [m for given in (models or []) for m in given.split(",") if m.strip()]
    if len(models) > 1:  # -m sasrec -m lrurec, or -m sasrec,lrurec: a comparison
        raise ConfigError(
            f"{args.command} takes one model, got {', '.join(models)}; to compare "
            f"several on the same data: seqrec demo {data or 'DATA'} --models {','.join(models)}"
        )
    model = models[0] if models else None
    if data is not None and not data.strip():  # `seqrec train "$FILE"` with FILE unset
        raise ConfigError(
            "DATA is empty: pass a dataset name (seqrec data list) or the path of your log"
        )
    if data is None and model is None:
        return
    from seqrec.registry import MODELS, canonical_model_name, get_model

    if data is not None and Path(data).suffix.lower() in (".toml", ".yaml", ".yml"):
        if args.config:
            raise ConfigError(f"two configs given: {data} and --config {args.config}; pass one")
        args.config, data = data, None
    if model is not None:
        model = canonical_model_name(model)  # -m SASRec, as the papers spell it
    if data is not None and canonical_model_name(data) in MODELS and not Path(data).exists():
        raise ConfigError(
            f"{data!r} is a model, not a dataset: pass it as --model {canonical_model_name(data)} "
            "(and DATA as a dataset name, e.g. ml-latest-small, or your own file)"
        )
    shortcuts = {"data.name": data, "model.name": model}
    if model is not None and model not in MODELS:
        get_model(model)  # raises, naming the closest known model
    given = {a.split("=", 1)[0].strip() for a in args.overrides}
    for key, value in shortcuts.items():
        if value is not None and key in given:
            raise ConfigError(f"{key} given twice (as a shortcut and as --set {key}=...); keep one")
    args.overrides = [f"{k}={v}" for k, v in shortcuts.items() if v is not None] + list(
        args.overrides
    )
