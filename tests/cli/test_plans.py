"""The operator's plan commands and key expiry/rotation from the CLI, run as real subprocesses of
the `memvault` console script against the session database; what they set is then seen over HTTP."""

from __future__ import annotations

import httpx
import pytest

from memvault.plans.limits import PlanLimits
from tests.cli import test_cli
from tests.cli.test_cli import Admin, bearer, new_tenant, unique

admin = test_cli.admin  # the fixture that runs `memvault admin ...`, shared with test_cli.py

pytestmark = pytest.mark.slow


def plans_by_name(listed: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {p["name"]: p for p in listed}  # type: ignore[misc]


class TestCreatePlan:
    async def test_from_a_plan_with_limits_then_a_tenant_on_it(self, admin: Admin, client: httpx.AsyncClient) -> None:
        name = unique("team")

        made = (
            await admin(
                "create-plan",
                name,
                "--from",
                "free",
                "--limit",
                "api_keys=2",
                "--limit",
                "memories=unlimited",
                "--description",
                "for small teams",
            )
        ).json()

        assert made["description"] == "for small teams"
        assert made["limits"]["api_keys"] == 2 and made["limits"]["memories"] is None
        assert made["limits"]["namespaces"] == 3  # kept from free
        listed = plans_by_name((await admin("list-plans")).json())
        assert listed[name]["limits"] == made["limits"]
        assert set(listed) >= {"free", "pro", "enterprise", "unlimited", name}
        assert set(listed["free"]["limits"]) == set(PlanLimits.names())  # type: ignore[arg-type]

        tenant = await new_tenant(admin, "--plan", name)
        assert tenant["plan"] == name
        headers = bearer(tenant["api_key"])
        assert (await client.post("/v1/keys", json={"scopes": ["read"]}, headers=headers)).status_code == 201
        r = await client.post("/v1/keys", json={"scopes": ["read"]}, headers=headers)
        assert (r.status_code, r.json()["code"], r.json()["limit"]) == (403, "quota_exceeded", 2)

    async def test_an_existing_plan_is_replaced_only_when_asked(self, admin: Admin) -> None:
        name = unique("tier")
        await admin("create-plan", name, "--limit", "members=3")

        again = await admin("create-plan", name, "--limit", "members=9")
        replaced = await admin("create-plan", name, "--limit", "members=9", "--replace")

        assert again.code == 1 and "--replace" in again.stderr and "Traceback" not in again.stderr
        assert replaced.json()["limits"]["members"] == 9

    @pytest.mark.parametrize(
        ("limit", "says"),
        [
            ("memorys=5", "unknown"),
            ("memories=-1", "whole number"),
            ("memories=lots", "whole number"),
            ("memories", "NAME=NUMBER"),
        ],
        ids=["misspelt", "negative", "not-a-number", "no-value"],
    )
    async def test_a_bad_limit_exits_2_and_creates_nothing(self, admin: Admin, limit: str, says: str) -> None:
        name = unique("bad")

        run = await admin("create-plan", name, "--limit", limit)

        assert run.code == 2, run.stderr
        assert run.stderr.startswith("error:") and says in run.stderr and "Traceback" not in run.stderr
        assert name not in plans_by_name((await admin("list-plans")).json())


class TestSetPlan:
    async def test_plan_with_overrides_then_cleared(self, admin: Admin, client: httpx.AsyncClient) -> None:
        tenant = await new_tenant(admin)

        on_free = (await admin("set-plan", "--tenant", tenant["name"], "free", "--override", "api_keys=1")).json()
        r = await client.post("/v1/keys", json={"scopes": ["read"]}, headers=bearer(tenant["api_key"]))
        cleared = (await admin("set-plan", "--tenant", tenant["name"], "free", "--clear-overrides")).json()

        assert (on_free["plan"], on_free["overrides"], on_free["limits"]["api_keys"]) == ("free", {"api_keys": 1}, 1)
        assert (r.status_code, r.json()["code"], r.json()["used"]) == (403, "quota_exceeded", 1)
        assert (cleared["overrides"], cleared["limits"]["api_keys"]) == ({}, 5)

    async def test_bad_input_is_refused_with_a_message(self, admin: Admin) -> None:
        tenant = await new_tenant(admin)

        unknown_plan = await admin("set-plan", "--tenant", tenant["name"], "no-such-plan")
        bad_override = await admin("set-plan", "--tenant", tenant["name"], "free", "--override", "api_keys=many")
        both = await admin(
            "set-plan", "--tenant", tenant["name"], "free", "--override", "api_keys=1", "--clear-overrides"
        )

        assert unknown_plan.code == 1 and "no plan named 'no-such-plan'" in unknown_plan.stderr
        assert bad_override.code == 2 and "whole number" in bad_override.stderr
        assert both.code == 2 and "not both" in both.stderr
        for run in (unknown_plan, bad_override, both):
            assert "Traceback" not in run.stderr


class TestKeysFromTheCli:
    async def test_expiring_key_and_rotation(self, admin: Admin, client: httpx.AsyncClient) -> None:
        tenant = await new_tenant(admin)
        made = (await admin("create-key", "--tenant", tenant["name"], "--expires-in-days", "3")).json()

        rotated = (await admin("rotate-key", "--tenant", tenant["name"], "--grace-seconds", "0", made["id"])).json()

        assert made["expires_at"] is not None and rotated["expires_at"] == made["expires_at"]
        assert rotated["id"] == made["id"] and rotated["previous_prefix"] == made["prefix"]
        assert (await client.get("/v1/namespaces", headers=bearer(rotated["key"]))).status_code == 200
        r = await client.get("/v1/namespaces", headers=bearer(made["key"]))
        assert (r.status_code, r.json()["code"]) == (401, "api_key_rotated")
        listed = (await admin("list-keys", "--tenant", tenant["name"])).json()
        assert {k["prefix"] for k in listed} == {tenant["api_key"][:15], rotated["prefix"]}
