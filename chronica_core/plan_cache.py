"""Keeping one plan per prepared statement on PostgreSQL.

psycopg prepares a statement on the server once it has run five times on a connection. PostgreSQL
then plans it with each call's values for five more runs and afterwards keeps a generic plan only
if that plan's estimate is no worse than those custom plans' average. A context window's ``LIMIT``
defeats that test: the generic plan must assume a tenth of the chronicum's estimated acta, a custom
plan for ``LIMIT 20`` looks far cheaper, so once the tables have statistics (autovacuum gathers
them) every read would be planned again. The stores' statements all go along an index whatever
their values (a chronicum's or an owner's key, the newest first; a parameter that may be NULL
gates its lookup by a condition of its own, which a generic plan checks once), so a generic plan
is as good as a custom one for each of them: the PostgreSQL backends set
:data:`GENERIC_PLANS_SQL` on every connection they open.
"""

from __future__ import annotations

__all__ = ["GENERIC_PLANS_SQL"]

GENERIC_PLANS_SQL = (
    "SELECT set_config('plan_cache_mode', 'force_generic_plan', false)"
    " WHERE current_setting('plan_cache_mode', true) = 'auto'"
)
"""Make the session keep the generic plan of a prepared statement from its first prepared run.

``plan_cache_mode`` is a session setting (PostgreSQL 12 and later). Only PostgreSQL's default,
``auto``, is replaced: a mode chosen for the session already (``options=-c plan_cache_mode=...``
in the URL, ``PGOPTIONS``, ``ALTER ROLE`` or ``ALTER DATABASE ... SET``) is kept, and on an older
server, which has no such setting, the statement does nothing. One row with the new value, or
none. It outlives the transaction it runs in only if that commits (run it in autocommit).
"""
