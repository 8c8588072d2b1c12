"""Plans are data: seeded by migration, read per tenant with overrides, refused when misspelt."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from memvault.api import NamespaceAPI
from memvault.errors import InvalidInput
from memvault.plans.limits import PlanLimits, month_bounds
from memvault.plans.quotas import MonthlyQuotaExceeded, QuotaExceeded, require_room
from tests.conftest import make_tenant

ACCOUNTS_DOC = (Path(__file__).resolve().parents[2] / "docs" / "accounts.md").read_text()


async def test_new_tenants_are_unlimited_and_the_seeded_plans_exist(api: NamespaceAPI) -> None:
    t = await make_tenant(api, "plan")
    plan = await api._plans.of(t.id)
    assert plan.name == "unlimited"
    assert plan.limits == PlanLimits()
    await api.set_tenant_plan(t.id, "free")
    free = await api._plans.of(t.id)
    assert free.name == "free"
    assert free.limits.memories == 10_000 and free.limits.concurrent_requests == 4
    for name in ("pro", "enterprise"):
        await api.set_tenant_plan(t.id, name)
        assert (await api._plans.of(t.id)).name == name


async def test_overrides_replace_single_limits_of_the_plan(api: NamespaceAPI) -> None:
    t = await make_tenant(api, "plan")
    await api.set_tenant_plan(t.id, "free", {"memories": 50, "namespaces": None})
    plan = await api._plans.of(t.id)
    assert plan.limits.memories == 50
    assert plan.limits.namespaces is None  # null: unlimited for this tenant alone
    assert plan.limits.members == 3  # the plan's own
    assert plan.overrides == {"memories": 50, "namespaces": None}


async def test_operator_plans_are_data_and_misspelt_limits_are_refused(api: NamespaceAPI) -> None:
    await api.save_plan("tiny-test", PlanLimits(memories=2), "two memories")
    t = await make_tenant(api, "plan")
    await api.set_tenant_plan(t.id, "tiny-test")
    assert (await api._plans.of(t.id)).limits.memories == 2
    with pytest.raises(InvalidInput):
        await api.set_tenant_plan(t.id, "no-such-plan")
    with pytest.raises(ValueError, match="memorys"):
        await api.set_tenant_plan(t.id, "free", {"memorys": 5})
    with pytest.raises(ValueError, match="whole number"):
        PlanLimits.parse({"memories": -1})
    with pytest.raises(InvalidInput):
        await api.create_tenant("plan-x", plan="gold")


def test_quota_checks_say_which_quota_its_limit_and_use() -> None:
    limits = PlanLimits(memories=10, events_per_month=100)
    require_room(limits, "memories", used=9, adding=1)
    with pytest.raises(QuotaExceeded) as exc:
        require_room(limits, "memories", used=9, adding=2)
    body = exc.value.problem()
    assert (body["status"], body["code"], body["quota"], body["limit"], body["used"]) == (
        403,
        "quota_exceeded",
        "memories",
        10,
        9,
    )
    require_room(limits, "namespaces", used=10**9)  # unlimited
    monthly = MonthlyQuotaExceeded("events_per_month", limit=100, used=100)
    assert monthly.status == 429 and monthly.retry_after_s > 0
    assert monthly.problem()["resets_at"] == month_bounds()[1].isoformat()


def test_month_bounds_cross_the_year() -> None:
    start, end = month_bounds(datetime(2026, 12, 31, 23, 59, tzinfo=UTC))
    assert start == datetime(2026, 12, 1, tzinfo=UTC) and end == datetime(2027, 1, 1, tzinfo=UTC)


async def test_the_plan_table_in_docs_is_what_the_database_holds(api: NamespaceAPI) -> None:
    """docs/accounts.md's table of the seeded plans, read back against the plans table."""
    table = ACCOUNTS_DOC.split("## Plans\n", 1)[1].split("\n\n")[1].splitlines()
    names = [c.strip(" `") for c in table[0].split("|")[2:-1]]
    stored = {name: limits.as_dict() for name, _, limits in await api.list_plans()}

    def shown(value: int | None, limit: str) -> str:
        if value is None:
            return "—"
        return f"{value // (1024 * 1024):,} MB" if limit.endswith("_bytes") else f"{value:,}"

    for row in table[2:]:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        limit = cells[0].strip("`")
        for plan, cell in zip(names, cells[1:], strict=True):
            assert cell == shown(stored[plan].get(limit), limit), (plan, limit)
    assert {r.split("|")[1].strip(" `") for r in table[2:]} == set(PlanLimits.names())
