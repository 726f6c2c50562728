"""Why content is ``text`` (and ``bytea`` only when it holds NUL): the two encodings side by side.

Run ``python backends/postgres/benchmarks/content_encoding.py [URL]``. In a scratch schema it
appends acta and reads last-20 windows through psycopg, once with content as ``text`` (what the
store does for content without NUL) and once as ``bytea`` holding UTF-8 (the alternative of always
encoding), for short and long content, and prints the medians in microseconds. The scratch schema
is dropped afterwards.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

URL = sys.argv[1] if len(sys.argv) > 1 else "postgresql://postgres@127.0.0.1:5432/test"
ROUNDS = 400
SIZES = {
    "60 characters": "Book Rumah Teduh for four at 7pm on Friday under Ardian. \U0001f37d ",
    "16 KiB": "x" * 16_384,
}


def median_us(operation: Callable[[int], object], rounds: int = ROUNDS) -> float:
    """Median wall time of ``operation(round)`` in microseconds, after 20 untimed rounds."""
    samples = []
    for number in range(rounds + 20):
        started = time.perf_counter_ns()
        operation(number)
        if number >= 20:
            samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


def measure(
    connection: psycopg.Connection[tuple[Any, ...]], schema: str, column_type: str, content: str
) -> str:
    """Append and read with content stored as ``column_type``; return a result line."""
    table = sql.Identifier(schema, f"acta_{column_type}")
    connection.execute(
        sql.SQL(
            'CREATE TABLE {} (chronicum_id text COLLATE "C", seq bigint, content {},'
            " PRIMARY KEY (chronicum_id, seq))"
        ).format(table, sql.SQL(column_type))
    )
    insert = sql.SQL("INSERT INTO {} VALUES (%s, %s, %s) RETURNING seq").format(table).as_bytes(None)
    select = (
        sql.SQL("SELECT content FROM {} WHERE chronicum_id = %s ORDER BY seq DESC LIMIT 20")
        .format(table)
        .as_bytes(None)
    )
    chronicum_id = uuid.uuid4().hex

    def encode(text: str) -> str | bytes:
        return text.encode() if column_type == "bytea" else text

    def decode(value: str | bytes) -> str:
        return bytes(value).decode() if isinstance(value, bytes | memoryview) else value

    append = median_us(
        lambda number: connection.execute(insert, (chronicum_id, number, encode(content))).fetchone()
    )
    read = median_us(lambda _: [decode(row[0]) for row in connection.execute(select, (chronicum_id,))])
    assert decode(connection.execute(select, (chronicum_id,)).fetchall()[0][0]) == content
    connection.execute(sql.SQL("DROP TABLE {}").format(table))
    return f"{column_type:5}  append {append:8.1f} us   last-20 read {read:8.1f} us"


def main() -> None:
    """Print the comparison for each content size."""
    schema = f"chronica_content_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(URL, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            for label, content in SIZES.items():
                print(f"content of {label}:")
                for column_type in ("text", "bytea", "text", "bytea"):
                    print("  " + measure(connection, schema, column_type, content))
        finally:
            connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main()
