"""``console.sessions``: sessions end when signed out, idle, old, or pushed out."""

from __future__ import annotations

from datetime import timedelta

from console.sessions import Sessions

TOKEN = "cwk_0123456789abcdef_" + "s" * 43


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_names_its_holder_and_keeps_the_key_out_of_its_repr() -> None:
    # Given a session of an operator
    sessions = Sessions()
    session_id, session = sessions.start("alice", "operator", "0123456789abcdef", TOKEN)
    # Then its id finds it, it may change things, and its repr and str hold no key
    assert sessions.get(session_id) == session
    assert session.may_change and session.token == TOKEN
    assert TOKEN not in repr(session) and TOKEN not in str(session)
    assert str(session) == "user alice (operator, API key 0123456789abcdef)"
    assert len(session_id) >= 43 and TOKEN not in session_id


def test_a_viewer_may_not_change_things_and_unknown_ids_find_nothing() -> None:
    sessions = Sessions()
    _, viewer = sessions.start("vera", "viewer", "k", TOKEN)
    assert not viewer.may_change
    assert sessions.get("no-such-session") is None
    assert sessions.get(None) is None and sessions.get("") is None


def test_signing_out_ends_the_session() -> None:
    sessions = Sessions()
    session_id, session = sessions.start("alice", "operator", "k", TOKEN)
    assert sessions.end(session_id) == session
    assert sessions.get(session_id) is None
    assert sessions.end(session_id) is None


def test_a_session_ends_when_idle_and_at_its_lifetime_however_busy() -> None:
    # Given sessions that end after 10 idle minutes, or an hour after they began
    clock = Clock()
    sessions = Sessions(idle=timedelta(minutes=10), lifetime=timedelta(hours=1), clock=clock)
    idle_id, _ = sessions.start("idle", "viewer", "k1", TOKEN)
    busy_id, _ = sessions.start("busy", "operator", "k2", TOKEN)
    # When one is used every 9 minutes and the other not at all
    for _ in range(6):
        clock.now += 9 * 60
        assert sessions.get(busy_id) is not None
    # Then the idle one has ended, and the busy one ends at its hour
    assert sessions.get(idle_id) is None
    clock.now += 9 * 60  # 63 minutes after it began
    assert sessions.get(busy_id) is None
    assert len(sessions) == 0


def test_sessions_are_bounded_and_the_least_recently_used_goes_first() -> None:
    # Given room for three sessions, the first of them used again
    sessions = Sessions(limit=3)
    ids = [sessions.start(f"u{i}", "viewer", f"k{i}", TOKEN)[0] for i in range(3)]
    assert sessions.get(ids[0]) is not None
    # When two more people sign in
    newer = [sessions.start(f"n{i}", "viewer", f"m{i}", TOKEN)[0] for i in range(2)]
    # Then the two used least recently are gone, and there are still three
    assert len(sessions) == 3
    assert sessions.get(ids[1]) is None and sessions.get(ids[2]) is None
    assert sessions.get(ids[0]) is not None
    assert all(sessions.get(i) is not None for i in newer)


def test_after_signing_in_a_person_goes_back_to_a_page_of_the_console_only() -> None:
    from console.sign_in import _next

    assert _next("/schedules/nightly") == "/schedules/nightly"
    for elsewhere in ("https://evil.example/", "//evil.example/", "/\\evil.example", "", None):
        assert _next(elsewhere) == "/"
