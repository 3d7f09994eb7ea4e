"""The evaluation's result: the held-out sets' keys (eval_*, extra_eval_*) made and read in one place."""

from __future__ import annotations

import json

from bert_mlm.core.evaluate.result import Evaluation, HeldOut


def test_an_evaluation_round_trips_through_its_file_with_the_keys_of_every_version():
    test = HeldOut(loss=3.2, accuracy=0.4, loss_se=0.01, baseline_accuracy=0.1, masked_tokens=900,
                   loss_start=3.9, loss_change=-0.7, loss_change_se=0.02, change_summary="continued pretraining ...")
    extra = HeldOut(loss=4.1, accuracy=0.3, baseline_accuracy=0.05)
    evaluation = Evaluation(test, "的", 0.15, 7, extra=extra, extra_corpus_path="新闻.txt", model_version="m",
                            fill_mask_examples=[{"sentence": "北京是中国的[MASK]都。", "predictions": []}])
    data = json.loads(json.dumps(evaluation.to_json(), ensure_ascii=False))
    assert {"eval_loss", "eval_loss_se", "baseline_accuracy", "eval_loss_start", "eval_loss_change_se",
            "eval_change_summary", "extra_eval_loss", "extra_baseline_accuracy", "eval_seed", "baseline_token",
            "accuracy_over_baseline"} <= set(data)
    assert "eval_top5_accuracy" not in data  # nothing recorded: no key (not null)
    assert data["accuracy_over_baseline"] == 4.0 and evaluation.change_summaries == ["continued pretraining ..."]
    assert Evaluation.from_json(data) == evaluation
    assert Evaluation.from_json({"train_steps": 3}) is None and HeldOut.from_json(data, "nothing_") is None
