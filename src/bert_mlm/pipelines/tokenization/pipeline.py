from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.tokenization.nodes import build_tokenizer, encode_corpus, summarise_tokens


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                build_tokenizer,
                inputs=["corpus_documents", "params:tokenizer", "params:model", "params:data"],
                outputs=["tokenizer", "vocabulary_coverage"],
                name="build_tokenizer",
                tags=["tokenization", "data"],
            ),
            Node(
                encode_corpus,
                inputs=["corpus_documents", "tokenizer", "params:data",
                        # whole-word masking on Chinese words: the boundaries are stored while encoding
                        "params:masking", "params:evaluation", "params:tuning"],
                outputs="token_store",
                name="encode_corpus",
                tags=["tokenization", "data"],
            ),
            Node(
                summarise_tokens,
                inputs=["token_store", "tokenizer"],
                outputs="tokenization_stats",
                name="summarise_tokens",
                tags=["tokenization", "data"],
            ),
        ]
    )
