"""Does a wrong-password flood slow other tenants down? (issue 27 item 9)

One process: an embedded PostgreSQL, the app on uvicorn at 127.0.0.1, tenants A and B. Tenant B
writes memories one after another (each a REST POST that embeds its content on a worker thread);
we take the median latency alone, then while 16 connections post wrong passwords for a user of
tenant A as fast as the server answers. With Argon2id on the event loop's default thread pool (as
before issue 27), on its own pool (now: half the cores), and on a pool of another size. The
sign-in rate limits are raised out of the way for the run, so every flood request really hashes:
this is the distributed-flood case the limits cannot stop.

    PYTHONPATH=services HF_HUB_OFFLINE=1 .venv/bin/python loadtests/bench_signin_flood.py
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from html import unescape
from urllib.parse import urlencode

import httpx
import uvicorn

from loadtests.harness import embedded_app

FLOOD = 16
UNLIMITED = "1000000/minute"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _writes(http: httpx.AsyncClient, key: str, seconds: float) -> list[float]:
    out: list[float] = []
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
        t0 = time.perf_counter()
        r = await http.post(
            "/v1/namespaces/default/memories",
            json={"content": f"Benchmark note {n}: the build on Tuesday took {n % 50} minutes."},
            headers={"Authorization": f"Bearer {key}"},
        )
        out.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 201, r.text
    return out


async def _flood(base: str, form: list[tuple[str, str]], stop: asyncio.Event) -> int:
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": base}
    body = urlencode(form)
    count = 0
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        while not stop.is_set():
            r = await http.post("/oauth/authorize", content=body, headers=headers)
            assert r.status_code == 401, r.status_code
            count += 1
    return count


async def main(seconds: float) -> None:
    from memvault.oauth import secrets
    from memvault.oauth.schemas import UserIn
    from memvault.principal import Principal

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    async with embedded_app(
        "memvault-bench-signin-",
        public_url=base,
        signin_limit_per_address=UNLIMITED,
        signin_limit_per_account=UNLIMITED,
    ) as stack:
        api = stack.api
        a = await api.create_tenant("flooded")
        b = await api.create_tenant("bystander")
        await api.create_user(Principal.system(a.id), UserIn(email="ana@example.com", password="correct horse battery"))
        config = uvicorn.Config(stack.app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
        server = uvicorn.Server(config)
        serve = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:
            client = (await http.post("/oauth/register", json={"redirect_uris": ["http://127.0.0.1:9/cb"]})).json()
            page = await http.get(
                "/oauth/authorize",
                params={
                    "response_type": "code",
                    "client_id": client["client_id"],
                    "redirect_uri": "http://127.0.0.1:9/cb",
                    "code_challenge": "x" * 43,
                    "code_challenge_method": "S256",
                    "resource": f"{base}/mcp",
                },
            )
            fields = [
                (unescape(k), unescape(v))
                for k, v in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.text)
            ]
            form = [*fields, ("email", "ana@example.com"), ("password", "wrong password!")]
            await _writes(http, b.api_key, 2)  # warm up: model, pool, connections

            own_pool = secrets.hash_executor()
            other = 2 if secrets.HASH_THREADS != 2 else 1
            alternative = ThreadPoolExecutor(max_workers=other, thread_name_prefix="argon2-alt")
            rows = []
            phases = (
                ("default thread pool (before)", None),
                (f"own {secrets.HASH_THREADS}-thread pool (after)", own_pool),
                (f"own {other}-thread pool", alternative),
            )
            for label, pool in phases:
                secrets.set_hash_executor(pool)
                alone = statistics.median(await _writes(http, b.api_key, seconds))
                stop = asyncio.Event()
                flooders = [asyncio.create_task(_flood(base, form, stop)) for _ in range(FLOOD)]
                await asyncio.sleep(1)  # let the flood fill the queues
                loaded = await _writes(http, b.api_key, seconds)
                stop.set()
                attempts = sum(await asyncio.gather(*flooders))
                rows.append((label, alone, statistics.median(loaded), max(loaded), attempts))
            secrets.set_hash_executor(own_pool)
            alternative.shutdown()
        server.should_exit = True
        await serve
    head = ("Argon2id on", "B write p50 alone", "p50 in flood", "max in flood", "ratio", "flood req")
    print(f"{head[0]:30} {head[1]:>18} {head[2]:>13} {head[3]:>13} {head[4]:>6} {head[5]:>9}")
    for label, alone, loaded, worst, attempts in rows:
        print(f"{label:30} {alone:16.1f}ms {loaded:11.1f}ms {worst:11.1f}ms {loaded / alone:5.1f}x {attempts:9d}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=6.0, help="per measurement (4 measurements)")
    asyncio.run(main(parser.parse_args().seconds))
