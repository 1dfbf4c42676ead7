"""A loopback TCP proxy that can stop forwarding while keeping every socket open.

`pause()` makes each connection through it half-open, the way a dead peer, a silent
firewall or a network partition does: nothing is refused, nothing is reset, bytes just
stop arriving in either direction (and an end of stream is held back too). Connections
opened while paused are accepted and connected upstream, then stall the same way.
`resume()` delivers what was held and forwards again. `close()` closes everything.

It runs its own asyncio loop in a daemon thread, so sync tests can use it:

    with TcpProxy("127.0.0.1", server_port) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/db"
        ...
        proxy.pause()
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

T = TypeVar("T")

_CHUNK = 64 * 1024
_CALL_TIMEOUT = 10.0


class TcpProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        self.accepted = 0  # connections accepted since start
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    # --- the caller's side (any thread) -------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    @property
    def open_connections(self) -> int:
        """Client connections currently open through the proxy."""
        return len(self._writers) // 2

    def start(self) -> TcpProxy:
        self._thread.start()
        self._call(self._start())
        return self

    def pause(self) -> None:
        """Stop forwarding in both directions; returns once no new byte will pass."""
        self._call(self._set_flowing(False))

    def resume(self) -> None:
        self._call(self._set_flowing(True))

    def close(self) -> None:
        if self._closed or not self._thread.is_alive():
            self._closed = True
            return
        self._closed = True
        try:
            self._call(self._close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=_CALL_TIMEOUT)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(_CALL_TIMEOUT)

    # --- the loop's side ----------------------------------------------------------------

    async def _start(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _set_flowing(self, flowing: bool) -> None:
        assert self._flowing is not None
        if flowing:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _accept(self, client_in: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            server_in, server = await asyncio.open_connection(*self.upstream)
        except OSError:
            client.close()
            return
        self._writers.update((client, server))
        pumps = [
            asyncio.create_task(self._pump(client_in, server, client)),
            asyncio.create_task(self._pump(server_in, client, server)),
        ]
        self._tasks.update(pumps)
        try:
            await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            self._tasks.difference_update(pumps)
            for writer in (client, server):
                self._writers.discard(writer)
                writer.close()

    async def _pump(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        source_writer: asyncio.StreamWriter,
    ) -> None:
        flowing = self._flowing
        assert flowing is not None
        try:
            while True:
                await flowing.wait()
                data = await source.read(_CHUNK)
                # Whatever arrived while paused (bytes or the end of the stream) waits here.
                await flowing.wait()
                if not data:
                    if sink.can_write_eof():
                        sink.write_eof()
                    return
                sink.write(data)
                await sink.drain()
        except OSError:
            # A reset on either side ends both directions, as it would end a real path.
            sink.close()
            source_writer.close()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for writer in list(self._writers):
            writer.close()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
