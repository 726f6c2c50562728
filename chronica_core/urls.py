"""Store options carried in a URL's query, where only a URL can be given (``CHRONICA_STORE``, say).

``postgresql://host/db?schema=chronica`` means the ``schema`` option on every backend that has
one; a backend takes such parameters out of the URL before its driver sees it (the driver would
refuse or ignore them), and an option given explicitly wins over the URL's.
"""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import unquote, urlsplit

__all__ = ["split_query_options", "split_schema"]


def split_query_options(url: str, names: Collection[str]) -> tuple[str, dict[str, str]]:
    """Take the query parameters called one of ``names`` out of ``url``.

    Args:
        url: a URL (``scheme://host/db?a=1&schema=x``); any other text is returned unchanged.
        names: the parameters to take out (``{"schema"}``).

    Returns:
        The URL without them (every other parameter kept as it was written, in its order) and
        the values taken, percent-decoded, by name; a parameter given twice keeps its last
        value. A URL that cannot be split (an unclosed ``[``) is returned unchanged with no
        values: its driver's own message then says what is wrong when connecting.
    """
    try:
        urlsplit(url)  # the driver's own message says what is wrong with a URL that cannot be split
    except ValueError:
        return url, {}
    # Cut by hand, not rebuilt with urlunsplit, which drops the "//" of sqlite:///file.db.
    base, mark, rest = url.partition("?")
    query, hash_mark, fragment = rest.partition("#")
    if not mark or not query or "#" in base:  # no query, or a "?" inside the fragment
        return url, {}
    kept: list[str] = []
    found: dict[str, str] = {}
    for item in query.split("&"):
        name, _, value = item.partition("=")
        if unquote(name) in names:
            found[unquote(name)] = unquote(value)
        else:
            kept.append(item)
    if not found:
        return url, {}
    return f"{base}{'?' if kept else ''}{'&'.join(kept)}{hash_mark}{fragment}", found


def split_schema(url: str) -> tuple[str, str | None]:
    """Take a ``schema`` query parameter out of ``url`` (see :func:`split_query_options`).

    Returns the URL without it and the schema (``None`` when absent): ``postgresql://h/db?schema=app``
    gives ``("postgresql://h/db", "app")``.
    """
    url, found = split_query_options(url, ("schema",))
    return url, found.get("schema")
