"""A data stage whose inputs, settings and code are those of a stored version is not run again.

Every data stage (ingestion, the tokenizer, encoding, the sequence index with its word bits) is a
*job* that its versioned directory dataset runs on save. A job describes what determines its
output in a *recipe*: digests of its inputs (the corpus files' sizes and modification times, or the
recipe of the stage before), its settings, and the source code of the modules that compute it.
The recipe is stored with each version (``recipe.json``); when a new run's recipe equals a stored
version's, the dataset writes the new version as hard links to that one (no bytes copied, the
stage's work not redone), checks it first (a damaged version is recomputed instead), and logs it.
``data.reuse: false`` recomputes every stage.

This is what lets a mixture's weights change without re-encoding: the weights are training's
(:mod:`bert_mlm.core.tokens.blend`), not in any data stage's recipe. Kedro itself re-runs every node
it is asked to; DVC and Make skip by comparing inputs the same way (here inside the datasets, so
`kedro run` keeps its meaning and every run still has its own version of every output).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bert_mlm.core.common.redaction import redact_text
from bert_mlm.errors import first_line

logger = logging.getLogger(__name__)

RECIPE_FILE = "recipe.json"
RECIPE_FORMAT = 1
# Keys of a remote file's listing that change when its content does (S3/GCS/Azure/HTTP ETags, times).
_CHANGE_KEYS = ("ETag", "etag", "md5Hash", "content_md5", "generation", "version_id", "LastModified",
                "last_modified", "mtime", "updated", "Last-Modified")


def code_digest(*modules: str) -> str:
    """A digest of the source of ``modules`` (a package: all its ``.py`` files): a change to the code
    that computes a stage re-runs it, whether or not anyone remembered to bump a version."""
    digest = hashlib.blake2b(digest_size=8)
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ValueError(f"code_digest: no module {name!r}")
        locations = spec.submodule_search_locations
        files = sorted(Path(locations[0]).rglob("*.py")) if locations else [Path(spec.origin)]
        for file in files:
            digest.update(file.name.encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()


def digest_of(value: Any) -> str:
    return hashlib.blake2b(json.dumps(value, sort_keys=True, default=str).encode(), digest_size=10).hexdigest()


def source_fingerprint(source) -> dict | None:
    """What identifies a :class:`~bert_mlm.core.data.sources.CorpusSource`'s content without reading it:
    each file's size and modification time (remote: its ETag or modification time). ``None`` when
    that cannot be told (a Hub dataset by name, data a Kedro dataset loaded, a remote store that
    gives neither): such a corpus is read again every run. A mixture's weights are not part of it."""
    if source.parts:
        parts = [source_fingerprint(part) for part in source.parts]
        # A list, in the order the sources are read (their documents lie in that order).
        return None if None in parts else {"parts": [[part.name, fp] for part, fp in zip(source.parts, parts,
                                                                                          strict=True)]}
    if source.data is not None:
        return None
    if source.hf_dataset is not None:
        hf = source.hf_dataset
        if hf.path is None or "://" in str(hf.path):
            return None  # a Hub dataset's content can change under the same name
        root = Path(hf.path)
        return {"hf_disk": hf.describe(), "text_column": hf.text_column,
                "files": [[str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns]
                          for p in sorted(root.rglob("*")) if p.is_file()]}
    if source.path is None:
        if not source.builtin_when_empty:
            return {"corpus": None}
        return {"builtin": sys.version, "max_files": source.builtin_max_files}
    files = []
    for file, size in source.listing:
        if isinstance(file, Path):
            stat = file.stat()
            files.append([str(file), stat.st_size, stat.st_mtime_ns])
            continue
        change = _remote_change(file, source)
        if change is None:
            return None
        files.append([redact_text(file), size, change])
    return {"path": redact_text(source.path), "text_column": source.text_column, "files": files}


def _remote_change(url: str, source) -> str | None:
    from bert_mlm.core.data.sources.listing import remote_filesystem

    try:
        fs, path = remote_filesystem(url, source.storage_options, source.parameter)
        info = fs.info(path)
    except Exception:  # noqa: BLE001 - any backend's error: then the corpus is simply read again
        return None
    values = [f"{key}={info[key]}" for key in _CHANGE_KEYS if info.get(key) not in (None, "")]
    return ";".join(values) or None


def recipe_identity(directory: Path) -> str | None:
    """The digest of the recipe a stored version was made by (``None``: made before recipes)."""
    try:
        return json.loads((directory / RECIPE_FILE).read_text(encoding="utf-8"))["digest"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_recipe(directory: Path, recipe: dict) -> None:
    """Written last into a version's directory (which is renamed into place only when complete)."""
    (directory / RECIPE_FILE).write_text(json.dumps({"format": RECIPE_FORMAT, "digest": digest_of(recipe),
                                                     "recipe": recipe}, indent=2, default=str), encoding="utf-8")


def find_reusable(versions: Path, recipe: dict, check: Callable[[Path], Any], name: str) -> Path | None:
    """The newest stored version of ``versions`` (``<dataset folder>``, holding ``<version>/<name>``)
    made by ``recipe``, when ``check`` accepts it; a damaged one is said and recomputed."""
    wanted = digest_of(recipe)
    if not versions.is_dir():
        return None
    for version in sorted((p for p in versions.iterdir() if not p.name.startswith(".")), reverse=True):
        candidate = version / versions.name
        if recipe_identity(candidate) != wanted:
            continue
        try:
            check(candidate)
        except Exception as error:  # noqa: BLE001 - whatever is wrong with it, the stage is recomputed
            logger.warning("%s: version %s has this run's inputs and settings but cannot be reused (%s); "
                           "recomputing", name, version.name, first_line(error))
            return None
        return candidate
    return None


def link_or_copy(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """``target`` as a hard link to ``source`` (immutable versioned files), or a copy across file systems:
    a reused version costs no disk and no time, and stays whole if the other is deleted."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
