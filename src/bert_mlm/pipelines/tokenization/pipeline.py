from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.tokenization.nodes import build_tokenizer, encode_corpus


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                build_tokenizer,
                inputs=["corpus_documents", "params:tokenizer"],
                outputs="tokenizer",
                name="build_tokenizer",
                tags=["tokenization", "data"],
            ),
            Node(
                encode_corpus,
                inputs=["corpus_documents", "tokenizer", "params:tokenizer"],
                outputs=["token_ids", "tokenization_stats"],
                name="encode_corpus",
                tags=["tokenization", "data"],
            ),
        ]
    )
