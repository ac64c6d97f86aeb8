"""GetStatus's memory figure, read without psutil, agrees with psutil's."""

from __future__ import annotations

import psutil

from signin_broker.daemon.host.memory import resident_bytes


def test_the_resident_size_read_from_proc_is_psutils() -> None:
    ballast = bytearray(64 * 2**20)  # 64 MiB touched: a change no other noise hides
    ballast[::4096] = b"x" * len(ballast[::4096])
    ours, theirs = resident_bytes(), psutil.Process().memory_info().rss
    assert abs(ours - theirs) < 2 * 2**20, (ours, theirs)
    assert ours > 64 * 2**20
    del ballast
