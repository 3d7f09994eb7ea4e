"""``finetune``: did pretraining help the user's task? The fine-tuning evaluation, paired against
the starting point."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from bert_mlm.config.base import Section
from bert_mlm.errors import UserError

MODES = ("full", "frozen")
POOLINGS = ("mean", "cls")
HEAD_INITS = ("probe", "random")
TASKS = ("auto", "sequence", "token")
# What a model is judged against: auto: where pretraining started (model.init_from, else the pretraining's own
# initial weights) | random: the same architecture randomly initialised (no pretraining at all) | none | a model.
BASELINES = ("auto", "random")
# "auto" learning rate: 5e-4 for a 128-wide encoder, scaled by 1/width as pretraining's auto rule
# (8e-5 for BERT-base's 768, inside the 2e-5..1e-4 range BERT's fine-tuning recipes use).
AUTO_LR_BASE, AUTO_LR_WIDTH = 5e-4, 128


class FinetuneConfig(Section):
    """Did pretraining help your task? The trained model and its starting point fine-tuned on a labelled task, seed
    by seed: "pretraining gained +x.x accuracy points [95 % CI lo, hi]". Off until finetune.train_path is given"""

    SECTION = "finetune"

    train_path: str | None = Field(
        None, description="CSV / TSV / Parquet / JSONL with a text and a label column, or CoNLL-style token and tag "
                          "lines / JSONL / Parquet with lists of tokens and tags; null: no fine-tuning evaluation")
    task: Literal[TASKS] = Field(
        "auto", description="auto: token when train_path is CoNLL-style or has list-valued tokens_column and "
                            "tag_column, else sequence | sequence: a label per text | token: a tag per token (NER)")
    eval_path: str | None = Field(None, description="null: a hash split of train_path (eval_fraction of it)")
    text_column: str = Field("text", min_length=1, description="the column holding the text")
    eval_text_column: str | None = Field(
        None, description="when eval_path names its text column differently (null: text_column)")
    pair_column: str | None = Field(None, description="text-pair tasks (NLI, paraphrase): the second text's column")
    label_column: str = Field(
        "label", min_length=1, description="labels of any type, mapped to class ids (the mapping is saved)")
    tokens_column: str = Field(
        "tokens", min_length=1, description="token tasks in JSONL / Parquet: the column of each sentence's tokens")
    tag_column: str = Field(
        "ner_tags", min_length=1, description="token tasks in JSONL / Parquet: the column of each sentence's tags "
                                              "(IOB2, IOB1 or BIOES; integers when the Parquet file names them)")
    label_all_pieces: bool = Field(
        False, description="token tasks: false: a word's first WordPiece carries its tag, the others are ignored | "
                           "true: every piece is labelled (I- for the continuation pieces of a B- word)")
    eval_fraction: float = Field(0.2, gt=0, lt=1, description="the share of train_path held out when eval_path is null")
    max_train_examples: int = Field(
        1000, gt=0, description="labelled examples fine-tuned on (a sample of the train file)")
    max_eval_examples: int = Field(2000, gt=0, description="labelled examples evaluated on (a sample)")
    max_length: int = Field(128, gt=0, description="tokens per example (cut to the model's max_position_embeddings)")
    mode: Literal[MODES] = Field(
        "full", description="full: all weights | frozen: a linear probe on frozen mean-pooled vectors (cheap; small "
                            "encoders do not separate there)")
    # A masked LM never trains its [CLS] output (no next-sentence task), so it barely varies between texts.
    pooling: Literal[POOLINGS] = Field(
        "mean", description="mean: the mean of the last hidden states | cls: BERT's pooled [CLS] (a masked LM never "
                            "trains its [CLS] output)")
    # LP-FT (Kumar et al. 2022): a random head's first large gradients distort pretrained features.
    head_init: Literal[HEAD_INITS] = Field(
        "probe", description="probe: the classifier layer starts as a logistic regression on the frozen features, "
                             "then every weight is fine-tuned (LP-FT) | random")
    epochs: int = Field(3, gt=0, description="passes over the labelled training examples")
    early_stopping_patience: int | None = Field(
        None, gt=0, description="null: all epochs, the last one reported; N: stop after N epochs without a better "
                                "eval accuracy, report the best")
    batch_size: int = Field(
        16, gt=0, description="small labelled sets: more optimizer steps (at 32 a random-init baseline often stuck at "
                              "the majority class)")
    learning_rate: Annotated[float, Field(gt=0)] | Literal["auto"] = Field(
        "auto", description="auto: 5e-4 x 128 / hidden_size (5e-4 at 128, 8e-5 for BERT-base)")
    warmup_ratio: float = Field(0.1, ge=0, lt=1, description="the share of the steps spent warming up")
    weight_decay: float = Field(0.01, ge=0, description="AdamW's decoupled weight decay")
    seeds: int = Field(3, gt=0, description="fine-tuning seeds, each run for the model and for its baseline")
    seed: int = Field(0, ge=0, description="the first seed; also the hash split and the example sample")
    baseline: str | list[str] = Field(
        "auto", description="auto: the pretraining's starting point | random: the same architecture randomly "
                            "initialised | none | a model directory or hub id | a list of these ([auto, random]): "
                            "a paired gain over each",
        json_schema_extra={"requirement": "auto, random, none, a model directory or hub id, or a list of them"})
    save_model: bool = Field(
        False, description="true: keep the first seed's fine-tuned classifier (finetuned_classifier)")
    progress: bool = Field(True, description="a progress bar (a line per tenth in log files)")
    tasks: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="several tasks in one run, name: {train_path: ..., and any other key of "
                                          "this section, over the section's own}; {}: the one task of train_path",
        json_schema_extra={"requirement": "a mapping of task names to mappings of finetune values"})

    @field_validator("train_path", "eval_path")
    @classmethod
    def _a_file(cls, path: str | None, info) -> str | None:
        if path is not None and not Path(path).is_file():
            raise UserError(f"finetune.{info.field_name}: {path!r} is not a file")
        return path

    @model_validator(mode="after")
    def _consistent(self) -> FinetuneConfig:
        if self.eval_path and not self.train_path and not self.tasks:
            raise UserError("finetune.train_path: required when finetune.eval_path is set")
        named = self.baselines
        if isinstance(self.baseline, list) and (not named or len(set(named)) < len(named) or "none" in named):
            raise UserError(f"finetune.baseline: {self.baseline!r} must list different baselines (auto, random, a "
                            "model), without none")
        self.task_configs()  # each task validated now, with its name
        return self

    @property
    def baselines(self) -> list[str]:
        """The starting points the model is paired against, in order (the first: the headline gain)."""
        if isinstance(self.baseline, str):
            return [] if self.baseline == "none" else [self.baseline]
        return [str(name) for name in self.baseline]

    def task_configs(self) -> dict[str, FinetuneConfig]:
        """Each task's settings by name: the section's with the task's own keys over them
        (``finetune.tasks``), else the one unnamed task of ``train_path``; {} without any."""
        if not self.tasks:
            return {"": self} if self.train_path is not None else {}
        shared = self.model_dump(exclude={"tasks"})
        found = {}
        for name, values in self.tasks.items():
            where = f"finetune.tasks.{name}"
            if not str(name).isidentifier():  # it names a folder of the kept models, and a section of the report
                raise UserError(f"{where}: a task's name is a plain word (letters, digits, _)")
            if "tasks" in values:
                raise UserError(f"{where}.tasks: a task cannot hold tasks")
            try:
                found[name] = FinetuneConfig.build({**shared, **values}, where)
            except UserError as error:  # a rule's own message names finetune.<key>: say which task
                raise UserError(str(error) if str(error).startswith(where) else f"{where}: {error}") from error
            if found[name].train_path is None:
                raise UserError(f"{where}.train_path: required (each task names its labelled file)")
        return found

    @property
    def enabled(self) -> bool:
        return self.train_path is not None or bool(self.tasks)

    @property
    def run_seeds(self) -> list[int]:
        return [self.seed + offset for offset in range(self.seeds)]

    def learning_rate_for(self, hidden_size: int) -> float:
        return AUTO_LR_BASE * AUTO_LR_WIDTH / hidden_size if self.learning_rate == "auto" else float(self.learning_rate)
