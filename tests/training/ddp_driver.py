"""Run under ``torchrun`` by ``test_distributed.py``: fit a tiny model on synthetic data and,
on rank 0, write its validation history and test scores to ``OUT/result.json``.

``argv``: OUT, model name, config kwargs (a Python dict literal), checkpoint dir or ``-``,
and the global step at which rank 1 SIGKILLs itself (0: never).
"""

import ast
import json
import os
import signal
import sys

import numpy as np

from seqrec.registry import get_model, settings_class
from seqrec.testing.synthetic import leave_last_out_small, markov_sequences

DATA = dict(n_users=50, n_items=20, seed=5)


def main() -> None:
    out, name, kwargs, ckdir, kill_at = sys.argv[1:6]
    kwargs, kill_at = ast.literal_eval(kwargs), int(kill_at)
    config_cls, model_cls = get_model(name)
    steps = [0]

    class Killable(model_cls):
        def make_batch(self, train, rows, rng):
            if kill_at and int(os.environ["RANK"]) == 1 and steps[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)  # a crash: no cleanup, no final save
            steps[0] += 1
            return super().make_batch(train, rows, rng)

        def compute_loss(self, data):
            if os.environ.get("BYPASS_DDP"):  # the mistake the trainer must catch
                batch = data["batch"].to(self.device)
                return self.loss_at(self.encoder(batch), batch.targets, data)
            return super().compute_loss(data)

    train, valid, test = leave_last_out_small(markov_sequences(**DATA))
    model = Killable(settings_class(name)(**kwargs))
    model.fit(
        train,
        valid,
        checkpoint_dir=None if ckdir == "-" else ckdir,
        checkpoint_every=1,
        progress=False,
    )
    if int(os.environ["RANK"]) == 0:
        lg = model.training_log
        scores = model.score(test.histories())[:, 1:]  # column 0 (PAD) is -inf
        with open(os.path.join(out, "result.json"), "w") as f:
            json.dump(
                {
                    "history": [
                        {k: h[k] for k in ("epoch", "step", "metrics", "train_loss")}
                        for h in lg.history
                    ],
                    "scores": np.asarray(scores, np.float64).tolist(),
                    "resumed_from_step": lg.resumed_from_step,
                    "world_size": lg.world_size,
                    "global_step": lg.global_step,
                },
                f,
            )
    from seqrec.training import distributed

    distributed.shutdown()  # every rank leaves the group together
    distributed.exit_if_left_group(0)  # and skips the finalization where gloo may abort


if __name__ == "__main__":
    main()
