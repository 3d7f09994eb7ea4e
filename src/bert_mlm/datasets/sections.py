"""A parameter section as a Kedro dataset: the sections the tuning stage resolved for training, so
that a later ``--pipelines training`` run trains with the same."""

from __future__ import annotations

from kedro_datasets.json import JSONDataset as _JSONDataset

from bert_mlm.config import SECTIONS, Section
from bert_mlm.core.common.redaction import redact
from bert_mlm.datasets.atomic import AtomicSave, JSONDataset
from bert_mlm.errors import UserError


class SectionDataset(JSONDataset):
    """A versioned JSON file holding one section (``section``: its key), or ``{}`` where the stage
    resolved none (Kedro saves no ``None``); loads validated as the parameters are."""

    def __init__(self, *, section: str, **kwargs) -> None:
        if section not in SECTIONS:
            raise UserError(f"SectionDataset: section {section!r} is not one of {list(SECTIONS)}")
        super().__init__(**kwargs)
        self._section = SECTIONS[section]

    def load(self) -> Section | dict:
        if self._missing():
            return {}
        values = _JSONDataset.load.__wrapped__(self)
        try:
            return self._section.build(values) if values else {}
        except UserError as error:
            raise UserError(f"{self._filepath}: {error}") from error

    def save(self, data: Section | dict) -> None:
        # Settings: redacted, as every record of them is (a result is not).
        AtomicSave.save(self, redact(data.model_dump(mode="json")) if isinstance(data, Section) else {})
