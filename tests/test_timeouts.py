"""The core's alarm that cuts a connection whose operation outlived ``operation_timeout``."""

from __future__ import annotations

import socket

from chronica_core.timeouts import WRITE_FATE_UNKNOWN, cut_after, timed_out


def test_an_alarm_that_fires_shuts_the_socket_down_and_says_so() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        alarm = cut_after(0.05, ours.fileno())
        ours.settimeout(10)
        assert ours.recv(1) == b""  # the wait ends: the socket was shut down under it
        assert alarm.fired
        assert alarm.disarm() is True
        assert theirs.recv(1) == b""  # the far end sees it closed too


def test_an_alarm_disarmed_in_time_never_touches_the_socket() -> None:
    ours, theirs = socket.socketpair()
    other, its_peer = socket.socketpair()
    with ours, theirs, other, its_peer:
        alarm = cut_after(0.05, ours.fileno())
        assert alarm.disarm() is False
        cut_after(0.1, other.fileno())  # a later alarm fires: the disarmed one had its moment by then
        other.settimeout(10)
        assert other.recv(1) == b""
        ours.sendall(b"x")  # still open: the disarmed alarm did nothing
        assert theirs.recv(1) == b"x"
        assert not alarm.fired


def test_many_alarms_disarmed_in_time_fire_none() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        alarms = [cut_after(3600, ours.fileno()) for _ in range(3000)]
        assert not any(alarm.disarm() for alarm in alarms)
        ours.sendall(b"x")
        assert theirs.recv(1) == b"x"


def test_the_message_says_timed_out_and_what_a_write_may_have_done() -> None:
    assert timed_out(1.5) == (
        "timed out: no answer within operation_timeout (1.5 s), so the connection was cut; "
        + WRITE_FATE_UNKNOWN
    )
    assert timed_out(2, sent=False) == (
        "timed out: no free connection within operation_timeout (2 s); nothing was sent"
    )
