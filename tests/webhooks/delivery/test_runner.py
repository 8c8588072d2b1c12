"""The sender against a real receiver on loopback: signed, retried, never lost, bounded, fair."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import psycopg

from memvault.config import Settings
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls
from memvault.webhooks.delivery import repository
from memvault.webhooks.delivery.runner import DeliveryRunner
from tests.conftest import Tenant
from tests.servers import free_port
from tests.webhooks.delivery.conftest import (
    Receiver,
    add_deliveries,
    add_endpoint,
    delivery,
    endpoint,
    new_secret,
    receiving,
    sending,
    until,
)

Conn = psycopg.AsyncConnection[Any]


class TestSigned:
    async def test_every_signature_verifies_and_the_body_is_the_payload(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        receiver = Receiver(new_secret())
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, f"{base}/hook", receiver.secret)
            ids = await add_deliveries(owner, tenant_a.id, ep, 3)
            async with sending(pg_urls, sender_settings):
                await until(lambda: _count(receiver, 3))
                # Received is not yet recorded: the sender writes the answer down after it.
                await until(lambda: _recorded(owner, ids))
        assert sorted(p["id"] for p in receiver.received) == sorted(ids)
        assert {p["data"]["text"] for p in receiver.received} == {"café ✓"}
        for message_id in ids:
            row = await delivery(owner, message_id)
            assert (row["status"], row["attempts"], row["response_status"]) == ("succeeded", 1, 200)

    async def test_during_a_rotation_both_secrets_sign(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        old = new_secret()
        receiver = Receiver(old)  # a receiver not yet told the new secret still verifies
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, new_secret(), previous=old)
            await add_deliveries(owner, tenant_a.id, ep)
            async with sending(pg_urls, sender_settings):
                await until(lambda: _count(receiver, 1))
        assert len(receiver.requests[0][1]["webhook-signature"].split(" ")) == 2


class TestRetries:
    async def test_failing_twice_then_succeeding_delivers_exactly_once(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        receiver = Receiver(new_secret(), answers=[(500, b"no", {}), (503, b"later", {}), (200, b"ok", {})])
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            [message_id] = await add_deliveries(owner, tenant_a.id, ep)
            async with sending(pg_urls, sender_settings):
                await until(lambda: _count(receiver, 1))
                await until(lambda: _recorded(owner, [message_id]))
                await asyncio.sleep(0.3)  # no further attempt comes
        assert len(receiver.received) == 1 and len(receiver.requests) == 3
        assert {h["webhook-id"] for _, h in receiver.requests} == {message_id}
        row = await delivery(owner, message_id)
        assert (row["status"], row["attempts"], row["response_status"]) == ("succeeded", 3, 200)
        assert (await endpoint(owner, ep))["failing_since"] is None

    async def test_a_receiver_down_for_a_while_gets_it_once_up(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        port = free_port()
        receiver = Receiver(new_secret())
        ep = await add_endpoint(owner, tenant_a.id, f"http://127.0.0.1:{port}/in", receiver.secret)
        [message_id] = await add_deliveries(owner, tenant_a.id, ep)
        async with sending(pg_urls, sender_settings, backoff=(0.2,) * 6):
            await until(lambda: _attempts_at_least(owner, message_id, 2))
            assert (await endpoint(owner, ep))["failing_since"] is not None
            async with receiving(receiver, port):
                await until(lambda: _count(receiver, 1))
                await until(lambda: _recorded(owner, [message_id]))
        assert (await delivery(owner, message_id))["status"] == "succeeded"

    async def test_after_the_last_retry_it_is_failed(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        receiver = Receiver(new_secret(), answers=[(500, b"", {})])
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            [message_id] = await add_deliveries(owner, tenant_a.id, ep)
            async with sending(pg_urls, sender_settings, backoff=(0.01, 0.01)):
                await until(lambda: _status(owner, message_id, "failed"))
        assert len(receiver.requests) == 3

    async def test_three_days_failing_disables_the_endpoint(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        receiver = Receiver(new_secret(), answers=[(500, b"", {})])
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            watcher = await _watcher(owner, tenant_a.id)
            await owner.execute(
                "UPDATE webhook_endpoints SET failing_since = now() - interval '3 days 1 minute' WHERE id = %s", (ep,)
            )
            [message_id] = await add_deliveries(owner, tenant_a.id, ep)
            async with sending(pg_urls, sender_settings, backoff=(30,)):
                await until(lambda: _attempts_at_least(owner, message_id, 1))
                await asyncio.sleep(0.2)
        assert (await endpoint(owner, ep))["disabled_reason"] == "failing"
        assert (await delivery(owner, message_id))["status"] == "pending"  # enable or replay resumes it
        await _told_of_disabling(owner, tenant_a.id, ep, watcher, "failing")


class TestNeverLost:
    async def test_committed_with_no_sender_running_is_sent_when_one_starts(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        receiver = Receiver(new_secret())
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            [message_id] = await add_deliveries(owner, tenant_a.id, ep)  # committed; the process "crashed"
            await asyncio.sleep(0.2)
            assert receiver.requests == []
            async with sending(pg_urls, sender_settings):
                await until(lambda: _count(receiver, 1))
                await until(lambda: _recorded(owner, [message_id]))
        assert receiver.received[0]["id"] == message_id

    async def test_a_sender_that_died_mid_attempt_leaves_it_to_the_next(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        receiver = Receiver(new_secret())
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            [message_id] = await add_deliveries(owner, tenant_a.id, ep)
            db = Database(pg_urls, pool_size=1)
            try:  # a sender claims it, then dies before recording anything
                cur = await owner.execute("SELECT id FROM webhook_deliveries WHERE message_id = %s", (message_id,))
                [(delivery_id,)] = await cur.fetchall()
                async with db.tenant_tx(tenant_a.id) as tx:
                    [claimed] = await repository.claim(tx.session, tenant_a.id, [delivery_id], lease_s=0.5)
            finally:
                await db.dispose()
            async with sending(pg_urls, sender_settings):
                await asyncio.sleep(0.2)
                assert receiver.requests == []  # leased: nobody else sends it meanwhile
                await until(lambda: _count(receiver, 1))
                await until(lambda: _recorded(owner, [message_id]))
        row = await delivery(owner, message_id)
        assert (row["status"], row["attempts"]) == ("succeeded", claimed.attempts + 1)


class TestSafety:
    async def test_a_private_address_is_refused_unless_allowed(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, settings: Settings
    ) -> None:
        receiver = Receiver(new_secret())
        strict = settings.model_copy(update={"webhook_allow_private": False, "webhook_sweep_interval_s": 0.05})
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            [message_id] = await add_deliveries(owner, tenant_a.id, ep)
            async with sending(pg_urls, strict, backoff=(30,)):
                await until(lambda: _attempts_at_least(owner, message_id, 1))
                await asyncio.sleep(0.1)
        assert receiver.requests == []
        assert (await delivery(owner, message_id))["error"].startswith("refused: plain http")

    async def test_410_disables_the_endpoint_at_once(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        receiver = Receiver(new_secret(), answers=[(410, b"gone", {})], delay_s=0.2)
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            watcher = await _watcher(owner, tenant_a.id)
            sender_settings = sender_settings.model_copy(update={"webhook_tenant_concurrency": 1})
            first, second = await add_deliveries(owner, tenant_a.id, ep, 2)
            async with sending(pg_urls, sender_settings):
                await until(lambda: _endpoint_disabled(owner, ep))
                await asyncio.sleep(0.3)
        assert (await endpoint(owner, ep))["disabled_reason"] == "gone"
        assert len(receiver.requests) == 1
        await _told_of_disabling(owner, tenant_a.id, ep, watcher, "gone")
        rows = [await delivery(owner, m) for m in (first, second)]
        assert sorted(r["status"] for r in rows) == ["failed", "pending"]

    async def test_redirects_are_not_followed(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        receiver = Receiver(new_secret())
        async with receiving(receiver) as base:
            receiver.answers = [(307, b"", {"location": f"{base}/elsewhere"}), (200, b"ok", {})]
            ep = await add_endpoint(owner, tenant_a.id, f"{base}/in", receiver.secret)
            [message_id] = await add_deliveries(owner, tenant_a.id, ep)
            async with sending(pg_urls, sender_settings, backoff=(30,)):
                await until(lambda: _attempts_at_least(owner, message_id, 1))
                await asyncio.sleep(0.2)
        assert [path for path, _ in receiver.requests] == ["/in"]
        row = await delivery(owner, message_id)
        assert (row["status"], row["response_status"]) == ("pending", 307)

    async def test_the_response_excerpt_is_bounded(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        receiver = Receiver(new_secret(), answers=[(200, b"x" * 5_000_000, {})])
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            [message_id] = await add_deliveries(owner, tenant_a.id, ep)
            async with sending(pg_urls, sender_settings):
                await until(lambda: _status(owner, message_id, "succeeded"))
        assert (await delivery(owner, message_id))["response_excerpt"] == "x" * 1024

    async def test_an_answer_with_a_nul_byte_is_recorded(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        receiver = Receiver(new_secret(), answers=[(200, b"ok\x00\xffdone", {})])
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            [message_id] = await add_deliveries(owner, tenant_a.id, ep)
            async with sending(pg_urls, sender_settings):
                await until(lambda: _status(owner, message_id, "succeeded"))
        assert (await delivery(owner, message_id))["response_excerpt"] == "ok\ufffd\ufffddone"


class TestFairness:
    async def test_one_tenants_slow_backlog_does_not_delay_another(
        self, owner: Conn, tenant_a: Tenant, tenant_b: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        slow = Receiver(new_secret(), delay_s=1.0)
        fast = Receiver(new_secret())
        async with receiving(slow) as slow_base, receiving(fast) as fast_base:
            ep_a = await add_endpoint(owner, tenant_a.id, slow_base, slow.secret)
            ep_b = await add_endpoint(owner, tenant_b.id, fast_base, fast.secret)
            await add_deliveries(owner, tenant_a.id, ep_a, 10_000)
            async with sending(pg_urls, sender_settings):
                await until(lambda: _requests_at_least(slow, 2))
                began = time.monotonic()
                [message_id] = await add_deliveries(owner, tenant_b.id, ep_b)
                await until(lambda: _count(fast, 1), timeout_s=5)
                waited = time.monotonic() - began
            await owner.execute("DELETE FROM webhook_deliveries WHERE tenant_id = %s", (tenant_a.id,))
        assert fast.received[0]["id"] == message_id
        assert waited < 1.0, waited  # one sweep, not behind tenant a's 10,000
        assert slow.most_in_flight <= sender_settings.webhook_tenant_concurrency


class _Counting(DeliveryRunner):
    sweeps = 0

    async def sweep(self) -> int:
        started = await super().sweep()
        self.sweeps += 1
        return started


class TestStopping:
    async def test_a_cancel_that_meets_a_wake_up_still_stops_the_sender(
        self, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        """Cancelled in the loop turn its wake-up came in (an attempt ended, a NOTIFY arrived), the
        sender stops. It waited with asyncio.wait_for, which on Python 3.11 returns the wake-up and
        drops the cancel (CPython gh-86296): the sender swept on, a shutdown of `memvault serve`
        never ended, and a CI run waited 300 s for it."""
        db = Database(pg_urls, pool_size=2)
        runner = _Counting(db, sender_settings.model_copy(update={"webhook_sweep_interval_s": 60}))
        task = asyncio.create_task(runner.run())
        try:
            await until(lambda: _swept(runner))  # and parked: it waits from the step that swept
            runner.nudge()
            await asyncio.sleep(0)  # the wake-up is taken; the sender has not run since
            task.cancel()
            await asyncio.wait({task}, timeout=10)  # it waits, and cancels nothing itself
            assert task.cancelled(), f"the sender went on sweeping ({runner.sweeps} sweeps)"
        finally:
            while not task.done():  # the old sender takes only a cancel that meets no wake-up
                task.cancel()
                await asyncio.sleep(0.01)
            await db.dispose()

    async def test_a_stop_lets_the_attempt_in_flight_end_and_records_it(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        """Stopped (a deploy, a scale-down) while a receiver is answering, the sender waits for
        the answer and writes it down: the receiver is not sent the message again when the lease
        ends, and the delivery log says what happened."""
        receiver = Receiver(new_secret(), delay_s=0.5)
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            [message_id] = await add_deliveries(owner, tenant_a.id, ep)
            async with sending(pg_urls, sender_settings):
                await until(lambda: _requests_at_least(receiver, 1))  # the receiver is answering
        row = await delivery(owner, message_id)
        assert (row["status"], row["attempts"], row["response_status"]) == ("succeeded", 1, 200)
        assert len(receiver.received) == 1

    async def test_a_stop_waits_no_longer_than_an_attempt_may_take(
        self, owner: Conn, tenant_a: Tenant, pg_urls: DatabaseUrls, sender_settings: Settings
    ) -> None:
        """A receiver that does not answer holds the stop for the attempt's timeout at most; the
        attempt is recorded as timed out and retried later, as any other."""
        receiver = Receiver(new_secret(), delay_s=3)
        quick = sender_settings.model_copy(update={"webhook_timeout_s": 0.5})
        async with receiving(receiver) as base:
            ep = await add_endpoint(owner, tenant_a.id, base, receiver.secret)
            [message_id] = await add_deliveries(owner, tenant_a.id, ep)
            async with sending(pg_urls, quick, backoff=(60,)):
                await until(lambda: _requests_at_least(receiver, 1))
                stopping = time.monotonic()
            stopped_in = time.monotonic() - stopping
            row = await delivery(owner, message_id)
        assert stopped_in < 5, stopped_in
        assert (row["status"], row["attempts"]) == ("pending", 1)
        assert "timed out" in row["error"]


async def _swept(runner: _Counting) -> bool:
    return runner.sweeps >= 1


async def _watcher(owner: Conn, tenant_id: uuid.UUID) -> uuid.UUID:
    """Another endpoint of the tenant, subscribed to `webhook.disabled` alone."""
    return await add_endpoint(
        owner, tenant_id, "https://hooks.example.com/watch", new_secret(), events=("webhook.disabled",)
    )


async def _told_of_disabling(owner: Conn, tenant_id: uuid.UUID, ep: uuid.UUID, watcher: uuid.UUID, reason: str) -> None:
    """The audit log names the disabling, and the tenant's endpoints that asked for
    `webhook.disabled` were sent it (the disabled one not)."""
    cur = await owner.execute(
        "SELECT actor, detail FROM audit_log WHERE tenant_id = %s AND action = 'webhook.disable' AND target_id = %s",
        (tenant_id, str(ep)),
    )
    [(actor, detail)] = await cur.fetchall()
    assert actor == "system:webhook-sender" and detail["reason"] == reason
    cur = await owner.execute(
        "SELECT endpoint_id, payload FROM webhook_deliveries WHERE tenant_id = %s AND event_type = 'webhook.disabled'",
        (tenant_id,),
    )
    rows = await cur.fetchall()
    assert [r[0] for r in rows] == [watcher]
    assert rows[0][1]["data"]["endpoint_id"] == str(ep) and rows[0][1]["data"]["reason"] == reason


async def _recorded(owner: Conn, message_ids: list[str]) -> bool:
    rows = [await delivery(owner, m) for m in message_ids]
    return all(row["status"] != "pending" for row in rows)


async def _count(receiver: Receiver, n: int) -> bool:
    return len(receiver.received) >= n


async def _requests_at_least(receiver: Receiver, n: int) -> bool:
    return len(receiver.requests) >= n


async def _attempts_at_least(owner: Conn, message_id: str, n: int) -> bool:
    row = await delivery(owner, message_id)
    recorded = row["error"] is not None or row["response_status"] is not None
    return int(row["attempts"]) >= n and recorded


async def _status(owner: Conn, message_id: str, status: str) -> bool:
    return (await delivery(owner, message_id))["status"] == status


async def _endpoint_disabled(owner: Conn, endpoint_id: Any) -> bool:
    return not (await endpoint(owner, endpoint_id))["enabled"]
