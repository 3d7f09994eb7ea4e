"""Assembling a run from its parts: sequences per split, collator, model, evaluation set.

Shared by the tuning, training and evaluation nodes so that a tuning trial and the final
training run are built the same way.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from transformers import BertForMaskedLM, PreTrainedTokenizerBase

from bert_mlm.config import (
    DistributedConfig,
    EvaluationConfig,
    MaskingConfig,
    ModelConfig,
    SequenceConfig,
    TrainingConfig,
)
from bert_mlm.config.model import LOCAL_RANGES
from bert_mlm.core.common.redaction import redact
from bert_mlm.core.data.corpus import RawText, clean_documents
from bert_mlm.core.data.sources import CorpusSource
from bert_mlm.core.data.sources.settings import source_settings
from bert_mlm.core.evaluate.protocol import (
    StreamedEvaluationSet,
    baseline_accuracy,
    change_sentence,
    frequent_tokens,
    paired_change,
    prepare_evaluation_set,
    score_sequences,
)
from bert_mlm.core.evaluate.result import Evaluation, HeldOut
from bert_mlm.core.model.bert import build_model, planned_bert_config
from bert_mlm.core.model.distributed import SINGLE, Rank, launch
from bert_mlm.core.model.token_ids import TokenIds
from bert_mlm.core.tokens.blend import plan_mixture
from bert_mlm.core.tokens.sequences import Collator, IndexedSequences, SequenceIndex, build_sequences
from bert_mlm.core.tokens.token_store import TokenStore
from bert_mlm.core.tokens.tokenizer import encode_documents
from bert_mlm.core.train.loop import StepCallback, TrainingResult, Validation, train
from bert_mlm.core.train.result import VALID_LOSS
from bert_mlm.cpus import intra_op_threads
from bert_mlm.errors import UserError


def corpus_sequences(items: Iterable[RawText], tokenizer: PreTrainedTokenizerBase,
                     config: SequenceConfig, held_out_of: tuple[dict, str] | None = None) -> list[np.ndarray]:
    """Sequences of an extra held-out corpus (``evaluation.corpus_path``): every paragraph kept
    (no length filter, no de-duplication), encoded and cut as the training data is. ``held_out_of``
    (the corpus's split ratios and salt): only the documents the hash split keeps out of training
    (the replayed general text's own held-out side, when it is the same file: ``corpus.replay``)."""
    ratios, salt = held_out_of or (None, "")
    documents, _ = clean_documents(items, min_words=1, deduplicate=False, ratios=ratios, salt=salt)
    if held_out_of is not None:
        documents = documents[documents["split"] != "train"]
    encoded = encode_documents(tokenizer, documents["text"].tolist())
    return build_sequences(encoded, config.mode, config.max_length, tokenizer.cls_token_id, tokenizer.sep_token_id)


def check_extra_corpus(source: CorpusSource) -> None:
    """An extra evaluation corpus whose files hold no byte, or whose first texts cannot be read (a
    binary file), is refused before any training."""
    if not source.is_empty and source.total_bytes() == 0:
        files = source.files()
        raise UserError(f"evaluation.corpus_path: {redact(source.path)!r} is empty ({len(files)} file(s), 0 bytes)")
    source.check_first_texts()


def open_sequences(token_store: TokenStore, sequence_index: SequenceIndex,
                   tokenizer: PreTrainedTokenizerBase) -> dict[str, IndexedSequences]:
    """Every split's sequences, read from the memory-mapped store on demand."""
    token_store.check_tokenizer(tokenizer.get_vocab())
    token_store.verify(sequence_index.splits, len(tokenizer))
    return {
        split: sequence_index.sequences(token_store, split, tokenizer.cls_token_id, tokenizer.sep_token_id)
        for split in sequence_index.splits
    }


@dataclass
class Experiment:
    tokenizer: PreTrainedTokenizerBase
    sequences: dict[str, Sequence[np.ndarray]]
    model_config: ModelConfig
    training: TrainingConfig
    masking: MaskingConfig
    evaluation: EvaluationConfig
    sequence_config: SequenceConfig
    schedule_note: str = ""  # where the learning rate and warmup came from (:meth:`TrainingConfig.resolved`)

    def __post_init__(self) -> None:
        # auto's rate depends on where the weights start (halved for local initialisation wider than 128):
        # set here too, so that an experiment built without from_store trains its model at the rule's rate.
        if self.training.halves_auto_rate(self.model_config.hidden_size, self.model_config.starts_locally()):
            self.training = self.training.replace(learning_rate=self.training.peak_learning_rate(
                self.model_config.hidden_size, local=True))

    @classmethod
    def from_store(cls, token_store: TokenStore, sequence_index: SequenceIndex, tokenizer: PreTrainedTokenizerBase, *,
                   model: ModelConfig, training: TrainingConfig, masking: MaskingConfig, evaluation: EvaluationConfig,
                   sequences: SequenceConfig, mixture: dict | list | None = None) -> Experiment:
        """An experiment on the stored sequences, refused when the index was built for other
        ``sequences`` parameters or lacks the word boundaries whole-word masking needs; ``auto``
        learning rate and warmup resolved for the model (:meth:`TrainingConfig.resolved`).
        ``mixture``: ``corpus.sources``, whose weights the epochs draw the stored sources by."""
        if (sequence_index.mode, sequence_index.max_length) != (sequences.mode, sequences.max_length):
            raise UserError(f"sequences: the stored sequence_index is {sequence_index.mode} x "
                            f"{sequence_index.max_length}, the parameters ask for {sequences.mode} x "
                            f"{sequences.max_length}; run the sequences pipeline with these parameters first")
        sequence_index.check_words(masking.words, masking.word_segmenter)
        sequence_index.check_words(evaluation.whole_word, masking.word_segmenter, "evaluation.whole_word")
        opened = open_sequences(token_store, sequence_index, tokenizer)
        settings, train = source_settings(mixture), opened.get("train")
        if train is not None and train.sources:
            train.mixture = plan_mixture(train.sources, settings)
        elif settings is not None:
            raise UserError(f"corpus.sources: names the sources {sorted(settings)}, but the token store holds one "
                            "corpus, not a mixture; run the data stages with these sources")
        hidden_size, local = planned_bert_config(model, len(tokenizer)).hidden_size, model.starts_locally()
        training, note = training.resolved(hidden_size, bool(model.init_from), len(train) if train is not None else 0,
                                           local)
        if not model.init_from:  # where the weights start (model.initialisation), auto's choice named
            start = model.resolved()
            note += f"; {start.initialisation} initialisation at {start.initializer_range:g}" + (
                " (auto: local " + ", ".join(f"at {spread:g} up to width {width}" for width, spread in LOCAL_RANGES)
                + ")" if model.initialisation == "auto" else "")
        return cls(tokenizer, opened, model, training, masking, evaluation, sequences, note)

    def with_mixture(self, mixture: dict) -> Experiment:
        """This experiment drawing its training epochs by ``mixture`` (``corpus.sources`` with other
        weights: a tuning trial's replay share); the stored sequences are shared, not copied."""
        train = copy.copy(self.sequences["train"])
        train.mixture = plan_mixture(train.sources, source_settings(mixture))
        return replace(self, sequences={**self.sequences, "train": train})

    @functools.cached_property
    def token_ids(self) -> TokenIds:
        return TokenIds.from_tokenizer(self.tokenizer)

    @property
    def collator(self) -> Collator:
        return self.collator_for(self.masking)

    def collator_for(self, masking: MaskingConfig) -> Collator:
        """The collator that ``masking`` trains with: whole-word masking needs each batch's word
        starts (a tuning trial may switch it)."""
        sequences = self.sequence_config
        return self.token_ids.collator(sequences.max_length, sequences.padding, masking.words)

    def evaluation_set(self, split: str, max_sequences: int | None = None,
                       min_masked_tokens: int | None = None) -> StreamedEvaluationSet:
        config = self.evaluation.replace(max_sequences=max_sequences or self.evaluation.max_sequences,
                                         min_masked_tokens=min_masked_tokens or self.evaluation.min_masked_tokens)
        return prepare_evaluation_set(self.sequences.get(split, []), self.collator, self.token_ids.mask,
                                      self.token_ids.replacement, config)

    def new_model(self) -> BertForMaskedLM:
        return build_model(self.model_config, self.tokenizer, seed=self.training.seed)

    def validation(self, training: TrainingConfig) -> Validation | None:
        """Validation during training (``training.eval_every``): the fixed protocol on the valid
        split, stopped at ``training.eval_masked_tokens`` masked tokens; the same masks at every
        step. None when it is off."""
        if not training.eval_every:
            return None
        if not len(self.sequences.get("valid", [])):
            raise UserError("training.eval_every: the valid split holds no sequences to validate on (a corpus of few "
                            "documents may put none there); set training.eval_every=0")
        evaluation_set = self.evaluation_set("valid", min_masked_tokens=training.eval_masked_tokens)
        reference = baseline_accuracy(evaluation_set, self.frequent_ids[0])  # the plateau's measure, once
        return lambda model: replace(self.scores(model, evaluation_set, self.frequent_ids), baseline_accuracy=reference)

    def train(self, model: BertForMaskedLM, training: TrainingConfig | None = None,
              masking: MaskingConfig | None = None, on_step: StepCallback | None = None,
              rank: Rank = SINGLE, validation: Validation | None = None) -> TrainingResult:
        """Train ``model`` on the train split with the experiment's sections, or with a tuning
        trial's ``training`` and ``masking``; validated as ``training.eval_every`` says, or by
        ``validation`` (a tuning trial's)."""
        masking = masking or self.masking
        training = training or self.training
        return train(model, self.sequences.get("train", []), self.token_ids, masking, training,
                     self.collator_for(masking), on_step, rank, validation or self.validation(training))

    def scores(self, model: BertForMaskedLM, evaluation_set: StreamedEvaluationSet,
               frequent_ids: Sequence[int] = ()) -> HeldOut:
        """The fixed protocol's scores (bf16 on a GPU, fp32 on a CPU: :func:`evaluation_dtype`)."""
        return score_sequences(model, evaluation_set, self.evaluation.batch_size, frequent_ids=frequent_ids).summary()

    @functools.cached_property
    def frequent_ids(self) -> list[int]:
        """The train split's most frequent tokens (from the store's counts when it has them)."""
        train = self.sequences.get("train", [])
        counts = getattr(getattr(train, "split", None), "counts", None)
        return frequent_tokens(counts if counts is not None else train, self.token_ids.special)


def train_trial(experiment: Experiment, masking: MaskingConfig, training: TrainingConfig,
                evaluation_set: StreamedEvaluationSet, eval_every: int, report,
                score: Callable[[BertForMaskedLM], float] | None = None) -> float:
    """One tuning trial (the same initial model, data order and steps for all): scored by the eval
    loss every ``eval_every`` steps (reported to the pruner), or with ``score`` once at the end (no
    pruning: an eval loss along the way would prune by the very proxy ``score`` replaces)."""
    model = experiment.new_model()
    training = training.replace(eval_every=0, keep_best=False)
    last = {"loss": float("nan")}

    def on_step(step: int, record: dict) -> None:
        if VALID_LOSS in record:
            last["loss"] = record[VALID_LOSS]
            report(step, last["loss"])

    if score is not None:
        experiment.train(model, training, masking)
        last["loss"] = score(model)
    else:
        experiment.train(model, training.replace(eval_every=eval_every), masking, on_step,
                         validation=lambda trained: experiment.scores(trained, evaluation_set))
    torch.cuda.empty_cache()  # the next trial builds a fresh model (a no-op where CUDA was never used)
    return last["loss"]


def mixture_shares(sequences, seed: int = 0) -> dict | None:
    """A mixture's per-source sequences and tokens in epoch 0 of ``seed``, counted on the drawn
    index (not estimated); ``None`` without a mixture."""
    plan = getattr(sequences, "mixture", None)
    return None if plan is None else plan.shares(plan.sample(seed, 0), sequences.lengths)


def held_out_metrics(model: BertForMaskedLM, tokenizer: PreTrainedTokenizerBase, token_store: TokenStore,
                     sequence_index: SequenceIndex, protocol: EvaluationConfig, sequences: SequenceConfig,
                     extra_corpus: Iterable[RawText] | None = None, device: torch.device | str = "cpu",
                     starting_model: Callable[[], BertForMaskedLM] | None = None,
                     corpus_names: tuple[str, str] = ("the test split", "evaluation.corpus_path"),
                     extra_held_out_of: tuple[dict, str] | None = None) -> Evaluation:
    """Fixed-protocol scores on the test split (and an extra held-out corpus when given) beside the
    most-frequent-token reference; the model is moved to ``device`` and stays there.

    ``starting_model`` (continued pretraining: :func:`starting_weights`) is built once ``model`` is
    scored, scored on the same masked tokens, then freed: each set gains
    :func:`~bert_mlm.core.evaluate.protocol.paired_change`'s starting scores and changes, and the
    before/after in a sentence naming ``corpus_names`` (the held-out split's, the extra corpus's)."""
    model.to(device)
    ids = TokenIds.from_tokenizer(tokenizer)
    collator = ids.collator(sequences.max_length, sequences.padding)
    sequence_index.check_words(protocol.whole_word, "auto", "evaluation.whole_word")
    frequent_ids = frequent_tokens(token_store.split("train").counts, ids.special)
    frequent = frequent_ids[0]  # the most-frequent-token reference
    held_out = {"test": open_sequences(token_store, sequence_index, tokenizer)["test"]}
    if extra_corpus is not None:
        held_out["extra"] = corpus_sequences(extra_corpus, tokenizer, sequences, extra_held_out_of)
        if not held_out["extra"]:
            raise UserError("evaluation.corpus_path: the extra evaluation corpus holds no text to evaluate on")
    evaluation_sets = {
        name: prepare_evaluation_set(rows, collator, ids.mask, ids.replacement, protocol)
        for name, rows in held_out.items()
    }
    scores = {name: score_sequences(model, evaluation_set, protocol.batch_size, frequent_ids=frequent_ids)
              for name, evaluation_set in evaluation_sets.items()}
    scored = {name: score.summary() for name, score in scores.items()}
    if starting_model is not None:
        start = starting_model().to(device)
        scored = {name: paired_change(scores[name], score_sequences(start, evaluation_set, protocol.batch_size,
                                                                    frequent_ids=frequent_ids))
                  for name, evaluation_set in evaluation_sets.items()}
        del start
        torch.cuda.empty_cache()
        scored = {name: replace(held, change_summary=change_sentence(held, corpus, forgetting=name == "extra"))
                  for (name, held), corpus in zip(scored.items(), corpus_names, strict=False)}
    scored = {name: replace(held, held_out_sequences=len(evaluation_sets[name]),
                            baseline_accuracy=baseline_accuracy(evaluation_sets[name], frequent))
              for name, held in scored.items()}
    return Evaluation(scored["test"], tokenizer.convert_ids_to_tokens(frequent), protocol.mask_probability,
                      protocol.seed, protocol.whole_word, extra=scored.get("extra"))


def starting_weights(model: ModelConfig, tokenizer: PreTrainedTokenizerBase) -> Callable[[], BertForMaskedLM] | None:
    """For continued pretraining (``model.init_from``), what builds the weights training started
    from, exactly as the training node builds them (:func:`~bert_mlm.core.model.bert.build_model`): the
    model the before/after compares against. None when training started from random weights."""
    if not model.init_from:
        return None
    return functools.partial(build_model, model, tokenizer, 0)  # the seed draws nothing when init_from is set


class NonMainNodeFinished(RuntimeError):
    """Raised on machines other than node 0 after their ranks finished: they write nothing."""


def train_data_parallel(experiment: Experiment,
                        distributed: DistributedConfig) -> tuple[BertForMaskedLM, TrainingResult]:
    """Train the experiment on ``distributed.world_size`` data-parallel workers (in-process when
    it is 1) and return the trained model and rank 0's result."""
    if distributed.world_size == 1:
        model = experiment.new_model()
        return model, experiment.train(model)
    returned = launch(distributed, _train_rank, experiment)
    if returned is None:
        raise NonMainNodeFinished(f"distributed.node_rank={distributed.node_rank}: this machine's ranks finished "
                                  "training; node 0 writes the model and the other artifacts")
    state, result = returned
    model = experiment.new_model()
    model.load_state_dict(state)
    return model, result


def _train_rank(experiment: Experiment, rank: Rank):
    if not torch.cuda.is_available():
        # Workers share this machine's CPUs: oversubscribed OpenMP threads slow every step >10x.
        threads, _ = intra_op_threads(experiment.training.threads, int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
        torch.set_num_threads(threads)
    model = experiment.new_model()
    result = experiment.train(model, rank=rank)
    if rank.is_main:
        return {k: v.detach().cpu() for k, v in model.state_dict().items()}, result
    return None
