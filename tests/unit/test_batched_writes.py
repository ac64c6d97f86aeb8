"""An HTTP/2 connection's writes of one event-loop turn go out as one send (batched_writes.py)."""

from __future__ import annotations

import asyncio
import socket

from signin_broker.daemon.api.batched_writes import BatchedWrites


async def connected() -> tuple[BatchedWrites, socket.socket, list[int]]:
    """A BatchedWrites over a real Unix socket transport; the peer, and each send's size."""
    ours, peer = socket.socketpair()
    transport, _ = await asyncio.get_running_loop().connect_accepted_socket(asyncio.Protocol, ours)
    sends: list[int] = []
    write = transport.write

    def counting(data: bytes | bytearray | memoryview) -> None:
        sends.append(len(data))
        write(data)

    transport.write = counting  # type: ignore[method-assign]
    peer.setblocking(False)
    return BatchedWrites(transport), peer, sends


async def received(peer: socket.socket, size: int) -> bytes:
    data = b""
    for _ in range(100):
        try:
            data += peer.recv(65536)
        except BlockingIOError:
            await asyncio.sleep(0.01)
        if len(data) >= size:
            break
    return data


def test_the_writes_of_one_turn_go_out_as_one_send_in_order() -> None:
    async def scenario() -> None:
        batched, peer, sends = await connected()
        for frame in (b"HEADERS", b"DATA", b"", b"TRAILERS"):
            batched.write(frame)
        assert sends == []  # nothing before the turn ends
        assert batched.get_write_buffer_size() == len(b"HEADERSDATATRAILERS")
        await asyncio.sleep(0)
        assert sends == [len(b"HEADERSDATATRAILERS")]
        batched.write(b"NEXT")
        await asyncio.sleep(0)
        assert sends == [19, 4]
        assert await received(peer, 23) == b"HEADERSDATATRAILERSNEXT"
        batched.close()
        peer.close()

    asyncio.run(scenario())


def test_close_sends_what_was_written_and_abort_drops_it() -> None:
    async def scenario() -> None:
        closing, peer, _ = await connected()
        closing.write(b"GOAWAY")
        closing.close()
        assert closing.is_closing()
        assert await received(peer, 6) == b"GOAWAY"
        aborting, other_peer, sends = await connected()
        aborting.write(b"dropped")
        aborting.abort()
        await asyncio.sleep(0)
        assert sends == []
        peer.close()
        other_peer.close()

    asyncio.run(scenario())


def test_the_end_of_the_stream_follows_what_was_written() -> None:
    async def scenario() -> None:
        batched, peer, _ = await connected()
        batched.write(b"413")
        assert batched.can_write_eof()
        batched.write_eof()
        assert await received(peer, 3) == b"413"
        peer.setblocking(True)
        peer.settimeout(5)
        assert peer.recv(10) == b""  # the end of the stream, after the answer
        batched.close()
        peer.close()

    asyncio.run(scenario())
