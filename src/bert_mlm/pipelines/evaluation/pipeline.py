from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.evaluation.nodes import evaluate_masked_lm


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline([Node(
        evaluate_masked_lm, ["trained_model", "corpus_documents", "token_store", "sequence_index", "extra_eval_corpus",
                             "params:evaluation", "params:sequences", "params:model", "params:corpus"],
        "evaluation_metrics", name="evaluate_masked_lm", tags=["evaluation", "reporting"])])
