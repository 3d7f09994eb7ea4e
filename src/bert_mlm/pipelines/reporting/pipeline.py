from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.reporting.nodes import build_run_report, gather_metrics, record_run, write_model_card


def model_results() -> Pipeline:
    """One model's results: ``metrics.json`` and the model card (a mask-rate variant's too, in its namespace)."""
    return Pipeline([
        Node(gather_metrics, ["run_facts", "evaluation_metrics", "training_summary", "finetune_metrics"], "metrics",
             name="gather_metrics", tags=["reporting"]),
        Node(write_model_card, ["metrics", "run_config"], "model_card", name="write_model_card", tags=["reporting"]),
    ])


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline([
        Node(record_run, ["run_facts", "resolved_masking", "resolved_training", "tuning_best_params",
                          "corpus_documents", "token_store"], "run_config", name="record_run", tags=["reporting"]),
        model_results(),
        Node(build_run_report, ["metrics", "training_history", "corpus_stats", "tokenization_stats", "sequence_stats",
                                "tuning_trials", "tuning_best_params", "evaluation_metrics", "finetune_metrics",
                                "finetune_runs", "vocabulary_coverage", "run_config", "run_facts"],
             "run_report", name="build_run_report", tags=["reporting"]),
    ])
