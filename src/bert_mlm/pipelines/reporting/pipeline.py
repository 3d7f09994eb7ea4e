from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.reporting.nodes import build_run_report


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                build_run_report,
                inputs=[
                    "metrics",
                    "training_history",
                    "corpus_stats",
                    "tokenization_stats",
                    "sequence_stats",
                    "tuning_trials",
                    "finetune_runs",
                    "vocabulary_coverage",
                ],
                outputs="run_report",
                name="build_run_report",
                tags=["reporting"],
            )
        ]
    )
