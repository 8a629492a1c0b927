"""A TCP proxy that delays each direction by half a round-trip time, for the cluster network
rows of scripts/bench (examples/bench/cluster_net.rs): this kernel has no netem.

  bench-proxy.py LISTEN_PORT TARGET_PORT CONTROL_FILE

Listens on 127.0.0.1:LISTEN_PORT and forwards every connection to 127.0.0.1:TARGET_PORT. The
round-trip time in milliseconds is read from CONTROL_FILE (re-read every 50 ms; missing or
empty: 0), and every chunk read from either side is written to the other that long / 2 after it
was read, in order. The delay is a pipe's, not a stop-and-wait: chunks in flight overlap, so
bandwidth is not capped by the delay (as on a real network with a large enough window).
"""

import asyncio
import sys
import time

RTT_MS = 0.0


async def watch(path):
    global RTT_MS
    while True:
        try:
            with open(path) as f:
                text = f.read().strip()
            RTT_MS = float(text) if text else 0.0
        except (OSError, ValueError):
            RTT_MS = 0.0
        await asyncio.sleep(0.05)


async def pipe(reader, writer):
    queue = asyncio.Queue()

    async def pump_in():
        try:
            while True:
                data = await reader.read(1 << 18)
                await queue.put((time.monotonic() + RTT_MS / 2000.0, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await queue.put((0.0, b""))

    async def pump_out():
        try:
            while True:
                due, data = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    await asyncio.gather(pump_in(), pump_out())


async def main():
    listen, target, control = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    asyncio.ensure_future(watch(control))

    async def serve(client_r, client_w):
        try:
            broker_r, broker_w = await asyncio.open_connection("127.0.0.1", target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(pipe(client_r, broker_w), pipe(broker_r, client_w))

    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
