from kedro.pipeline import Node, Pipeline

from bert_mlm.pipelines.ingestion.nodes import clean_and_split_corpus


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                clean_and_split_corpus,
                inputs=["raw_corpus", "params:corpus"],
                outputs=["corpus_documents", "corpus_stats"],
                name="clean_and_split_corpus",
                tags=["ingestion", "data"],
            )
        ]
    )
