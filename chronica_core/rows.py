"""Rows answer the statement asked: a store builds its results from them, after this check.

A store's results come from the rows its database returned, the chronicum id (and, for a write,
the actum id) included, never from the request's arguments. A connection that answered another
statement (a desynchronised protocol, a pooled connection handed over mid-answer, a proxy bug)
then fails loudly instead of passing another chronicum's acta off as the caller's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from chronica_core.errors import StoreError

__all__ = ["check_row", "check_rows"]


def check_row(where: str, what: str, expected: str, got: object) -> None:
    """Raise ``StoreError(where, ...)`` unless a row's ``what`` (e.g. ``"chronicum id"``) is ``expected``.

    Args:
        where: where it happened, e.g. ``"postgres: read acta"``.
        what: which value of the row is checked, for the message.
        expected: the value the statement asked for.
        got: the value in the row.

    Raises:
        StoreError: ``got`` is not ``expected``; the message names ``expected`` only (the other
            value may be someone else's).
    """
    if got != expected:
        raise StoreError(
            where, f"the database answered with a row of another {what} than {expected!r}; it is refused"
        )


def check_rows(
    where: str, what: str, expected: str, rows: Iterable[Sequence[object]], column: int = 0
) -> None:
    """:func:`check_row` for the value in ``column`` of every row of ``rows`` (a read's answer).

    A plain loop with no call per row, since every context window is checked.

    Raises:
        StoreError: a row holds another value than ``expected`` there.
    """
    for row in rows:
        if row[column] != expected:
            check_row(where, what, expected, row[column])
