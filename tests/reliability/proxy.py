"""A loopback TCP proxy that can cut a connection at a chosen moment: when
armed, the first chunk from the server side that `cut_when` accepts is not
forwarded, and both sides of that connection are closed. Used to lose an
answer after the work it answers for was done (a commit, a response)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class CuttingProxy:
    """Listens on a loopback port; forwards to `host:port`, or, when `host`
    is a folder (a server reached by its Unix socket, as the embedded one
    is), to the socket `host/.s.PGSQL.<port>` there."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.cut_when: Callable[[bytes], bool] | None = None  # armed while set
        self.cuts = 0
        self.cut = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def arm(self, cut_when: Callable[[bytes], bool]) -> None:
        self.cut.clear()
        self.cut_when = cut_when

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        for pump in list(self._pumps):
            pump.cancel()
        for pump in list(self._pumps):
            with contextlib.suppress(BaseException):
                await pump
        if self._server is not None:
            await self._server.wait_closed()

    async def _accepted(
        self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        try:
            host, port = self.target
            if host.startswith("/"):
                server_r, server_w = await asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}")
            else:
                server_r, server_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        self._writers |= {client_w, server_w}

        def close_both() -> None:
            client_w.close()
            server_w.close()

        async def pump(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, from_server: bool
        ) -> None:
            tail = b""  # the end of the last chunk: a pattern may span two
            try:
                while data := await reader.read(65536):
                    cut_when = self.cut_when
                    if from_server and cut_when is not None and cut_when(tail + data):
                        self.cut_when = None
                        self.cuts += 1
                        close_both()
                        self.cut.set()
                        return
                    tail = data[-64:]
                    writer.write(data)
                    await writer.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                close_both()

        for reader, writer, from_server in (
            (client_r, server_w, False),
            (server_r, client_w, True),
        ):
            task = asyncio.create_task(pump(reader, writer, from_server))
            self._pumps.add(task)
            task.add_done_callback(self._pumps.discard)
