"""A URL's query parameters, checked with libpq before anything connects.

The parameters the store reads itself (``schema``, ``connect_timeout``, ...) are taken out first;
every other one goes to libpq, which knows its own keywords (``sslmode``, ``application_name``,
``options``, ...). libpq refuses one it does not know only as it connects, and names it in a
message; here the URL is parsed by libpq (:func:`psycopg.conninfo.conninfo_to_dict`, no I/O)
first, so that such a parameter is ``InvalidOption`` naming it, and nothing is connected to.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

from chronica_core.errors import InvalidOption

__all__ = ["check_query"]

_BACKEND = "postgres"


def check_query(url: str) -> None:
    """Raise ``InvalidOption`` for a query parameter of ``url`` that libpq would refuse.

    Args:
        url: a libpq URL (``postgresql://host/db?sslmode=require``) without the store's own
            parameters; any other text (a ``key=value`` string) passes unchecked.

    Raises:
        InvalidOption: libpq refuses the parameter (a keyword it does not know, or ``ssl``
            other than ``true``); ``.option`` is its name, the reason quotes libpq. A URL libpq
            cannot parse for another reason passes: connecting reports it.
    """
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        pass
    else:
        return
    try:
        query = urlsplit(url).query
    except ValueError:
        return
    for name, value in parse_qsl(query, keep_blank_values=True):
        try:
            conninfo_to_dict("postgresql://?" + urlencode({name: value}))
        except psycopg.ProgrammingError as error:
            raise InvalidOption(
                _BACKEND,
                name,
                f"libpq does not take the URL's ?{name}= ({str(error).strip()})",
            ) from None
