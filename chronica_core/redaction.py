"""Keeping the secrets of a store URL out of everything Chronica shows: messages, logs, test ids.

A store URL may carry a password in its user information (``postgresql://user:PASSWORD@host/db``)
or in a query parameter (``...?password=PASSWORD``, ``sslpassword``, ``token``, ...). Whatever
shows a URL shows :func:`masked_url`; whatever shows text that a driver wrote about a URL (an
error message may quote the URL, or only the bad part of it) passes it through :func:`redact`,
and an exception on its way to the caller goes through :func:`redact_error`.

Neither needs a well-formed URL: a URL that no parser accepts (a ``[`` left open, a ``%zz``, a
``/`` in the password, no ``://``) is exactly the one a driver quotes back in its message. Both
also take libpq's ``key=value`` connection strings (``host=db password=PASSWORD``).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from urllib.parse import quote, quote_plus, unquote, unquote_plus

from chronica_core.errors import ChronicaError, StoreError

__all__ = ["MASK", "linked_exceptions", "masked_url", "redact", "redact_error", "url_secrets"]

MASK = "***"
"""What a secret is replaced with."""

SECRET_PARAMETER_WORDS = (
    "pass",  # password, passwd, passphrase, sslpassword, tlsCertificateKeyFilePassword
    "pwd",
    "secret",
    "token",
    "credential",
    "apikey",
    "accesskey",
    "privatekey",
    "authmechanismproperties",  # MongoDB: may hold AWS_SESSION_TOKEN:...
)
"""A query parameter whose name (lowercased, without ``_``, ``-`` and ``.``) contains one of these
holds a secret; its value is masked."""

MIN_PIECE = 3
"""A secret is also redacted piece by piece, split where a URL parser splits (``/``, ``@``, ``:``,
``?``, ...), since a parser that splits a malformed URL there quotes only a piece; pieces shorter
than this many characters are left alone (they say little and would blank out ordinary words)."""

_PIECE_SEPARATORS = re.compile(r"[/?#@:&;=%\s\[\]]+")
_HEX = re.compile(r"%[0-9A-Fa-f]{2}")
_URL_PARAMETER = re.compile(r"(?<=[?&;])([^=&;?#]+)=([^&;#]*)")
_CONNINFO_PARAMETER = re.compile(r"(?:(?<=\s)|^)([\w.-]+)\s*=\s*('(?:[^'\\]|\\.)*'?|\S*)")


def _secret_name(name: str) -> bool:
    folded = unquote(name).strip().lower().translate(str.maketrans("", "", "_-."))
    return any(word in folded for word in SECRET_PARAMETER_WORDS)


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:?//")


def _authority_start(url: str) -> int:
    """Where the user information would begin: after ``scheme://`` (or ``scheme//``), else at 0."""
    scheme = _SCHEME.match(url)
    return scheme.end() if scheme else 0


