"""Mutes: the deadlines until which the broker processes nothing from a throttled client."""

from odradek.broker.quotas.mutes import Mutes

KEY = ("peer:1", "ANONYMOUS", "app")


def test_an_unknown_key_is_not_muted() -> None:
    assert Mutes().remaining_ms(KEY, 0) == 0


def test_a_mute_counts_down_and_is_forgotten_once_passed() -> None:
    mutes = Mutes()
    mutes.mute(KEY, 1000)
    assert mutes.remaining_ms(KEY, 0) == 1000
    assert mutes.remaining_ms(KEY, 999) == 1
    assert len(mutes) == 1
    assert mutes.remaining_ms(KEY, 1000) == 0
    assert len(mutes) == 0


def test_a_mute_extends_and_never_shortens() -> None:
    mutes = Mutes()
    mutes.mute(KEY, 1000)
    mutes.mute(KEY, 500)
    assert mutes.remaining_ms(KEY, 0) == 1000
    mutes.mute(KEY, 3000)
    assert mutes.remaining_ms(KEY, 0) == 3000


def test_keys_are_independent() -> None:
    mutes = Mutes()
    mutes.mute(KEY, 1000)
    other = ("peer:2", "ANONYMOUS", "app")
    assert mutes.remaining_ms(other, 0) == 0
    mutes.mute(other, 200)
    assert (mutes.remaining_ms(KEY, 100), mutes.remaining_ms(other, 100)) == (900, 100)


def test_expire_forgets_every_passed_mute() -> None:
    mutes = Mutes()
    mutes.mute("a", 100)
    mutes.mute("b", 200)
    mutes.mute("c", 300)
    assert mutes.expire(200) == 2
    assert len(mutes) == 1
    assert mutes.remaining_ms("c", 200) == 100
