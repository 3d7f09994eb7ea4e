"""Data-parallel training: 2 CPU processes with gloo on a tiny model, through torch's elastic launcher."""

from __future__ import annotations

import multiprocessing
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

from bert_mlm.config import (
    DistributedConfig,
    EvaluationConfig,
    MaskingConfig,
    ModelConfig,
    SequenceConfig,
    TokenizerConfig,
    TrainingConfig,
)
from bert_mlm.core.common.seeds import stream_seed
from bert_mlm.core.model.checkpoints import RUN_FILE, list_checkpoints, read_checkpoint, run_folders
from bert_mlm.core.model.distributed import Rank, launch
from bert_mlm.core.tokens.tokenizer import train_wordpiece
from bert_mlm.core.train.experiment import Experiment, train_data_parallel
from bert_mlm.core.train.loop import epoch_batches
from tests.core.model.distributed_workers import failing_on_rank_one

# The launcher's workers fork from a fork server that imported the project once, as in a Kedro run (the same list as
# bert_mlm/settings.py, whichever module sets it first): without it each worker imports torch and transformers itself.
multiprocessing.set_forkserver_preload(["bert_mlm.forkserver"])


@pytest.fixture(scope="module")
def experiment() -> Experiment:
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "omega", "theta", "kappa", "sigma", "rho", "tau"]
    texts = [" ".join(words[(i + k) % len(words)] for k in range(12)) for i in range(200)]
    tokenizer = train_wordpiece(texts, TokenizerConfig(vocab_size=60, min_frequency=1, base_alphabet="none"))
    train = [np.asarray(tokenizer(t)["input_ids"], dtype=np.int32) for t in texts]
    rng.shuffle(train)
    return Experiment(
        tokenizer=tokenizer,
        sequences={"train": train},
        model_config=ModelConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=32,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        ),
        training=TrainingConfig(
            max_steps=20, batch_size=16, learning_rate=5e-3, warmup_steps=2, progress=False, bucketing=False
        ),
        masking=MaskingConfig(),
        evaluation=EvaluationConfig(mask_draws=1),
        sequence_config=SequenceConfig(max_length=32),
    )


@pytest.mark.slow
def test_two_gloo_processes_match_one_process_with_the_same_global_batch(experiment, tmp_path):
    _, single = train_data_parallel(experiment, DistributedConfig())
    per_rank = experiment.training.replace(batch_size=8, checkpoint_every=10, checkpoint_dir=str(tmp_path))
    model, double = train_data_parallel(
        replace(experiment, training=per_rank), DistributedConfig(nproc_per_node=2)
    )
    assert len(double.history) == 20
    # The same global batch (2 x 8 vs 16 sequences); epochs end at slightly different steps.
    assert (double.history["tokens"].head(10) == single.history["tokens"].head(10)).all()
    # Different masks (rank-aware seeds) but the same task: the curves agree within 10 % on average.
    gap = (double.history["loss"] - single.history["loss"]).abs().mean() / single.history["loss"].mean()
    assert gap < 0.10, gap
    assert double.history["loss"].tail(5).mean() < 0.8 * double.history["loss"].head(3).mean()
    # One writer: each checkpoint exactly once, no temporary leftovers; the model came back.
    (run,) = run_folders(tmp_path)
    assert sorted(p.name for p in run.iterdir()) == sorted([RUN_FILE, *(p.name for p in list_checkpoints(run))])
    assert [p.name for p in list_checkpoints(run)] == ["step-00000010", "step-00000020"]
    state = read_checkpoint(list_checkpoints(run)[-1])
    assert len(state["rng"]) == 2  # every rank's RNG state, for an exact resume
    for key, value in state["model"].items():
        assert torch.equal(value, model.state_dict()[key]), key


def test_ranks_see_disjoint_data_and_different_masks(experiment):
    lengths = [len(s) for s in experiment.sequences["train"]]
    config = experiment.training.replace(batch_size=8)
    shards = [epoch_batches(lengths, config, epoch=0, rank=Rank(r, 2)) for r in range(2)]
    seen = [{i for batch in shard for i in batch} for shard in shards]
    assert seen[0].isdisjoint(seen[1])
    assert len(shards[0]) == len(shards[1])
    assert stream_seed(1, 0, 0, rank=0) != stream_seed(1, 0, 0, rank=1)


@pytest.mark.slow
def test_a_failing_worker_fails_the_run(tmp_path):
    with pytest.raises(ChildFailedError, match="worker 1 broke|failing_on_rank_one"):
        launch(
            DistributedConfig(nproc_per_node=2, timeout_seconds=60),
            failing_on_rank_one,
        )
