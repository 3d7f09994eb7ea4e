"""Fine-tuning evaluation: did pretraining help the user's task?

The pretrained encoder is fine-tuned (all weights) for sequence classification on a labelled task,
``finetune.seeds`` times, and so is its starting point (the ``model.init_from`` checkpoint, or a
randomly initialised model of the same shape: the pretraining's own initial weights) with the same
seeds, classifier head, batches in the same order and tokenizer: "pretraining gained +x.x accuracy
points [95 % CI lo, hi]" (:mod:`bert_mlm.core.finetune.result`). This is how the literature judges
pretraining (Gururangan et al. 2020; Wettig et al. 2023): masked-LM loss can rank choices the wrong
way, and a frozen probe of a small encoder cannot tell a trained one from a random one (``mode:
frozen`` keeps that cheap check).
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModelForSequenceClassification, PreTrainedModel, PreTrainedTokenizerBase

from bert_mlm.config import FinetuneConfig, TrainingConfig
from bert_mlm.core.common.device import autocast_dtype, resolve_device, resolve_precision
from bert_mlm.core.common.progress import Progress
from bert_mlm.core.finetune.labelled import EncodedExamples, Task, TaskSource, encode_examples, load_task
from bert_mlm.core.finetune.result import (
    BASELINE,
    PRETRAINED,
    UNKNOWN_WARNING_RATE,
    FinetuneRuns,
    ModelScores,
    RunRow,
    macro_f1,
)
from bert_mlm.core.model.bert import load_for_continued_pretraining
from bert_mlm.core.model.checkpoints import seed_everything
from bert_mlm.core.model.construction import MODEL_LOCK
from bert_mlm.core.model.optim import Optimisation
from bert_mlm.core.train.loop import epoch_batches
from bert_mlm.core.train.records import NonFiniteLossError

logger = logging.getLogger(__name__)


@dataclass
class PreparedTask:
    """A task's examples encoded once with the tokenizer every compared model shares."""

    task: Task
    train: EncodedExamples
    evaluation: EncodedExamples
    pad_id: int
    unknown_rate: float = 0.0  # share of the labelled text's tokens that are [UNK] (specials not counted)

    @classmethod
    def build(cls, task: Task, tokenizer: PreTrainedTokenizerBase, max_length: int) -> PreparedTask:
        train = encode_examples(task, task.train, tokenizer, max_length)
        evaluation = encode_examples(task, task.evaluation, tokenizer, max_length)
        rate = unknown_rate([*train.input_ids, *evaluation.input_ids], tokenizer)
        if rate > UNKNOWN_WARNING_RATE:
            logger.warning(
                "finetune: %.1f %% of the labelled text's tokens are %s under the model's vocabulary (more than %.0f "
                "%%): the classifier barely sees the text, so its result says little about pretraining. Is "
                "finetune.train_path in the language and script the model's vocabulary was built for?",
                100 * rate, tokenizer.unk_token, 100 * UNKNOWN_WARNING_RATE)
        return cls(task, train, evaluation, tokenizer.pad_token_id, rate)


def unknown_rate(input_ids: list[list[int]], tokenizer: PreTrainedTokenizerBase) -> float:
    """The share of ``tokenizer.unk_token_id`` among the tokens of ``input_ids`` that are not
    special tokens ([CLS], [SEP], padding)."""
    special = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    counts = np.bincount(np.fromiter((i for ids in input_ids for i in ids), dtype=np.int64),
                         minlength=max(len(tokenizer), 1))
    text_tokens = counts.sum() - sum(int(counts[i]) for i in special if i < len(counts))
    unknown = int(counts[tokenizer.unk_token_id]) if tokenizer.unk_token_id is not None else 0
    return unknown / text_tokens if text_tokens else 0.0


def prepare_task(config: FinetuneConfig, tokenizer: PreTrainedTokenizerBase, max_positions: int) -> PreparedTask:
    return PreparedTask.build(load_task(TaskSource.of(config)), tokenizer, min(config.max_length, max_positions))


