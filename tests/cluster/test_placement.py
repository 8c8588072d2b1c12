"""Moving one tenant onto shards of its own, on another worker, while it writes: no request fails,
nothing is lost, and the tenant's shard covers it alone on the node named."""

from __future__ import annotations

import asyncio

import httpx
import psycopg

from memvault.cli import main
from memvault.cluster import local, placement, repository
from tests.conftest import Tenant
from tests.memories.test_router import MEMORIES, get, store


def where_is(cluster: local.Cluster, tenant: Tenant) -> tuple[int, tuple[str, int]]:
    with psycopg.connect(cluster.uri(), autocommit=True) as conn:
        shard = repository.tenant_shard(conn, str(tenant.id))
        return shard, repository.placement(conn, shard)


async def test_a_tenant_moves_to_a_node_of_its_own_while_it_writes(
    citus_cluster: local.Cluster, citus_client: httpx.AsyncClient, citus_a: Tenant
) -> None:
    before = [await store(citus_client, citus_a, f"Ana's note {i} before the move") for i in range(5)]
    _, source = where_is(citus_cluster, citus_a)
    target = next(("127.0.0.1", w.port) for w in citus_cluster.workers if w.port != source[1])
    answers: list[httpx.Response] = []
    stop = asyncio.Event()

    async def keep_writing() -> None:
        i = 0
        while not stop.is_set():
            body = {"content": f"Ana's note {i} during the move"}
            answers.append(await citus_client.post(MEMORIES, json=body, headers=citus_a.headers))
            i += 1

    def isolate() -> placement.Placement:
        with psycopg.connect(citus_cluster.uri(), autocommit=True) as conn:
            return placement.isolate_tenant(conn, str(citus_a.id), target)

    writer = asyncio.create_task(keep_writing())
    await asyncio.sleep(0.2)
    done = await asyncio.to_thread(isolate)
    await asyncio.sleep(0.2)
    stop.set()
    await writer

    assert done.isolated and done.moved and (done.host, done.port) == target
    shard, now = where_is(citus_cluster, citus_a)
    assert (shard, now) == (done.shard, target)
    with psycopg.connect(citus_cluster.uri(), autocommit=True) as conn:
        assert repository.shard_is_isolated(conn, shard)
    assert len(answers) >= 3, "the writes did not overlap the move"
    assert [r.status_code for r in answers] == [201] * len(answers), [r.text for r in answers if r.status_code != 201]
    for m in [*before, *(r.json() for r in answers)]:
        assert (await get(citus_client, citus_a, m["id"])).status_code == 200


async def test_the_command_again_leaves_it_where_it_is(
    citus_cluster: local.Cluster, citus_client: httpx.AsyncClient, citus_b: Tenant, capsys: object
) -> None:
    await store(citus_client, citus_b, "Tomas plays the cello")
    args = ["cluster", "isolate-tenant", "--tenant", citus_b.name, "--data-dir", str(citus_cluster.data_dir)]
    assert main(args) == 0
    first = where_is(citus_cluster, citus_b)
    assert main(args) == 0
    assert where_is(citus_cluster, citus_b) == first
    assert main([*args[:3], "no-such-tenant", *args[4:]]) == 1
