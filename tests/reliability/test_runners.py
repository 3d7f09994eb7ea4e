"""Every Kedro runner runs the chain to the end: ``SequentialRunner`` (every other session test),
``ThreadRunner``, ``ParallelRunner`` and ``--async`` loading.

Two faults these cases found: transformers builds and loads models under process-wide patches, so
two threads loading models at once got meta weights (ThreadRunner: "Cannot copy out of meta
tensor" in the evaluation node); and ParallelRunner forked its workers after torch's OpenMP
threads had run in the parent, so the training node hung in its first parallel operation.
"""

from __future__ import annotations

import json
import threading

import pytest
import torch
from kedro.runner import ParallelRunner, ThreadRunner

from bert_mlm.config import ModelConfig
from bert_mlm.core.model.bert import build_model
from bert_mlm.datasets.pretrained import MaskedLM, MaskedLMDataset
from tests.core.conftest import synthetic_sentences
from tests.kedro_runs import latest, run_session

TINY = ModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                   max_position_embeddings=64)


def test_models_built_and_loaded_in_threads_have_real_weights(tmp_path, tiny_tokenizer):
    """Three threads load a saved model and build fresh ones at once, again and again: no weight is
    left on the meta device, and a built model is the same as one built alone."""
    model = build_model(TINY, tiny_tokenizer, seed=3)
    MaskedLMDataset(str(tmp_path / "model")).save(MaskedLM(model, tiny_tokenizer))
    alone = {name: value.clone() for name, value in build_model(TINY, tiny_tokenizer, seed=5).state_dict().items()}
    problems = []

    def work(index: int) -> None:
        for _ in range(4):
            loaded = MaskedLMDataset(str(tmp_path / "model")).load().model
            built = build_model(TINY, tiny_tokenizer, seed=5)
            for name, value in [*loaded.state_dict().items(), *built.state_dict().items()]:
                if value.device.type == "meta":
                    problems.append(f"thread {index}: {name} on the meta device")
            if any(not torch.equal(value, alone[name]) for name, value in built.state_dict().items()):
                problems.append(f"thread {index}: a built model differs from one built alone")

    threads = [threading.Thread(target=work, args=(index,)) for index in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert problems == []


@pytest.fixture
def tiny_tokenizer(tmp_path):
    from bert_mlm.config import TokenizerConfig
    from bert_mlm.core.tokens.tokenizer import train_wordpiece

    return train_wordpiece(synthetic_sentences(300), TokenizerConfig(vocab_size=200))


@pytest.mark.slow
@pytest.mark.parametrize(("runner", "is_async"), [(ThreadRunner, True), (ParallelRunner, False)],
                         ids=["ThreadRunner-async", "ParallelRunner"])
def test_the_smoke_chain_runs_to_the_end_under_another_runner(smoke_chain_copy, monkeypatch, runner, is_async):
    """The smoke chain under ThreadRunner with asynchronous loading and saving, and under
    ParallelRunner with two torch threads (the parent's OpenMP threads then run before any worker
    starts, as they do on a user's machine), to its metrics. In a copy of the shared chain's project:
    its data stages are reused (the datasets' job, whatever the runner), every node still runs; the study's
    node too, without trials (tuning.n_trials=0: the study's trials are tests/core/study's subject, and
    here they were seconds of tuning in a worker)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    torch.ones(256, 256) @ torch.ones(256, 256)  # this process's OpenMP pool is up, as it is after the plan's step
    run_session(smoke_chain_copy, monkeypatch, runner=runner(is_async=is_async), **{"tuning.n_trials": 0})
    (_, version) = sorted((smoke_chain_copy / "data" / "06_models" / "masked_lm").iterdir())  # a model of its own
    metrics = json.loads(latest(smoke_chain_copy / "data" / "08_reporting" / "metrics.json").read_text())
    assert metrics["model_version"] == version.name and metrics["train_steps"] == 12
    assert metrics["eval_masked_tokens"] > 0 and "eval_accuracy" in metrics
    # Each worker ran with the project's settings: kedro-mlflow's hooks stayed off there as tracking is (without
    # the settings, Kedro registered the plugin's hooks in every worker, and they wrote an MLflow store here).
    assert not [path.name for path in smoke_chain_copy.iterdir() if path.name in ("mlflow.db", "mlruns")]


def test_parallel_workers_come_from_a_fork_server():
    import os

    import bert_mlm.settings  # noqa: F401 - sets the start method, as loading a Kedro project's settings does

    assert os.environ["KEDRO_MP_CONTEXT"] == "forkserver"
