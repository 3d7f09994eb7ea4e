from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.finetune.nodes import finetune_classifier


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline([Node(
        finetune_classifier, ["trained_model", "params:finetune", "params:model", "params:training"],
        ["finetune_metrics", "finetune_runs", "finetune_label_mapping", "finetuned_classifier"],
        name="finetune_classifier", tags=["finetune", "evaluation"])])
