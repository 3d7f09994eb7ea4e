"""``tracking``: where a run's curves go besides its own files (TensorBoard; MLflow is switched on
with ``BERT_MLM_MLFLOW=1``, docs/mlflow.md)."""

from __future__ import annotations

from pydantic import Field

from bert_mlm.config.base import Section


class TrackingConfig(Section):
    """Live curves where users look: TensorBoard event files (MLflow: BERT_MLM_MLFLOW=1, docs/mlflow.md)"""

    SECTION = "tracking"

    tensorboard: bool = Field(
        False, description="true: TensorBoard event files (loss, learning rate, tokens/s, validation loss, "
                           "fine-tuning results) written while the run goes (pip install -e \".[tensorboard]\")")
    tensorboard_dir: str = Field(
        "data/09_tracking/tensorboard", min_length=1,
        description="the log directory: a folder per run, named by its version; tensorboard --logdir <this>")
