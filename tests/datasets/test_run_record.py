"""run_config: one record per run, saved redacted; loaded as every run's records by version."""

from __future__ import annotations

from kedro.io.core import Version

from bert_mlm.core.record.run_record import RunRecord
from bert_mlm.datasets.run_record import RunRecordDataset

A, B = "2026-01-01T00.00.00.000Z", "2026-01-02T00.00.00.000Z"


def test_records_by_run_redacted(tmp_path):
    path = str(tmp_path / "run_config.json")
    assert not RunRecordDataset(filepath=path, version=Version(None, None)).exists()
    for run in (A, B):
        RunRecordDataset(filepath=path, version=Version(None, run)).save(
            RunRecord(run_id=run, params={"corpus": {"path": "https://u:Secret-77@host/c.txt"}}))
    records = RunRecordDataset(filepath=path, version=Version(None, None)).load()
    assert records.versions == [B, A] and records.latest.run_id == B and records.of(A).run_id == A
    assert records.of(A).params == {"corpus": {"path": "https://u:***@host/c.txt"}}
    assert records.of("2020-01-01T00.00.00.000Z") is None and records.of(None) is None
    assert "Secret-77" not in (tmp_path / "run_config.json" / A / "run_config.json").read_text()
    pinned = RunRecordDataset(filepath=path, version=Version(A, None)).load()  # --load-versions run_config:A
    assert pinned.latest.run_id == A
