"""A downstream probe of the representations: does a better masked LM give better sentence vectors?

Frozen encoder, mean-pooled last hidden states (over the real tokens), a scikit-learn logistic
regression on a labelled dataset (e.g. SST-2 or ChnSentiCorp sentiment). A lower MLM loss is not
the same as better representations (Wettig et al. 2023 judged mask rates by fine-tuning); a linear
probe is the cheap, deterministic check that runs in seconds on a CPU.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import BertForMaskedLM, PreTrainedTokenizerBase

from bert_mlm.core.errors import UserError


@dataclass(frozen=True)
class ProbeConfig:
    train_path: str | None = None  # a labelled CSV/TSV/Parquet/JSONL file; null: no probe
    eval_path: str | None = None  # null: a hash split of train_path (eval_fraction of it)
    text_column: str = "text"
    eval_text_column: str | None = None  # when the eval file names its text column differently
    label_column: str = "label"
    eval_fraction: float = 0.2
    max_train_examples: int = 4000
    max_eval_examples: int = 2000
    max_length: int = 128
    batch_size: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.eval_fraction < 1.0:
            raise UserError(f"probe.eval_fraction: {self.eval_fraction!r} must be in (0, 1)")
        for name in ("max_train_examples", "max_eval_examples", "max_length", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"probe.{name}: {value!r} must be a positive integer")
        for name in ("train_path", "eval_path"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise UserError(f"probe.{name}: {path!r} is not a file")

    @property
    def enabled(self) -> bool:
        return self.train_path is not None


def read_labelled(path: str, text_column: str, label_column: str, parameter: str) -> pd.DataFrame:
    """``text`` and ``label`` columns of a labelled file; a missing column is named with the ones there are."""
    suffix = Path(path).suffix.lower()
    if suffix == ".parquet":
        frame = pd.read_parquet(path)
    elif suffix in (".jsonl", ".json"):
        frame = pd.read_json(path, lines=suffix == ".jsonl")
    else:
        frame = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", quoting=3 if suffix == ".tsv" else 0)
    for column, name in ((text_column, "text_column"), (label_column, "label_column")):
        if column not in frame:
            raise UserError(
                f"probe.{name}: {path!r} ({parameter}) has no column {column!r}; its columns are {list(frame.columns)}"
            )
    frame = frame[[text_column, label_column]].dropna()
    return pd.DataFrame({"text": frame[text_column].astype(str), "label": frame[label_column].astype(str)})


def _hash_fraction(texts: pd.Series, seed: int) -> np.ndarray:
    keys = [int.from_bytes(hashlib.blake2b(f"{seed}:{t}".encode(), digest_size=8).digest(), "big") for t in texts]
    return np.asarray(keys, dtype=np.float64) / 2.0**64


def probe_data(config: ProbeConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    train = read_labelled(config.train_path, config.text_column, config.label_column, "probe.train_path")
    if config.eval_path:
        evaluation = read_labelled(config.eval_path, config.eval_text_column or config.text_column,
                                   config.label_column, "probe.eval_path")
    else:  # by a hash of the text: the same split whatever the file order
        held_out = _hash_fraction(train["text"], config.seed) < config.eval_fraction
        train, evaluation = train[~held_out], train[held_out]
    train = train.sample(min(len(train), config.max_train_examples), random_state=config.seed)
    evaluation = evaluation.sample(min(len(evaluation), config.max_eval_examples), random_state=config.seed)
    if train["label"].nunique() < 2:
        raise UserError(f"probe.label_column: {config.train_path!r} has fewer than two labels among its examples")
    return train, evaluation


@torch.no_grad()
def sentence_embeddings(model: BertForMaskedLM, tokenizer: PreTrainedTokenizerBase, texts: list[str],
                        batch_size: int = 64, max_length: int = 128) -> np.ndarray:
    """Mean of the encoder's last hidden states over each text's tokens (frozen model, eval mode)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    max_length = min(max_length, model.config.max_position_embeddings)
    vectors = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start : start + batch_size], truncation=True, max_length=max_length, padding=True,
                          return_tensors="pt")
        attention = batch["attention_mask"].to(device)
        hidden = model.bert(input_ids=batch["input_ids"].to(device), attention_mask=attention).last_hidden_state
        weights = attention.unsqueeze(-1).to(hidden.dtype)
        vectors.append(((hidden * weights).sum(1) / weights.sum(1)).float().cpu().numpy())
    if was_training:
        model.train()
    return np.concatenate(vectors) if vectors else np.zeros((0, model.config.hidden_size), np.float32)


def run_probe(model: BertForMaskedLM, tokenizer: PreTrainedTokenizerBase, config: ProbeConfig,
              data: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> dict:
    """Probe accuracy on the held-out examples, its binomial standard error, and the majority-class
    reference (what a probe that learned nothing scores)."""
    # Imported here: the hooks validate ProbeConfig in every run, and scikit-learn with SciPy
    # would add ~50 MB to every process (the data stages' peak RSS) for a probe that is off.
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    train, evaluation = data if data is not None else probe_data(config)
    features = {name: sentence_embeddings(model, tokenizer, frame["text"].tolist(), config.batch_size, config.max_length)
                for name, frame in (("train", train), ("eval", evaluation))}
    classifier = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    classifier.fit(features["train"], train["label"].to_numpy())
    accuracy = float((classifier.predict(features["eval"]) == evaluation["label"].to_numpy()).mean())
    majority = float((evaluation["label"] == train["label"].mode().iloc[0]).mean())
    n = len(evaluation)
    return {
        "probe_accuracy": accuracy,
        "probe_accuracy_se": math.sqrt(accuracy * (1 - accuracy) / n) if n else float("nan"),
        "probe_majority_accuracy": majority,
        "probe_train_examples": len(train),
        "probe_eval_examples": n,
        "probe_dataset": str(config.train_path),
    }
