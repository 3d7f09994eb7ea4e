"""Resuming a run: what makes a run, where it is, and its checkpoints saved and resumed.

A run is its fingerprint: the training data, the initial weights and the model's shape, the
masking, the seed, the optimisation settings and the number of ranks. Its checkpoints live in that
fingerprint's folder (core/model/checkpoints.py), so ``training.resume`` continues only the very
same run. The step budget (``max_steps``/``epochs``) is not part of it: raising it continues a run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from bert_mlm.core.model.checkpoints import (
    RUN_FILE,
    cpu_weights,
    differences,
    list_checkpoints,
    load_checkpoint,
    restore_rng_states,
    run_folder,
    run_folders,
    save_checkpoint,
)
from bert_mlm.errors import UserError

logger = logging.getLogger(__name__)

# TrainingConfig fields that change the optimisation (the rest is budget or bookkeeping).
OPTIMISATION_FIELDS = ("batch_size", "gradient_accumulation_steps", "learning_rate", "weight_decay", "adam_beta1",
                       "adam_beta2", "adam_epsilon", "warmup_steps", "schedule", "max_grad_norm", "bucketing")
MODEL_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "max_position_embeddings", "hidden_dropout_prob", "attention_probs_dropout_prob")


def weights_digest(model: torch.nn.Module) -> str:
    """Digest of the weights (a fresh model's: the seed or the ``init_from`` checkpoint)."""
    digest = hashlib.blake2b(digest_size=8)
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def data_digest(sequences: Sequence[np.ndarray]) -> str:
    fingerprint = getattr(sequences, "fingerprint", None)  # IndexedSequences: the store digest and the index
    if fingerprint is not None:
        return str(fingerprint)
    digest = hashlib.blake2b(digest_size=8)
    for sequence in sequences:
        digest.update(np.asarray(sequence, dtype=np.int64).tobytes())
    return digest.hexdigest()


def run_fingerprint(model, sequences, masking, config, world_size: int, precision: str | None = None) -> dict:
    """What defines a run, readable: a resume is refused when any of it differs. ``precision`` is
    the resolved one (``auto`` is fp32 on a CPU, bf16 on a recent GPU): fp32 and bf16 steps give
    other weights, so a run does not change precision half way."""
    mixture = getattr(sequences, "mixture", None)
    return {"data": data_digest(sequences),
            # A mixture's weights, readable (the data digest holds them too): a resume after a changed
            # weight says so, not only that two digests differ. Only mixtures carry the key, so that the
            # fingerprints (and run folders) of runs on one corpus stay those of earlier versions.
            **({"mixture": {source: f"{kind} {value:g}" for source, kind, value in mixture.settings}}
               if mixture is not None else {}),
            "initial_weights": weights_digest(model),
            "model": {name: getattr(model.config, name, None) for name in MODEL_FIELDS},
            "masking": masking.model_dump(), "seed": config.seed,
            "optimisation": {name: getattr(config, name) for name in OPTIMISATION_FIELDS}, "ranks": world_size,
            "precision": precision or config.precision}


def refuse_other_runs(root: str | os.PathLike, fingerprint: dict) -> None:
    """``training.resume`` found no checkpoint of this run: stop if another run left one (the
    user meant to resume something), saying what differs; start fresh if the folder is empty."""
    others = run_folders(root)
    legacy = list_checkpoints(root)  # written before runs had folders: nothing says which run
    if not others and not legacy:
        return
    if others:
        newest = others[-1]
        try:
            previous = json.loads((newest / RUN_FILE).read_text())
            changed = "; ".join(differences(previous, fingerprint)) or "nothing readable"
        except (OSError, ValueError):
            changed = "unknown (its run.json is missing)"
        where = f"{str(list_checkpoints(newest)[-1])!r} is another run's; what differs: {changed}"
    else:
        where = f"{str(legacy[-1])!r} was written without a run fingerprint, so it cannot be matched"
    raise UserError(f"training.resume: no checkpoint of this run in {str(root)!r}; the newest checkpoint there, "
                    f"{where}. Set training.resume=false to start fresh (or restore the settings of that run to "
                    "continue it).")


@dataclass
class BestWeights:
    """The step with the lowest validation loss so far (``training.keep_best``) and a CPU copy of
    its weights."""

    step: int
    valid_loss: float
    weights: dict

    def stored(self, at_step: int) -> dict:
        """As a checkpoint written at ``at_step`` holds it: no second copy of the weights when the
        best step is that checkpoint's own."""
        return {"step": self.step, "valid_loss": self.valid_loss,
                "weights": None if self.step == at_step else self.weights}

    @classmethod
    def restored(cls, stored: dict | None, model: torch.nn.Module) -> BestWeights | None:
        if stored is None:
            return None
        return cls(stored["step"], stored["valid_loss"], stored["weights"] or cpu_weights(model))


@dataclass
class Position:
    """Where a run is: optimizer steps done, epoch, next micro-batch of the epoch, history, and
    the best validated weights when the run keeps them."""

    step: int = 0
    epoch: int = 0
    next_batch: int = 0
    records: list = field(default_factory=list)
    best: BestWeights | None = None


class RunCheckpoints:
    """The checkpoints of one run (its fingerprint's folder): ``save`` and ``resume``, the pair.

    ``stateful`` maps names to objects with ``state_dict``/``load_state_dict`` (model,
    optimizer, scheduler, scaler); the RNG states of every rank and the position travel along.
    """

    def __init__(self, root: str | os.PathLike, fingerprint: dict, every: int, keep: int) -> None:
        self.root, self.fingerprint, self.every, self.keep = Path(root), fingerprint, every, keep
        self.folder = run_folder(root, fingerprint)

    def due(self, step: int, max_steps: int) -> bool:
        return bool(self.every) and (step % self.every == 0 or step == max_steps)

    def save(self, position: Position, stateful: dict, rng: list, config: dict) -> Path:
        state = {name: part.state_dict() for name, part in stateful.items()}
        state.update(rng=rng, step=position.step, epoch=position.epoch, next_batch=position.next_batch,
                     history=position.records, config=config,
                     best=position.best.stored(position.step) if position.best else None)
        return save_checkpoint(self.folder, position.step, state, keep=self.keep, fingerprint=self.fingerprint)

    def resume(self, stateful: dict, rank: int, max_steps: int) -> Position:
        """Restore this run's newest checkpoint into ``stateful`` and this process's RNGs; a fresh
        position when there is none (and no other run's checkpoint is waiting to be resumed)."""
        def apply(path: Path, state: dict) -> None:
            position = [state[key] for key in ("step", "epoch", "next_batch")]
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in position) or not isinstance(
                    state["history"], list):
                raise TypeError(f"its position (step, epoch, next_batch: {position}) is not three integers")
            if state["step"] >= max_steps:
                raise UserError(f"training.resume: the checkpoint {str(path)!r} already completed this run's "
                                f"{state['step']} steps (training.max_steps={max_steps}); nothing is left to train and "
                                "no new model version is written. Raise training.max_steps to train longer, or set "
                                "training.resume=false to train again from scratch.")
            for name, part in stateful.items():
                part.load_state_dict(state[name])
            restore_rng_states(state["rng"][rank])

        found = load_checkpoint(self.folder, self.fingerprint, apply)
        if found is None:
            refuse_other_runs(self.root, self.fingerprint)
            logger.info("training.resume: no checkpoint in %s, starting fresh", self.root)
            return Position()
        path, state = found
        logger.info("Resumed from %s (step %d, epoch %d)", path, state["step"], state["epoch"])
        return Position(state["step"], state["epoch"], state["next_batch"], state["history"],
                        BestWeights.restored(state.get("best"), stateful["model"]))
