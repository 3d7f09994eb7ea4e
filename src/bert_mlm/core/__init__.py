"""The Kedro-free core: corpus, tokenizer, sequences, masking, model, training, evaluation, tuning.

Nodes in ``bert_mlm.pipelines`` call these functions; everything here is usable (and tested)
on plain strings, arrays and tensors.
"""