def collate(examples: EncodedExamples, indices: np.ndarray, pad_id: int) -> dict[str, torch.Tensor]:
    """One batch padded to its longest example (rounded up to a multiple of 8)."""
    width = max(len(examples.input_ids[i]) for i in indices)
    width = -(-width // 8) * 8
    input_ids = torch.full((len(indices), width), pad_id, dtype=torch.long)
    token_types = torch.zeros((len(indices), width), dtype=torch.long)
    for row, index in enumerate(indices):
        ids = examples.input_ids[index]
        input_ids[row, : len(ids)] = torch.tensor(ids)
        token_types[row, : len(ids)] = torch.tensor(examples.token_type_ids[index])
    return {"input_ids": input_ids, "attention_mask": (input_ids != pad_id).long(), "token_type_ids": token_types,
            "labels": torch.as_tensor(examples.labels[indices])}


def classifier_from(encoder: PreTrainedModel, task: Task, seed: int) -> PreTrainedModel:
    """``AutoModelForSequenceClassification`` on ``encoder``'s weights. The head (pooler and
    classifier, which a masked LM does not have) is drawn from ``seed`` alone, so the pretrained
    model and its baseline start from the same head."""
    config = encoder.config.__class__.from_dict(encoder.config.to_dict())
    config.num_labels = len(task.labels)
    config.id2label = dict(enumerate(task.labels))
    config.label2id = task.label_ids
    config.problem_type = "single_label_classification"
    config.architectures = None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with MODEL_LOCK:
            model = AutoModelForSequenceClassification.from_config(config)
    missing, unexpected = model.base_model.load_state_dict(encoder.base_model.state_dict(), strict=False)
    stray = [k for k in missing if not k.startswith("pooler.")] + list(unexpected)
    if stray:
        raise ValueError(f"finetune: the encoder's weights do not fit a classifier of its own config: {stray[:5]}")
    return model


def pooled(model: PreTrainedModel, batch: dict[str, torch.Tensor], pooling: str) -> torch.Tensor:
    """What the classifier layer reads: the [CLS] state through BERT's pooler (``cls``), or the
    mean of the last hidden states over the real tokens (``mean``)."""
    output = model.base_model(**batch)
    if pooling == "cls":
        return output.pooler_output
    weights = batch["attention_mask"].unsqueeze(-1).to(output.last_hidden_state.dtype)
    return (output.last_hidden_state * weights).sum(1) / weights.sum(1)


def classify(model: PreTrainedModel, batch: dict[str, torch.Tensor], pooling: str) -> torch.Tensor:
    """The logits: the pooled vector through the model's dropout and classifier layers (with
    ``cls``, what ``AutoModelForSequenceClassification`` itself computes)."""
    return model.classifier(model.dropout(pooled(model, batch, pooling)))


def eval_batches(examples: EncodedExamples, pad_id: int, device: torch.device, batch_size: int = 128):
    """(example indices, model inputs on ``device``) of every example, longest first (little padding)."""
    order = np.argsort(-examples.lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        yield indices, {k: v.to(device) for k, v in collate(examples, indices, pad_id).items() if k != "labels"}


@torch.no_grad()
def predict(model: PreTrainedModel, examples: EncodedExamples, pad_id: int, device: torch.device,
            amp_dtype: torch.dtype | None, pooling: str = "cls") -> np.ndarray:
    """The predicted class of every example, in eval mode."""
    model.eval()
    predictions = np.empty(len(examples), dtype=np.int64)
    for indices, batch in eval_batches(examples, pad_id, device):
        with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            predictions[indices] = classify(model, batch, pooling).argmax(-1).cpu().numpy()
    return predictions


@torch.no_grad()
def classifier_inputs(model: PreTrainedModel, examples: EncodedExamples, pad_id: int, device: torch.device,
                      amp_dtype: torch.dtype | None, pooling: str) -> np.ndarray:
    """The pooled vector of every example, from the frozen model in eval mode."""
    model.eval()
    vectors = np.zeros((len(examples), model.config.hidden_size), dtype=np.float32)
    for indices, batch in eval_batches(examples, pad_id, device):
        with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            vectors[indices] = pooled(model, batch, pooling).float().cpu().numpy()
    return vectors


def fit_head(model: PreTrainedModel, examples: EncodedExamples, pad_id: int, device: torch.device,
             amp_dtype: torch.dtype | None, pooling: str, seed: int) -> None:
    """Linear probing: set the classifier layer to a logistic regression (scikit-learn's, L2,
    C=1) fitted on the frozen model's classifier inputs of the training examples."""
    from sklearn.linear_model import LogisticRegression  # imported when used: ~50 MB with SciPy

    features = classifier_inputs(model, examples, pad_id, device, amp_dtype, pooling)
    probe = LogisticRegression(max_iter=2000, random_state=seed).fit(features, examples.labels)
    weight, bias = probe.coef_, probe.intercept_
    if weight.shape[0] == 1:  # two classes: scikit-learn keeps one logit difference; split it in two
        weight, bias = np.vstack([-weight / 2, weight / 2]), np.array([-bias[0] / 2, bias[0] / 2])
    with torch.no_grad():
        model.classifier.weight.copy_(torch.as_tensor(weight, dtype=model.classifier.weight.dtype))
        model.classifier.bias.copy_(torch.as_tensor(bias, dtype=model.classifier.bias.dtype))


@dataclass
class RunOutcome:
    """One fine-tuning run: eval predictions of the reported epoch, a row per epoch, and the
    fine-tuned classifier (only when it is to be kept)."""

    predictions: np.ndarray
    history: list[RunRow]
    model: PreTrainedModel | None = None


BatchCallback = Callable[[str, int, int, np.ndarray], None]  # (model name, seed, epoch, example indices)
MAX_NONFINITE_STEPS = 5


@dataclass
class _Fit:
    """One run's model and optimiser, and what carries across its epochs: the step, the streak of
    non-finite steps, and the digest of every batch's example indices (``data_order``)."""

    model: PreTrainedModel
    schedule: TrainingConfig  # the run's steps, batch size, learning rate and seed
    optimisation: Optimisation
    name: str
    step: int = 0
    nonfinite: int = 0
    order: hashlib.blake2b = field(default_factory=lambda: hashlib.blake2b(digest_size=8))


@dataclass
class Runner:
    """Where and how the runs go: the prepared task, the configuration, device and precision."""

    prepared: PreparedTask
    config: FinetuneConfig
    device: torch.device
    precision: str
    on_batch: BatchCallback | None = None
    progress: Progress | None = None

    @classmethod
    def create(cls, prepared: PreparedTask, config: FinetuneConfig, device: str = "auto", precision: str = "auto",
               **kwargs) -> Runner:
        resolved = resolve_device(device)
        return cls(prepared, config, resolved, resolve_precision(precision, resolved), **kwargs)

    def run(self, encoder: PreTrainedModel, name: str, seed: int, keep_model: bool = False) -> RunOutcome:
        if self.config.mode == "frozen":
            return self._frozen(encoder, name, seed)
        return self._full(encoder, name, seed, keep_model)

    def _full(self, encoder: PreTrainedModel, name: str, seed: int, keep_model: bool) -> RunOutcome:
        config, prepared, device = self.config, self.prepared, self.device
        amp_dtype = autocast_dtype(self.precision)
        model = classifier_from(encoder, prepared.task, seed).to(device)
        history, best, best_predictions, best_state, stale = [], -1.0, None, None, 0
        if config.head_init == "probe":
            started = time.perf_counter()
            fit_head(model, prepared.train, prepared.pad_id, device, amp_dtype, config.pooling, seed)
            # Epoch 0: the linear probe alone, before any weight of the encoder moves.
            history.append(self._row(model, name, seed, 0, float("nan"), float("nan"), "", started)[0])
        schedule = self._schedule(model, seed)
        fit = _Fit(model, schedule, Optimisation.build(model, schedule, device, self.precision), name)
        seed_everything(seed)  # dropout: the same stream for the pretrained model and its baseline
        for epoch in range(config.epochs):
            started = time.perf_counter()
            train_loss = self._epoch(fit, epoch)
            row, predictions = self._row(model, name, seed, epoch + 1, train_loss, fit.optimisation.learning_rate,
                                         fit.order.hexdigest(), started)
            history.append(row)
            accuracy = row.eval_accuracy
            if self.progress is not None:  # the ETA from the finished epochs' own time
                self.progress.update(1, seconds=time.perf_counter() - started, model=name, seed=seed,
                                     acc=f"{accuracy:.4f}")
            if accuracy > best:
                best, best_predictions, stale = accuracy, predictions, 0
                if config.early_stopping_patience and keep_model:
                    best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
            else:
                stale += 1
            if config.early_stopping_patience and stale >= config.early_stopping_patience:
                if self.progress is not None:
                    self.progress.update(config.epochs - epoch - 1, seconds=0.0)
                break
        # Early stopping reports the best fine-tuned epoch (its weights when kept); otherwise the last.
        tuned = [row for row in history if row.epoch > 0]
        reported = max(tuned, key=lambda r: r.eval_accuracy) if config.early_stopping_patience else tuned[-1]
        for row in history:
            row.reported = row is reported
        if best_state is not None:
            model.load_state_dict(best_state)
        model.to("cpu")
        final = best_predictions if config.early_stopping_patience else predictions
        return RunOutcome(final, history, model if keep_model else None)

    def _row(self, model: PreTrainedModel, name: str, seed: int, epoch: int, train_loss: float, learning_rate: float,
             order: str, started: float) -> tuple[RunRow, np.ndarray]:
        """The eval predictions after ``epoch`` and its ``finetune_runs`` row."""
        prepared = self.prepared
        predictions = predict(model, prepared.evaluation, prepared.pad_id, self.device, autocast_dtype(self.precision),
                              self.config.pooling)
        row = RunRow(name, seed, epoch, train_loss, float((predictions == prepared.evaluation.labels).mean()),
                     macro_f1(prepared.evaluation.labels, predictions, len(prepared.task.labels)), learning_rate,
                     time.perf_counter() - started, order)
        return row, predictions

    def _schedule(self, model: PreTrainedModel, seed: int) -> TrainingConfig:
        """The run as the training loop's configuration, so that it takes the project's optimizer
        step (AdamW groups, linear warmup and decay, GradScaler with unscale-before-clip) and its
        epoch order (length-bucketed batches shuffled from (seed, epoch) alone: every model
        fine-tuned with this seed sees the same batches in the same order); configured as BERT
        fine-tuning usually is."""
        config = self.config
        total = config.epochs * math.ceil(len(self.prepared.train) / config.batch_size)
        return TrainingConfig(max_steps=total, batch_size=config.batch_size,
                              learning_rate=config.learning_rate_for(model.config.hidden_size),
                              weight_decay=config.weight_decay, adam_beta2=0.999, adam_epsilon=1e-8, schedule="linear",
                              warmup_steps=round(config.warmup_ratio * total), seed=seed, precision=self.precision,
                              progress=False)

    def _epoch(self, fit: _Fit, epoch: int) -> float:
        """One pass over the training examples in (seed, epoch)'s batch order; the mean loss."""
        prepared, device, amp_dtype = self.prepared, self.device, autocast_dtype(self.precision)
        fit.model.train()
        loss_sum, examples = 0.0, 0
        for indices in epoch_batches(prepared.train.lengths, fit.schedule, epoch):
            fit.order.update(np.ascontiguousarray(indices, dtype=np.int64).tobytes())
            if self.on_batch is not None:
                self.on_batch(fit.name, fit.schedule.seed, epoch, indices)
            batch = {k: v.to(device, non_blocking=True)
                     for k, v in collate(prepared.train, indices, prepared.pad_id).items()}
            labels = batch.pop("labels")
            with torch.autocast(device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
                logits = classify(fit.model, batch, self.config.pooling)
            loss = F.cross_entropy(logits.float(), labels)
            fit.optimisation.scaler.scale(loss).backward()
            loss = loss.detach()
            value = float(loss)  # fine-tuning reads every step's loss: its batches are small
            _, diverged = fit.optimisation.step(fit.model, loss, fit.step)
            fit.step += 1
            fit.nonfinite = fit.nonfinite + 1 if bool(diverged) else 0
            if fit.nonfinite >= MAX_NONFINITE_STEPS:
                raise NonFiniteLossError(
                    f"finetune: the loss was non-finite for {fit.nonfinite} consecutive steps "
                    f"({fit.name}, seed {fit.schedule.seed}); lower finetune.learning_rate or use fp32/bf16"
                )
            loss_sum += value * len(indices)
            examples += len(indices)
        return loss_sum / max(examples, 1)

    def _frozen(self, encoder: PreTrainedModel, name: str, seed: int) -> RunOutcome:
        """The linear probe alone: the classifier layer fitted on the frozen encoder's features."""
        started = time.perf_counter()
        prepared, amp_dtype, device = self.prepared, autocast_dtype(self.precision), self.device
        model = classifier_from(encoder, prepared.task, seed).to(device)
        fit_head(model, prepared.train, prepared.pad_id, device, amp_dtype, self.config.pooling, seed)
        row, predictions = self._row(model, name, seed, 1, float("nan"), float("nan"), "", started)
        if self.progress is not None:
            self.progress.update(self.config.epochs, seconds=time.perf_counter() - started, model=name, seed=seed,
                                 acc=f"{row.eval_accuracy:.4f}")
        row.reported = True
        return RunOutcome(predictions, [row])

    def seed_accuracies(self, encoder: PreTrainedModel) -> list[float]:
        """Eval accuracy after fine-tuning ``encoder`` with each seed (the tuning objective)."""
        return [float((self.run(encoder, PRETRAINED, seed).predictions == self.prepared.evaluation.labels).mean())
                for seed in self.config.run_seeds]


def starting_point(config: FinetuneConfig, trained: PreTrainedModel, tokenizer: PreTrainedTokenizerBase,
                   init_from: str | None, init_seed: int) -> tuple[PreTrainedModel | None, str]:
    """The baseline encoder and how the report names it: the ``model.init_from`` checkpoint for
    continued pretraining, else the pretraining's initial weights (same config, same seed)."""
    if config.baseline == "none":
        return None, "none"
    if config.baseline != "auto":
        return load_for_continued_pretraining(config.baseline, tokenizer), f"the checkpoint {config.baseline}"
    if init_from:
        return load_for_continued_pretraining(init_from, tokenizer), f"the starting checkpoint {init_from}"
    with torch.random.fork_rng(devices=[]):  # exactly as core.model.bert.build_model drew them
        torch.manual_seed(init_seed)
        model = trained.__class__(trained.config)
    return model, "the random initialisation (same shape)"


def evaluate_finetuning(trained: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, config: FinetuneConfig, *,
                        baseline: PreTrainedModel | None = None, baseline_name: str = "none", device: str = "auto",
                        precision: str = "auto", on_batch: BatchCallback | None = None,
                        prepared: PreparedTask | None = None) -> FinetuneRuns:
    """Fine-tune ``trained`` (and ``baseline`` when given) on the task with every seed."""
    started = time.perf_counter()
    prepared = prepared or prepare_task(config, tokenizer, trained.config.max_position_embeddings)
    candidates = {PRETRAINED: trained, **({BASELINE: baseline} if baseline is not None else {})}
    progress = Progress(len(candidates) * config.seeds * config.epochs, "fine-tuning", unit="epoch",
                        enabled=config.progress)
    runner = Runner.create(prepared, config, device, precision, on_batch=on_batch, progress=progress)
    logger.info("Fine-tuning on %d labelled examples (%d classes), evaluated on %d; %s mode, %d seed(s) x %d epoch(s), "
                "%s on %s", len(prepared.train), len(prepared.task.labels), len(prepared.evaluation), config.mode,
                config.seeds, config.epochs, runner.precision, runner.device)
    scores = {name: ModelScores(np.zeros((config.seeds, len(prepared.evaluation)), dtype=np.int64))
              for name in candidates}
    classifier = None
    try:
        for row, seed in enumerate(config.run_seeds):
            for name, encoder in candidates.items():
                keep = config.save_model and name == PRETRAINED and row == 0
                outcome = runner.run(encoder, name, seed, keep_model=keep)
                scores[name].predictions[row] = outcome.predictions
                scores[name].runs.extend(outcome.history)
                classifier = outcome.model if keep else classifier
    finally:
        progress.close()
    return FinetuneRuns(prepared, config, scores, baseline_name, time.perf_counter() - started, classifier)
