"""An actum's optional fields in its stream entry: its native form, the request it answers, its range.

Each is written only when the actum has it, as field/value pairs after the six fields every entry
holds (see :mod:`chronica_redis.keys`): ``n`` and ``d`` (the native form's format and data), ``w``
(the id of the ``tool_request`` a response answers), ``s`` and ``l`` (the ids of the first and last
actum of the range a summary stands for). An entry written before these fields existed has none
of them, and reads back as an actum without them.
"""

from __future__ import annotations

from collections.abc import Sequence

from chronica_core.model import Actum, Native, Span

__all__ = ["extra_fields", "read_extras"]


def extra_fields(actum: Actum) -> list[str]:
    """The optional fields of ``actum``'s stream entry, as ``[name, value, ...]`` (``[]``: none)."""
    fields: list[str] = []
    if actum.native is not None:
        fields += ["n", actum.native.format, "d", actum.native.data]
    if actum.answers:
        fields += ["w", actum.answers]
    if actum.summarizes is not None:
        fields += ["s", actum.summarizes.first, "l", actum.summarizes.last]
    return fields


def read_extras(items: Sequence[str]) -> tuple[Native | None, str, Span | None]:
    """The native form, ``answers`` and ``summarizes`` the optional ``items`` (name, value, ...) hold."""
    fields = dict(zip(items[::2], items[1::2], strict=True))
    native = Native(fields["n"], fields["d"]) if "n" in fields else None
    summarizes = Span(fields["s"], fields["l"]) if "s" in fields else None
    return native, fields.get("w", ""), summarizes
