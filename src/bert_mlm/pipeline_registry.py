"""Project pipelines."""
from __future__ import annotations

from kedro.pipeline import Pipeline

from bert_mlm.pipelines import (
    evaluation,
    finetune,
    ingestion,
    mask_rate_comparison,
    reporting,
    sequences,
    tokenization,
    training,
    tuning,
)

# The chain `kedro run` runs, in order. The mask-rate comparison trains one model per variant,
# so it runs only when asked for (`kedro run --pipelines mask_rate_comparison`).
CHAIN = {"ingestion": ingestion, "tokenization": tokenization, "sequences": sequences, "tuning": tuning,
         "training": training, "finetune": finetune, "evaluation": evaluation, "reporting": reporting}
DATA_STAGES = ("ingestion", "tokenization", "sequences")
# Stages whose results belong to a model: each is registered with the reporting nodes after it, so
# that `kedro run --pipelines finetune` (or tuning, training, evaluation) refreshes metrics.json,
# the report and the model card of the model it used, and saves its run record.
REPORTED_STAGES = ("tuning", "training", "finetune", "evaluation")


def register_pipelines() -> dict[str, Pipeline]:
    """The project's pipelines by name, built explicitly rather than with ``find_pipelines``: Kedro 1.7
    loads only the requested pipelines there, and ``mask_rate_comparison`` and ``__default__`` are
    made of the others."""
    pipelines = {name: module.create_pipeline() for name, module in CHAIN.items()}
    pipelines["__default__"] = sum(pipelines.values(), Pipeline([]))
    for name in REPORTED_STAGES:  # the same reporting nodes: Kedro merges them when pipelines are combined
        pipelines[name] = pipelines[name] + reporting.create_pipeline()
    data = sum((pipelines[name] for name in DATA_STAGES), Pipeline([]))
    pipelines["mask_rate_comparison"] = data + mask_rate_comparison.create_pipeline()
    return pipelines
