"""The alternative a user would otherwise pick: Hugging Face `Trainer` + `DataCollatorForLanguageModeling`
(the `run_mlm` recipe), on the same model, data and (unless told otherwise) hyperparameters."""

from __future__ import annotations

import tempfile
import time

import numpy as np
import torch
from transformers import BertForMaskedLM, DataCollatorForLanguageModeling, Trainer, TrainerCallback, TrainingArguments

from bert_mlm.config import TrainingConfig
from bert_mlm.core.common.device import resolve_device, resolve_precision


class StepClock(TrainerCallback):
    """Wall-clock time at the end of every optimizer step."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # a step's end is when its kernels have run
        self.ends.append(time.perf_counter())


class CountingCollator:
    """The HF collator, counting the non-padding tokens of every batch it builds."""

    def __init__(self, collator: DataCollatorForLanguageModeling) -> None:
        self.collator, self.tokens = collator, []

    def __call__(self, examples):
        batch = self.collator(examples)
        self.tokens.append(int(batch["attention_mask"].sum()) if "attention_mask" in batch
                           else int((batch["input_ids"] != self.collator.tokenizer.pad_token_id).sum()))
        return batch


def train_with_hf_trainer(
    model: BertForMaskedLM, sequences: list[np.ndarray], tokenizer, training: TrainingConfig,
    hf_defaults: bool = False, extra_arguments: dict | None = None,
) -> tuple[list[float], list[int], float]:
    """Train ``model`` in place for ``training.max_steps``. Returns the end time of every step, the
    non-padding tokens of every batch and the total wall seconds.

    With ``hf_defaults`` the Trainer keeps its own hyperparameters (lr 5e-5, no warmup, beta2
    0.999...), what a user of the recipe gets without tuning; otherwise it gets this project's.
    ``extra_arguments`` go to ``TrainingArguments`` as they are (``torch_compile=True``).
    """
    same = {} if hf_defaults else {
        "learning_rate": training.peak_learning_rate(model.config.hidden_size),
        "warmup_steps": training.warmup_for(training.max_steps), "lr_scheduler_type": training.schedule,
        "weight_decay": training.weight_decay, "adam_beta1": training.adam_beta1, "adam_beta2": training.adam_beta2,
        "adam_epsilon": training.adam_epsilon, "max_grad_norm": training.max_grad_norm,
    }
    # The same precision as the bert-mlm side (fp32 on CPU, bf16/fp16 autocast on GPUs).
    precision = resolve_precision(training.precision, resolve_device(training.device))
    collator = CountingCollator(DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, pad_to_multiple_of=8))
    clock = StepClock()
    special = set(tokenizer.all_special_ids)
    with tempfile.TemporaryDirectory() as output_dir:
        trainer = Trainer(
            model=model,
            args=TrainingArguments(
                output_dir=output_dir, max_steps=training.max_steps, per_device_train_batch_size=training.batch_size,
                report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True, seed=training.seed,
                use_cpu=not torch.cuda.is_available(), dataloader_drop_last=True, **same,
                bf16=precision == "bf16", fp16=precision == "fp16", **(extra_arguments or {}),
            ),
            # With its special_tokens_mask, as the run_mlm recipe's tokenization provides it
            # (without it the collator rebuilds the mask in a Python loop per row).
            train_dataset=[{"input_ids": s.tolist(), "special_tokens_mask": [int(t in special) for t in s.tolist()]}
                           for s in sequences],
            data_collator=collator,
            callbacks=[clock],
        )
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started
    model.eval()
    return clock.ends, collator.tokens, seconds
