from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.training.nodes import train_masked_lm


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline([Node(
        train_masked_lm, ["token_store", "sequence_index", "tokenizer", "resolved_masking", "resolved_training",
                          "tuning_best_params", "params:model", "params:training", "params:evaluation",
                          "params:sequences", "params:distributed", "params:corpus"],
        ["trained_model", "training_history", "training_curves", "training_summary"], name="train_masked_lm",
        tags=["training", "model"])])
