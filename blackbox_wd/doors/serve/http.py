"""uvicorn's h11 protocol, answering a request head that is too large with 431 instead of a TCP reset.

Stock uvicorn answers any h11 protocol error with 400 and closes the socket at once; a client that is
still sending its oversized head then gets a reset (RST, unread data on close) and never reads even
that 400. Here a head over ``HEAD_LIMIT`` gets ``431 Request Header Fields Too Large``; the rest of
what the client sends is read and dropped until it closes, or ``LINGER`` seconds.
"""

from __future__ import annotations

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_LIMIT = 64 * 1024  # bytes of request line and headers (uvicorn's h11_max_incomplete_event_size)
LINGER = 5.0  # seconds a refused client may go on sending before the socket closes


class GuardedH11Protocol(H11Protocol):
    """H11Protocol with a 431 for an oversized request head and a lingering close after it."""

    draining = False

    def data_received(self, data: bytes) -> None:
        """Bytes from the client; dropped once the connection is refused."""
        if not self.draining:
            super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a protocol error: 431 when the unparsed head is over the limit, else its 400."""
        if len(self.conn.trailing_data[0]) <= HEAD_LIMIT:
            super().send_400_response(msg)
            return
        body = b"Request header fields too large\n"
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=431, headers=headers, reason=b"Request Header Fields Too Large"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.draining = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(LINGER, self.transport.close)
