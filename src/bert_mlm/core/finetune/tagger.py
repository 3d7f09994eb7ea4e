"""The tagger itself: an ``AutoModelForTokenClassification`` on a pretrained encoder, its batches,
its word-level predictions, and its linear-probe head (LP-FT, as the sentence runs start)."""

from __future__ import annotations

import numpy as np
import torch
from transformers import AutoModelForTokenClassification, PreTrainedModel

from bert_mlm.core.finetune.alignment import IGNORED, AlignedSentences
from bert_mlm.core.model.construction import MODEL_LOCK


def collate_tagged(sentences: AlignedSentences, indices: np.ndarray, pad_id: int) -> dict[str, torch.Tensor]:
    """One batch padded to its longest sentence (a multiple of 8); padding's labels are ignored."""
    width = -(-max(len(sentences.input_ids[i]) for i in indices) // 8) * 8
    input_ids = torch.full((len(indices), width), pad_id, dtype=torch.long)
    labels = torch.full((len(indices), width), IGNORED, dtype=torch.long)
    attention = torch.zeros((len(indices), width), dtype=torch.long)
    for row, index in enumerate(indices):
        ids = sentences.input_ids[index]
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, : len(ids)] = torch.tensor(sentences.labels[index])
        attention[row, : len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


def tagger_from(encoder: PreTrainedModel, labels: list[str], seed: int) -> PreTrainedModel:
    """``AutoModelForTokenClassification`` on ``encoder``'s weights, its ``id2label`` set (so that
    a saved tagger works in a plain ``pipeline("token-classification")``). The head is drawn from
    ``seed`` alone: the pretrained model and its baseline start from the same head."""
    config = encoder.config.__class__.from_dict(encoder.config.to_dict())
    config.num_labels, config.architectures = len(labels), None
    config.id2label, config.label2id = dict(enumerate(labels)), {label: i for i, label in enumerate(labels)}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with MODEL_LOCK:  # transformers' process-wide patches while a model is built (core.model.construction)
            model = AutoModelForTokenClassification.from_config(config)
    missing, unexpected = model.base_model.load_state_dict(encoder.base_model.state_dict(), strict=False)
    stray = [k for k in missing if not k.startswith("pooler.")] + [k for k in unexpected if not k.startswith("pooler.")]
    if stray:
        raise ValueError(f"finetune: the encoder's weights do not fit a tagger of its own config: {stray[:5]}")
    return model


def _batches(sentences: AlignedSentences, pad_id: int, device: torch.device, batch_size: int = 64):
    order = np.argsort(-sentences.lengths, kind="stable")  # longest first: little padding
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        yield indices, {k: v.to(device) for k, v in collate_tagged(sentences, indices, pad_id).items()}


@torch.no_grad()
def predict_tags(model: PreTrainedModel, sentences: AlignedSentences, pad_id: int, device: torch.device,
                 amp_dtype: torch.dtype | None, outside: int) -> np.ndarray:
    """Each word's predicted label id (its first piece's), flattened over the sentences, in eval mode."""
    model.eval()
    pieces: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(sentences)
    for indices, batch in _batches(sentences, pad_id, device):
        batch.pop("labels")
        with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            predicted = model(**batch).logits.argmax(-1).cpu().numpy()
        for row, index in enumerate(indices):
            pieces[index] = predicted[row]
    return sentences.word_predictions(pieces, outside)


def fit_tag_head(model: PreTrainedModel, sentences: AlignedSentences, pad_id: int, device: torch.device,
                 amp_dtype: torch.dtype | None, seed: int) -> None:
    """Linear probing for tokens: the classifier layer set to a logistic regression (scikit-learn's,
    L2, C=1) fitted on the frozen encoder's hidden states of the labelled pieces (LP-FT, as the
    sentence runs start)."""
    from sklearn.linear_model import LogisticRegression  # imported when used: ~50 MB with SciPy

    model.eval()
    features, targets = [], []
    with torch.no_grad():
        for _, batch in _batches(sentences, pad_id, device):
            labels = batch.pop("labels")
            with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
                hidden = model.base_model(**batch).last_hidden_state
            keep = labels != IGNORED
            features.append(hidden[keep].float().cpu().numpy())
            targets.append(labels[keep].cpu().numpy())
    probe = LogisticRegression(max_iter=2000, random_state=seed).fit(np.concatenate(features), np.concatenate(targets))
    weight, bias = probe.coef_, probe.intercept_
    if weight.shape[0] == 1:  # two classes: scikit-learn keeps one logit difference; split it in two
        weight, bias = np.vstack([-weight / 2, weight / 2]), np.array([-bias[0] / 2, bias[0] / 2])
    # A label no training piece has (the I- of a type seen only in one-word entities) starts far below the others.
    full_weight = np.zeros(tuple(model.classifier.weight.shape))
    full_bias = np.full(model.classifier.bias.shape[0], bias.min() - 10.0)
    full_weight[probe.classes_], full_bias[probe.classes_] = weight, bias
    with torch.no_grad():
        model.classifier.weight.copy_(torch.as_tensor(full_weight, dtype=model.classifier.weight.dtype))
        model.classifier.bias.copy_(torch.as_tensor(full_bias, dtype=model.classifier.bias.dtype))