def _secret_spans(url: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of every secret in ``url``, in order, not overlapping.

    The password is everything between the first ``:`` of the user information and the last
    ``@`` of the URL: a ``/``, ``?``, ``#`` or ``@`` the user forgot to percent-encode then stays
    inside it (a query holding an ``@`` is masked up to that ``@``: more than needed, never less).
    """
    spans: list[tuple[int, int]] = []
    start = _authority_start(url)
    at = url.rfind("@")
    if at >= start:
        colon = url.find(":", start, at)
        if colon >= 0:
            spans.append((colon + 1, at))
    query_from = max(at + 1, start)
    if "://" in url or "?" in url:
        question = url.find("?", query_from)
        if question >= 0:
            for match in _URL_PARAMETER.finditer(url, question + 1):
                if _secret_name(match.group(1)):
                    spans.append(match.span(2))
    else:  # a libpq connection string: key=value pairs, values perhaps quoted
        for match in _CONNINFO_PARAMETER.finditer(url):
            if _secret_name(match.group(1)):
                spans.append(match.span(2))
    return [span for span in spans if span[1] > span[0]]


def masked_url(url: str) -> str:
    """Return ``url`` as it may be shown: each secret in it replaced by ``***``.

    ``postgresql://app:s3cret@db/chronica?sslpassword=k3y&schema=x`` is shown as
    ``postgresql://app:***@db/chronica?sslpassword=***&schema=x``. A URL without secrets comes
    back unchanged. Never raises, whatever ``url`` holds.
    """
    shown = url
    for start, end in reversed(_secret_spans(url)):
        shown = shown[:start] + MASK + shown[end:]
    return shown


def _spellings(secret: str) -> set[str]:
    """``secret`` as it was written and as a driver may write it back: decoded, encoded, escaped."""
    plain = {secret, unquote(secret), unquote_plus(secret)}
    quoted = {
        encoded for value in plain for encoded in (quote(value, safe=""), quote(value), quote_plus(value))
    }
    quoted |= {_HEX.sub(lambda hexed: hexed.group().lower(), value) for value in quoted}
    escaped = {
        escape
        for value in plain
        for escape in (
            repr(value)[1:-1],
            json.dumps(value)[1:-1],
            value.replace("\\", "\\\\").replace("'", "\\'"),  # libpq's quoting in a connection string
        )
    }
    pieces = {piece for value in plain | {secret} for piece in _PIECE_SEPARATORS.split(value)}
    found = plain | quoted | escaped | {piece for piece in pieces if len(piece) >= MIN_PIECE}
    return {value for value in found if value}


@functools.lru_cache(maxsize=64)
def url_secrets(url: str) -> tuple[str, ...]:
    """Every spelling of every secret in ``url``, longest first (empty when it holds none).

    Each secret counts as written, percent-decoded, percent-encoded (upper- and lowercase hex),
    escaped as Python, JSON and libpq write strings, and piece by piece (see :data:`MIN_PIECE`).
    """
    spellings: set[str] = set()
    for start, end in _secret_spans(url):
        spellings |= _spellings(url[start:end].strip("'"))
    return tuple(sorted(spellings, key=lambda value: (-len(value), value)))


@functools.lru_cache(maxsize=64)
def _pattern(url: str) -> re.Pattern[str] | None:
    secrets = url_secrets(url)
    if not secrets:
        return None
    return re.compile("|".join(re.escape(secret) for secret in secrets), re.IGNORECASE)


def redact(text: str, url: str) -> str:
    """Return ``text`` (a driver's message, say) with every spelling of ``url``'s secrets as ``***``.

    ``url`` may be malformed, or a libpq connection string. Matching ignores case. Text that
    holds none of them comes back unchanged.
    """
    pattern = _pattern(url) if url else None
    return text if pattern is None else pattern.sub(MASK, text)


def redact_error(error: BaseException, url: str) -> None:
    """Redact ``url``'s secrets, in place, from ``error`` and every exception chained to it.

    Each exception of the chain (``__cause__``, ``__context__``, the members of an exception
    group, an exception held in an attribute such as SQLAlchemy's ``orig``) keeps its type, its
    traceback and its place in the chain; only its text changes: the strings among its ``args``,
    its string attributes (``StoreError.detail``, say) and its notes. So a traceback printed or
    logged later (``logger.exception``) shows no secret. Text that an exception computes from
    anything else (``OSError``'s fields, say) is left as it is, and so are Chronica's errors other
    than ``StoreError`` (their attributes are the caller's data, a chronicum id say, never a
    driver's text; the exceptions chained to them are redacted). Returns nothing; never raises.
    """
    if not url or _pattern(url) is None:
        return
    for current in linked_exceptions(error):
        if isinstance(current, StoreError) or not isinstance(current, ChronicaError):
            _redact_one(current, url)


def linked_exceptions(error: BaseException) -> Iterator[BaseException]:
    """Yield ``error`` and every exception linked to it, each once, ``error`` first.

    Linked: chained (``__cause__``, ``__context__``), a member of an exception group, or held in an
    attribute (SQLAlchemy's ``orig``, say), and so on from each of those.
    """
    seen: set[int] = set()
    waiting: list[BaseException] = [error]
    while waiting:
        current = waiting.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        waiting += [linked for linked in (current.__cause__, current.__context__) if linked is not None]
        if isinstance(current, BaseExceptionGroup):
            waiting += list(current.exceptions)
        waiting += [value for value in vars(current).values() if isinstance(value, BaseException)]


def _redact_one(error: BaseException, url: str) -> None:
    if any(isinstance(arg, str) for arg in error.args):
        error.args = tuple(redact(arg, url) if isinstance(arg, str) else arg for arg in error.args)
    for name, value in list(vars(error).items()):
        try:
            if isinstance(value, str):
                setattr(error, name, redact(value, url))
            elif name == "__notes__" and isinstance(value, list):
                value[:] = [redact(note, url) if isinstance(note, str) else note for note in value]
        except (AttributeError, TypeError):  # a read-only attribute: the others still count
            continue
