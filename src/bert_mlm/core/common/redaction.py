"""One redaction for every record: what may reach a file, a log or a tracking server.

:func:`redact` takes any setting (a URL, a command line, a mapping or list of settings, nested)
and returns it with the secrets replaced by ``***``:

- the user info of a URL (``https://user:PASSWORD@host`` -> ``https://user:***@host``; a user
  name alone is masked too, ``https://***@host``: GitHub, GitLab and Azure DevOps take a token
  there);
- ``name=value`` pairs whose name ends in a secret word, in a URL's query string, a connection
  string or a command line: ``X-Amz-Signature``, ``X-Amz-Credential``, ``X-Amz-Security-Token``
  (S3 presigned URLs), ``X-Goog-Signature`` / ``X-Goog-Credential`` (GCS), ``sig`` (Azure SAS),
  ``AccountKey`` / ``SharedAccessSignature`` (Azure connection strings), ``access_token``,
  ``key`` (Google API keys), ``password``, ``client_secret``, ``--params corpus.hf_dataset.token=...``;
- the values of mapping keys whose name ends in such a word (``secret``, ``key``,
  ``aws_secret_access_key``, ``token``, ``sas_token``, ``password``, ``account_key`` ...).

The last word of a name decides (``mask_token_fraction`` is no secret, ``access_token`` is), so
settings keep their meaning in records; an identifier such as ``aws_access_key_id`` is kept.
Anything else is returned as it is (same types: a tuple stays a tuple). Written by hand: no
library does this for arbitrary settings (``sqlalchemy.engine.URL`` masks a database URL's
password only, ``urllib`` parses but does not redact).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

MASK = "***"
# The last word of a setting's name that marks its value as a secret.
SECRET_WORDS = frozenset({"password", "passwd", "pwd", "passphrase", "secret", "token", "key", "apikey", "sig",
                          "signature", "credential", "auth", "authorization", "cookie", "sas"})
# scheme://userinfo@host: the user info runs to the authority's last "@" (an unescaped "@" in a
# password included, as urllib splits it); a "@" after the first / ? # belongs to the path.
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/?#\s]+)@")
# name=value after a start, ? & ; , or whitespace (query strings, connection strings, --params lists)
# A value ends at a separator, or at a quote or bracket around it ('...sig=abc' in a message).
_PAIR = re.compile(r"(?P<lead>^|[?&;,\s])(?P<name>[A-Za-z0-9_.\-]+)=(?P<value>[^&;,\s#'\"()\[\]{}<>]*)")
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")

T = TypeVar("T")


def is_secret_name(name: object) -> bool:
    """Whether a setting called ``name`` holds a secret: its last word (``X-Amz-Signature``,
    ``AccountKey``, ``corpus.hf_dataset.token``, ``client_secret``) is a secret word."""
    words = _WORD.findall(str(name))
    return bool(words) and words[-1].lower() in SECRET_WORDS


def redact_text(text: str) -> str:
    """``text`` with URL user info and secret ``name=value`` pairs masked (see the module)."""
    if "@" in text:
        text = _USERINFO.sub(_mask_userinfo, text)
    if "=" in text:
        text = _PAIR.sub(_mask_pair, text)
    return text


def _mask_userinfo(match: re.Match) -> str:
    user, colon, _ = match["userinfo"].partition(":")
    shown = f"{user}:{MASK}" if colon and user and user != MASK else MASK
    return f"{match['scheme']}{shown}@"


# Values that hold no secret: already masked, or a placeholder of prose ("written section.key=value").
_PLACEHOLDERS = frozenset({MASK, "value", "VALUE", "...", "<value>", "null", "None"})


def _mask_pair(match: re.Match) -> str:
    if match["value"] in _PLACEHOLDERS or not match["value"] or not is_secret_name(match["name"]):
        return match[0]
    return f"{match['lead']}{match['name']}={MASK}"


def redact(value: T) -> T:
    """``value`` fit for any record (see the module): call it on whatever is about to be written
    (a manifest's settings, a run record, tracking parameters, a command line, a log's arguments)."""
    if isinstance(value, str):
        return redact_text(value)  # type: ignore[return-value]
    if isinstance(value, Mapping):
        return {key: MASK if is_secret_name(key) and _is_secret_value(item) else redact(item)  # type: ignore[return-value]
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        items = [redact(item) for item in value]
        return tuple(items) if isinstance(value, tuple) else items  # type: ignore[return-value]
    return value


def _is_secret_value(item: Any) -> bool:
    """A value to mask whole: a non-empty scalar (nested settings are redacted item by item)."""
    return isinstance(item, (str, bytes, int, float)) and not isinstance(item, bool) and item not in ("", b"")
