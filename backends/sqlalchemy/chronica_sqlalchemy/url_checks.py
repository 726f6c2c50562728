"""What a SQLAlchemy URL must hold before a driver sees it: a known driver, a port, usable query values.

Drivers read the URL's query as they connect and refuse a value they cannot use with a plain
Python exception that does not name the parameter (``could not convert string to float: 'abc'``
for SQLite's ``?timeout=abc``; ``'NoneType' object has no attribute 'encoding'`` for PyMySQL's
``?charset=bogus``). The values every driver here reads are checked first, so the error names
the parameter and what it takes: ``InvalidOption`` with the parameter as ``.option``. A driver
name SQLAlchemy does not know (``mysql+pymsql://``) is ``UnknownBackend`` suggesting the nearest
real URL. What only the server can judge (a password, a database that does not exist) stays for
the connection to report.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
from collections.abc import Callable
from importlib.metadata import entry_points
from urllib.parse import urlencode

from sqlalchemy.engine import URL
from sqlalchemy.util import asbool

from chronica_core.errors import InvalidOption, UnknownBackend
from chronica_core.redaction import masked_url

__all__ = [
    "BUILT_IN_DRIVERS",
    "SQLITE_DRIVER_PARAMETERS",
    "SQLITE_URI_PARAMETERS",
    "check_driver_name",
    "check_port",
    "check_query",
    "check_query_names",
    "known_drivers",
]

_BACKEND = "sqlalchemy"

_MYSQL_DRIVERS = (
    "pymysql",
    "asyncmy",
    "aiomysql",
    "mysqldb",
    "mariadbconnector",
    "mysqlconnector",
    "cymysql",
    "pyodbc",
)

BUILT_IN_DRIVERS: dict[str, tuple[str, ...]] = {
    "sqlite": ("pysqlite", "aiosqlite", "pysqlcipher"),
    "mysql": _MYSQL_DRIVERS,
    "mariadb": _MYSQL_DRIVERS,
    "postgresql": ("psycopg", "psycopg_async", "psycopg2", "psycopg2cffi", "pg8000", "asyncpg"),
}
"""The drivers SQLAlchemy 2 ships for the dialects this backend serves (``dialect+driver://``)."""


def known_drivers(dialect: str) -> list[str]:
    """The driver names ``dialect+<driver>://`` may use: SQLAlchemy's own and third-party plugins'.

    Third-party dialects register through the ``sqlalchemy.dialects`` entry-point group as
    ``dialect.driver``; those for ``dialect`` count too.
    """
    names = list(BUILT_IN_DRIVERS.get(dialect, ()))
    for entry_point in entry_points(group="sqlalchemy.dialects"):
        plugin_dialect, _, driver = entry_point.name.partition(".")
        if plugin_dialect == dialect and driver and driver not in names:
            names.append(driver)
    return names


def check_driver_name(url: URL) -> None:
    """Raise ``UnknownBackend`` when ``url`` names a driver SQLAlchemy has no dialect for.

    The message suggests the nearest known URL (``did you mean mysql+pymysql://?``) and lists
    the drivers of the dialect. A dialect this backend does not know the drivers of passes.
    """
    dialect, _, driver = url.drivername.partition("+")
    known = known_drivers(dialect)
    if not driver or not known or driver in known:
        return
    near = difflib.get_close_matches(driver, known, n=1, cutoff=0.5)
    suggestion = f"; did you mean {dialect}+{near[0]}://?" if near else ""
    raise UnknownBackend(
        f"SQLAlchemy has no driver {driver!r} for {dialect}:// in {masked_url(url.render_as_string())}"
        f"{suggestion} (drivers: {', '.join(known)})"
    )


def check_port(url: URL) -> None:
    """Raise ``InvalidOption`` (option ``port``) for a port outside 1 to 65535."""
    if url.port is not None and not 0 < url.port < 65536:
        raise InvalidOption(_BACKEND, "port", f"the URL's port must be from 1 to 65535, got {url.port}")


def _seconds(value: str) -> str | None:
    try:
        number = float(value)
    except ValueError:
        return "must be a number of seconds"
    return None if number >= 0 and number == number else "must be a number of seconds, 0 or more"


def _whole_seconds(value: str) -> str | None:
    try:
        number = int(value)
    except ValueError:
        return "must be a whole number of seconds"
    return None if number > 0 else "must be a whole number of seconds, 1 or more"


def _count(value: str) -> str | None:
    try:
        number = int(value)
    except ValueError:
        return "must be a whole number"
    return None if number >= 0 else "must be a whole number, 0 or more"


def _flag(value: str) -> str | None:
    try:
        asbool(value)
    except ValueError:
        return "must be true or false (also yes/no, on/off, 1/0)"
    return None


def _existing_file(value: str) -> str | None:
    return None if os.path.isfile(value) else "names no file that exists"


_Check = Callable[[str], "str | None"]

_SQLITE: dict[str, _Check] = {
    "timeout": _seconds,
    "check_same_thread": _flag,
    "cached_statements": _count,
    "uri": _flag,
}
_MYSQL: dict[str, _Check] = {
    "connect_timeout": _whole_seconds,
    "read_timeout": _whole_seconds,
    "write_timeout": _whole_seconds,
    "local_infile": _flag,
    "port": _count,
    "ssl_ca": _existing_file,
    "ssl_cert": _existing_file,
    "ssl_key": _existing_file,
}
_POSTGRESQL: dict[str, _Check] = {"connect_timeout": _count, "port": _count}
_QUERY_CHECKS = {"sqlite": _SQLITE, "mysql": _MYSQL, "mariadb": _MYSQL, "postgresql": _POSTGRESQL}

_CHARSET_MODULES = {"pymysql": "pymysql.charset", "asyncmy": "asyncmy.charset"}
"""Drivers whose character-set table can be asked before connecting (``charset_by_name``)."""


def _charset_problem(driver: str, value: str) -> str | None:
    module_name = _CHARSET_MODULES.get(driver)
    if module_name is None:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError:  # the driver is missing: opening reports that
        return None
    if module.charset_by_name(value) is None:
        return f"is no character set {driver} knows (MariaDB needs utf8mb4, the default)"
    return None


def check_query(url: URL) -> None:
    """Raise ``InvalidOption`` for a query value of ``url`` its driver would refuse as it connects.

    Checked: SQLite's ``timeout`` (seconds), ``check_same_thread`` and ``uri`` (true or false),
    ``cached_statements`` (a count); MariaDB/MySQL's ``connect_timeout``, ``read_timeout`` and
    ``write_timeout`` (whole seconds), ``local_infile`` (true or false), ``charset`` (one PyMySQL
    or asyncmy knows), ``ssl_ca``, ``ssl_cert`` and ``ssl_key`` (files that exist); PostgreSQL's
    ``connect_timeout``. ``.option`` is the parameter's name; the reason quotes the value given.
    """
    dialect = url.get_backend_name()
    checks = _QUERY_CHECKS.get(dialect, {})
    for name, given in url.query.items():
        values = given if isinstance(given, tuple) else (given,)
        for value in values:
            check = checks.get(name)
            problem = check(value) if check is not None else None
            if name == "charset" and dialect in ("mysql", "mariadb"):
                problem = _charset_problem(url.get_driver_name(), value)
            if problem:
                raise InvalidOption(_BACKEND, name, f"the URL's ?{name}= {problem}, got {value!r}")


SQLITE_DRIVER_PARAMETERS = ("timeout", "check_same_thread", "cached_statements", "uri")
"""The SQLite URL's query parameters the store passes to the ``sqlite3`` driver."""

SQLITE_URI_PARAMETERS: dict[str, tuple[str, ...] | None] = {
    "mode": ("ro", "rw", "rwc", "memory"),
    "cache": ("shared", "private"),
    "vfs": None,
    "psow": None,
    "nolock": None,
    "immutable": None,
}
"""SQLite's own URI parameters and their values (``None``: any), taken with ``uri=true`` and a
``file:`` database only (``sqlite:///file:x.db?mode=ro&uri=true``)."""

_SQLITE_REFUSED = {
    "isolation_level": "the store begins and ends its own transactions",
    "detect_types": "the store reads its columns as SQLAlchemy types them",
}

_MYSQL_SSL = ("ssl_ca", "ssl_key", "ssl_cert", "ssl_capath", "ssl_cipher", "ssl_check_hostname")
"""Query parameters SQLAlchemy's MariaDB/MySQL dialects gather into the driver's ``ssl`` argument."""

_MYSQL_CONNECT = {"pymysql": "pymysql", "asyncmy": "asyncmy"}
"""The drivers whose ``connect`` function's parameters are the query parameters they take."""


def check_query_names(url: URL) -> None:
    """Raise ``InvalidOption`` for a query parameter of ``url`` its driver would not take.

    SQLite (both drivers): :data:`SQLITE_DRIVER_PARAMETERS`, and :data:`SQLITE_URI_PARAMETERS`
    with ``uri=true`` and a ``file:`` database (a plain path would be opened as a file whose name
    holds the query); SQLAlchemy would ignore any other with a warning, and SQLite an unknown URI
    parameter without one. MariaDB/MySQL on PyMySQL or asyncmy: the parameters of the driver's
    ``connect`` (and SQLAlchemy's ``ssl_*``). PostgreSQL on psycopg: what libpq takes. Other
    drivers pass unchecked. ``.option`` is the parameter's name; nothing has connected yet.
    """
    dialect, driver = url.get_backend_name(), url.get_driver_name()
    if dialect == "sqlite":
        _check_sqlite(url)
    elif dialect in ("mysql", "mariadb") and driver in _MYSQL_CONNECT:
        _check_keywords(url, _MYSQL_CONNECT[driver], _MYSQL_SSL)
    elif dialect == "postgresql" and driver == "psycopg":
        _check_libpq(url)


def _check_sqlite(url: URL) -> None:
    given_uri = url.query.get("uri", "false")
    uri = any(_flag(value) is None and asbool(value) for value in _values(given_uri))
    file_uri = uri and (url.database or "").startswith("file:")
    for name in url.query:
        if name in SQLITE_DRIVER_PARAMETERS:
            continue
        if name in _SQLITE_REFUSED:
            raise InvalidOption(_BACKEND, name, f"the URL's ?{name}= is not taken: {_SQLITE_REFUSED[name]}")
        if name not in SQLITE_URI_PARAMETERS:
            known = ", ".join((*SQLITE_DRIVER_PARAMETERS, *SQLITE_URI_PARAMETERS))
            raise InvalidOption(_BACKEND, name, f"the URL's ?{name}= is no SQLite parameter (known: {known})")
        if not file_uri:
            raise InvalidOption(
                _BACKEND,
                name,
                f"the URL's ?{name}= is a SQLite URI parameter: it needs a file: path and uri=true, "
                f"as in sqlite:///file:{url.database or 'x.db'}?{name}=...&uri=true",
            )
        allowed = SQLITE_URI_PARAMETERS[name]
        for value in _values(url.query[name]):
            if allowed is not None and value not in allowed:
                raise InvalidOption(
                    _BACKEND, name, f"the URL's ?{name}= must be one of {', '.join(allowed)}, got {value!r}"
                )


def _values(given: str | tuple[str, ...]) -> tuple[str, ...]:
    """A query parameter's values (SQLAlchemy gives a tuple for one given more than once)."""
    return given if isinstance(given, tuple) else (given,)


def _check_keywords(url: URL, module_name: str, also: tuple[str, ...]) -> None:
    try:
        module = importlib.import_module(module_name)
    except ImportError:  # the driver is missing: opening reports that
        return
    taken = set(inspect.signature(module.connect).parameters) | set(also)
    for name in url.query:
        if name not in taken:
            raise InvalidOption(
                _BACKEND, name, f"the URL's ?{name}= is no parameter {module_name}.connect takes"
            )


def _check_libpq(url: URL) -> None:
    try:
        psycopg = importlib.import_module("psycopg")
        conninfo = importlib.import_module("psycopg.conninfo")
    except ImportError:  # the driver is missing: opening reports that
        return
    for name, given in url.query.items():
        for value in _values(given):
            try:
                conninfo.conninfo_to_dict("postgresql://?" + urlencode({name: value}))
            except psycopg.ProgrammingError as error:
                raise InvalidOption(
                    _BACKEND, name, f"libpq does not take the URL's ?{name}= ({str(error).strip()})"
                ) from None
