"""The stub's signing keys: spared between stubs of one process, never shared by two."""

from __future__ import annotations

import gc

from signin_broker_testing.keys import SigningKeys


def test_stubs_that_exist_at_once_never_share_a_key() -> None:
    first, second = SigningKeys(), SigningKeys()
    assert first.current.kid != second.current.kid
    second.rotate(keep_previous=True)
    kids = [key["kid"] for key in second.jwks()["keys"]]
    assert len(set(kids)) == 2 and first.current.kid not in kids


def test_the_keys_of_a_stub_that_is_gone_serve_the_next_one() -> None:
    gc.collect()  # no other stub's keys come back between the two lines below
    gone = SigningKeys()
    kid = gone.current.kid
    del gone  # no cycle: its keys go back at once
    assert SigningKeys().current.kid == kid


def test_a_rotation_brings_a_key_new_to_its_stub() -> None:
    keys = SigningKeys()
    spare = SigningKeys()
    del spare  # its key goes to the spare list, to be taken by the rotation
    seen = {keys.current.kid}
    for _ in range(3):
        kid = keys.rotate(keep_previous=True)
        assert kid not in seen
        seen.add(kid)
    assert {key["kid"] for key in keys.jwks()["keys"]} == seen
