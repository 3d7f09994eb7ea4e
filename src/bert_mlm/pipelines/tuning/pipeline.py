from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.tuning.nodes import tune_mask_probability


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline([Node(
        tune_mask_probability, ["token_store", "sequence_index", "tokenizer", "params:tuning", "params:model",
                                "params:training", "params:masking", "params:evaluation", "params:sequences",
                                "params:finetune", "params:corpus", "extra_eval_corpus"],
        ["resolved_masking", "resolved_training", "tuning_best_params", "tuning_trials", "tuning_objective_plot",
         "tuning_history_plot"], name="tune_mask_probability", tags=["tuning", "model"])])
