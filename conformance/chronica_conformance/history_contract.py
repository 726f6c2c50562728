"""The history contract: forks, summaries, tool exchanges, an actum by id and pages back.

The ``history`` capability's cases, in three groups of their own (:class:`ForkContract`,
:class:`SummaryContract`, :class:`ExchangeContract`); every case name starts with ``test_history_``.
"""

from __future__ import annotations

from chronica_conformance.exchange_contract import ExchangeContract
from chronica_conformance.fork_contract import ForkContract
from chronica_conformance.summary_contract import SummaryContract

__all__ = ["HistoryContract"]


class HistoryContract(ForkContract, SummaryContract, ExchangeContract):
    """Every case of the history capability.

    Runs where the store has ``layout``, ``window``, ``locate``, ``fork`` and ``record_summary``
    (``HistoryStore`` / ``AsyncHistoryStore``); skipped, with the reason, elsewhere, unless the
    suite declares ``"history"`` in ``declares_capabilities`` (then it fails).
    """
