"""What a sleep between calls costs a bare grpc.aio unary round trip (client and server in one process, no
interceptors, 2 KB messages): CPU per call back to back against calls 3 ms apart, the same number, alternated.
    .venv/bin/python docs/perf/session-s39/experiments/echo-wake.py"""
import asyncio
import statistics
import time

import grpc

PAYLOAD = b"x" * 2048


async def main():
    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(_echo)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("echo.Echo", {"Echo": handler})])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary("/echo.Echo/Echo")
        for _ in range(300):
            await call(PAYLOAD)
        spent = {0.0: [], 0.003: []}
        for _ in range(6):
            for gap in spent:
                cpu = 0.0
                for _ in range(300):
                    if gap:
                        await asyncio.sleep(gap)
                    t = time.process_time()
                    await call(PAYLOAD)
                    cpu += time.process_time() - t
                spent[gap].append(cpu / 300 * 1000)
    await server.stop(None)
    for gap, values in spent.items():
        print(f"gap {gap * 1000:.0f} ms: CPU per round trip {statistics.median(values):.3f} ms (median of 6 rounds of 300; "
              f"{min(values):.3f}-{max(values):.3f})")


async def _echo(request, context):
    return request


asyncio.run(main())
