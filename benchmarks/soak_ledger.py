"""The soak run's records of ids, kept in files so that they do not grow the process they measure.

A run of an hour acknowledges about 140,000 acta; kept as Python strings, their ids alone would
add some 12 MB to the resident memory the run is there to watch.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["IdLog"]


class IdLog:
    """Ids in the order they were added, one a line in a file of their own; one writer at a time.

    Memory stays constant: only the count and the first and last ids are kept.
    """

    def __init__(self, path: Path) -> None:
        """Start an empty log in the file ``path`` (created, or emptied if it exists)."""
        self.path = path
        self._file = path.open("w", encoding="ascii")
        self.count = 0
        self.first: str | None = None
        self.last: str | None = None

    def add(self, actum_id: str) -> None:
        """Append ``actum_id`` (an id without line breaks)."""
        self._file.write(actum_id + "\n")
        self.count += 1
        if self.first is None:
            self.first = actum_id
        self.last = actum_id

    def ids(self) -> list[str]:
        """Every id added so far, in order (read back from the file)."""
        if not self._file.closed:
            self._file.flush()
        return self.path.read_text(encoding="ascii").splitlines()

    def close(self) -> None:
        """Close the file (the ids stay readable with :meth:`ids`)."""
        self._file.close()
