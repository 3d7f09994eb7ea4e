"""Training tokens/s with 1 vs 2 data-parallel processes (gloo) on this machine, same global batch.

    python bench/data_parallel.py --repeats 3 --steps 30

Alternates the two setups; reports medians and the ratio. On a 2-core CPU two processes share the
same cores (each gets one thread), so this measures the overhead of the launcher, gradient
all-reduce and sharding rather than a speed-up; on multi-GPU machines each rank has its own device.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np
from _timing import alternate_rates, rate_table

from bert_mlm.config import (
    DistributedConfig,
    EvaluationConfig,
    MaskingConfig,
    ModelConfig,
    SequenceConfig,
    TokenizerConfig,
    TrainingConfig,
)
from bert_mlm.core.tokens.tokenizer import train_wordpiece
from bert_mlm.core.train.experiment import Experiment, train_data_parallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--global-batch", type=int, default=32)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(2000)]
    texts = [" ".join(rng.choice(words, 120)) for _ in range(2000)]
    tokenizer = train_wordpiece(texts, TokenizerConfig(vocab_size=4096, min_frequency=1, base_alphabet="none"))
    sequences = [np.asarray(tokenizer(t, truncation=True, max_length=128)["input_ids"], dtype=np.int32) for t in texts]
    experiment = Experiment(
        tokenizer=tokenizer,
        sequences={"train": sequences},
        model_config=ModelConfig(
            hidden_size=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=512,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        ),
        training=TrainingConfig(max_steps=args.steps, batch_size=args.global_batch, warmup_steps=2, progress=False),
        masking=MaskingConfig(),
        evaluation=EvaluationConfig(mask_draws=1),
        sequence_config=SequenceConfig(max_length=128),
    )
    setups = {
        "1 process": (experiment.training, DistributedConfig()),
        "2 processes (gloo)": (experiment.training.replace(batch_size=args.global_batch // 2),
                               DistributedConfig(nproc_per_node=2)),
    }
    def rate(training: TrainingConfig, distributed: DistributedConfig):
        def measure() -> float:
            _, result = train_data_parallel(replace(experiment, training=training), distributed)
            history = result.history.iloc[3:]
            return history["tokens"].sum() / history["seconds"].sum()
        return measure

    rates = alternate_rates({name: rate(*setup) for name, setup in setups.items()}, args.repeats)
    print(
        rate_table(
            "Data-parallel training: 1 vs 2 processes",
            rates,
            "1 process",
            "tokens/s",
            [
                f"2-layer x 128 model, global batch {args.global_batch} x 128, {args.steps} steps, "
                f"{args.repeats} alternating repeats"
            ],
        ).markdown()
    )


if __name__ == "__main__":
    main()
