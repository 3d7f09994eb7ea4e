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
CHAIN = {
    "ingestion": ingestion, "tokenization": tokenization, "sequences": sequences, "tuning": tuning,
    "training": training, "finetune": finetune, "evaluation": evaluation, "reporting": reporting,
}
DATA_STAGES = ("ingestion", "tokenization", "sequences")


def register_pipelines() -> dict[str, Pipeline]:
    """Register the project's pipelines.

    Built explicitly rather than with ``find_pipelines``: Kedro 1.7 loads only the requested
    pipelines there, and ``mask_rate_comparison`` and ``__default__`` are made of the others.

    Returns:
        A mapping from pipeline names to ``Pipeline`` objects.
    """
    pipelines = {name: module.create_pipeline() for name, module in CHAIN.items()}
    pipelines["__default__"] = sum(pipelines.values(), Pipeline([]))
    pipelines["mask_rate_comparison"] = sum((pipelines[name] for name in DATA_STAGES), Pipeline([])) + (
        mask_rate_comparison.create_pipeline()
    )
    return pipelines
