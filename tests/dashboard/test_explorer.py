"""The memory explorer: searching as a user or session would with each hit's signal bars, one
memory with its versions, entities and graph, and archive, promote and forget, as owners,
members, viewers and other tenants meet them."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest

from memvault.api import NamespaceAPI
from memvault.entities.schemas import EntityIn, RelationIn
from memvault.errors import NotFound
from memvault.memories.schemas import MemoryIn, MemoryPatch
from memvault.namespaces.schemas import NamespaceIn
from tests.conftest import Tenant
from tests.dashboard.conftest import Browser, add_member


def _search(ns: str, query: str, **who: str) -> str:
    return "/dashboard/explorer?" + urlencode({"namespace": ns, "query": query, **who})


def _memory(ns: str, memory_id: object) -> str:
    return f"/dashboard/explorer/{ns}/memories/{memory_id}"


async def test_search_finds_a_stored_memory_and_draws_its_signals(
    signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
) -> None:
    m = await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="Ana's favourite colour is teal"))
    await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="The office opens at nine"))
    form = await signed_in.get("/dashboard/explorer")
    assert form.status_code == 200 and 'id="explorer-form"' in form.text
    for field in ("namespace", "query", "user_id", "session_id"):
        assert f'name="{field}"' in form.text
    r = await signed_in.get(_search(tenant_a.namespace, "what colour does Ana like"))
    assert r.status_code == 200 and 'id="hits"' in r.text
    first = re.search(r'<li class="hit" id="hit-([0-9a-f-]{36})"', r.text)
    assert first and first.group(1) == str(m.id)
    bars = r.text.split(f'id="breakdown-{m.id}"', 1)[1].split("</svg>", 1)[0]
    assert "bar-dense" in bars and "bar-lexical" in bars
    widths = [float(w) for w in re.findall(r'width="([0-9.]+)" height="12" class="bar-fill"', bars)]
    assert widths and max(widths) > 0
    assert f'href="{_memory(tenant_a.namespace, m.id)}?back=' in r.text


async def test_the_memory_page_shows_versions_with_the_superseded_one(
    signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
) -> None:
    p, ns = tenant_a.principal, tenant_a.namespace
    old = await api.store(p, ns, MemoryIn(content="Ana lives in Lisbon", key="home"))
    new = await api.store(p, ns, MemoryIn(content="Ana lives in Porto", key="home"))
    await api.update_memory(p, ns, new.id, MemoryPatch(importance=0.9))
    r = await signed_in.get(_memory(ns, new.id))
    assert r.status_code == 200 and 'id="memory"' in r.text and "Ana lives in Porto" in r.text
    versions = r.text.split('id="versions"', 1)[1].split("</ol>", 1)[0]
    assert f'class="version superseded" id="version-{old.id}"' in versions
    assert f'id="version-{new.id}"' in versions and "Ana lives in Lisbon" in versions
    assert "updated" in versions and "importance" in versions
    older = await signed_in.get(_memory(ns, old.id))
    assert 'id="superseded-note"' in older.text and 'id="archive"' not in older.text


async def test_the_memory_page_draws_its_entities_and_their_relations(
    signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
) -> None:
    p, ns = tenant_a.principal, tenant_a.namespace
    ana = await api.create_entity(p, ns, EntityIn(name="Ana", type="person"))
    acme = await api.create_entity(p, ns, EntityIn(name="Acme", type="organization"))
    bob = await api.create_entity(p, ns, EntityIn(name="Bob", type="person"))
    await api.create_relation(p, ns, RelationIn(source_id=ana.id, type="knows", target_id=bob.id))
    m = await api.store(p, ns, MemoryIn(content="Ana joined Acme in May", entity_ids=[ana.id, acme.id]))
    r = await signed_in.get(_memory(ns, m.id))
    graph = r.text.split('id="entity-graph"', 1)[1].split("</svg>", 1)[0]
    assert "Ana" in graph and "Acme" in graph and "Bob" in graph and "knows" in graph
    assert "node-neighbour" in graph and "edge-mention" in graph and "edge-relation" in graph


async def test_archive_promote_and_soft_forget(signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant) -> None:
    p, ns = tenant_a.principal, tenant_a.namespace
    m = await api.store(p, ns, MemoryIn(content="Ana prefers tea", state="tentative"))
    page = await signed_in.get(_memory(ns, m.id))
    assert 'id="archive"' in page.text and 'id="promote"' in page.text and 'id="forget"' in page.text
    r = await signed_in.post(f"{_memory(ns, m.id)}/promote")
    assert r.status_code == 303 and r.headers["location"] == f"{_memory(ns, m.id)}?done=promoted"
    assert (await api.get_memory(p, ns, m.id)).state == "stable"
    r = await signed_in.post(f"{_memory(ns, m.id)}/archive")
    assert r.status_code == 303 and (await api.get_memory(p, ns, m.id)).state == "archived"
    await signed_in.post(f"{_memory(ns, m.id)}/promote")
    confirm = await signed_in.get(f"{_memory(ns, m.id)}/forget")
    assert confirm.status_code == 200 and 'id="confirm-forget"' in confirm.text
    assert "Ana prefers tea" in confirm.text and str(m.id) in confirm.text
    r = await signed_in.post(f"{_memory(ns, m.id)}/forget", {"mode": "soft"})
    assert r.status_code == 303 and (await api.get_memory(p, ns, m.id)).state == "archived"


async def test_hard_forget_says_what_goes_and_erases_every_version(
    signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
) -> None:
    p, ns = tenant_a.principal, tenant_a.namespace
    old = await api.store(p, ns, MemoryIn(content="Ana's number is 555-0100", key="phone"))
    new = await api.store(p, ns, MemoryIn(content="Ana's number is 555-0199", key="phone"))
    confirm = await signed_in.get(f"{_memory(ns, new.id)}/forget")
    text = re.sub(r"\s+", " ", confirm.text)
    assert "555-0199" in text and "all 2 versions" in text and "cannot be undone" in text
    r = await signed_in.post(f"{_memory(ns, new.id)}/forget", {"mode": "hard"})
    assert r.status_code == 303 and r.headers["location"].startswith("/dashboard/explorer?")
    for gone in (old.id, new.id):
        with pytest.raises(NotFound):
            await api.get_memory(p, ns, gone)
    assert (await signed_in.get(r.headers["location"])).status_code == 200
    assert (await signed_in.get(_memory(ns, new.id))).status_code == 404


async def test_a_viewer_sees_no_buttons_and_a_post_is_refused(
    browser: Browser, api: NamespaceAPI, tenant_a: Tenant
) -> None:
    p, ns = tenant_a.principal, tenant_a.namespace
    m = await api.store(p, ns, MemoryIn(content="Ana likes jazz", state="tentative"))
    await browser.sign_in(await add_member(api, tenant_a, "viewer"))
    page = await browser.get(_memory(ns, m.id))
    assert page.status_code == 200 and "Ana likes jazz" in page.text
    for button in ('id="archive"', 'id="promote"', 'id="forget"'):
        assert button not in page.text
    for action, data in (("archive", {}), ("promote", {}), ("forget", {"mode": "hard"})):
        await browser.get(_memory(ns, m.id))  # a 403 page carries no form token: post from the memory's page
        r = await browser.post(f"{_memory(ns, m.id)}/{action}", data)
        assert r.status_code == 403, action
    confirm = await browser.get(f"{_memory(ns, m.id)}/forget")
    assert 'id="confirm-forget"' not in confirm.text
    assert (await api.get_memory(p, ns, m.id)).state == "tentative"


async def test_another_tenants_memory_is_not_found(
    browser: Browser, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    m = await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="tenant a's secret plan"))
    await browser.sign_in(await add_member(api, tenant_b, "owner"))
    for path in (_memory(tenant_a.namespace, m.id), f"{_memory(tenant_a.namespace, m.id)}/forget"):
        r = await browser.get(path)
        assert r.status_code == 404 and "secret plan" not in r.text
    await browser.get("/dashboard/explorer")
    r = await browser.post(f"{_memory(tenant_a.namespace, m.id)}/archive")
    assert r.status_code == 404
    assert (await api.get_memory(tenant_a.principal, tenant_a.namespace, m.id)).state == "stable"


async def test_a_form_without_its_token_is_refused(signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant) -> None:
    m = await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="Ana owns a cat"))
    await signed_in.get(_memory(tenant_a.namespace, m.id))
    r = await signed_in.post(f"{_memory(tenant_a.namespace, m.id)}/archive", csrf="")
    assert r.status_code == 403 and "csrf_failed" in r.text
    r = await signed_in.post(f"{_memory(tenant_a.namespace, m.id)}/forget", {"mode": "hard"}, csrf="")
    assert r.status_code == 403
    assert (await api.get_memory(tenant_a.principal, tenant_a.namespace, m.id)).state == "stable"


class TestMembers:
    async def test_a_member_cannot_search_as_another_user(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="Bea's diary", user_id="bea"))
        await browser.sign_in(await add_member(api, tenant_a, "member"))
        r = await browser.get(_search(tenant_a.namespace, "diary", user_id="bea"))
        assert r.status_code == 403 and 'id="search-error"' in r.text and "cannot act for user" in r.text
        assert 'id="explorer-form"' in r.text and "Bea's diary" not in r.text

    async def test_a_member_searches_as_themselves_and_sees_shared_memories(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        p, ns = tenant_a.principal, tenant_a.namespace
        shared = await api.store(p, ns, MemoryIn(content="The team's standup is at ten"))
        private = await api.store(p, ns, MemoryIn(content="Bea's standup notes", user_id="bea"))
        await browser.sign_in(await add_member(api, tenant_a, "member"))
        r = await browser.get(_search(ns, "standup"))
        assert r.status_code == 200 and f'id="hit-{shared.id}"' in r.text and f'id="hit-{private.id}"' not in r.text
        assert (await browser.get(_memory(ns, private.id))).status_code == 404

    async def test_an_owner_searches_as_a_named_user(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        mine = await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="Bea's diary", user_id="bea"))
        r = await signed_in.get(_search(tenant_a.namespace, "diary", user_id="bea"))
        assert r.status_code == 200 and f'id="hit-{mine.id}"' in r.text

    async def test_a_search_in_one_session_finds_only_that_sessions_memories(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        p, ns = tenant_a.principal, tenant_a.namespace
        here = await api.store(
            p, ns, MemoryIn(content="We agreed on a blue logo", user_id="bea", session_id="s1", scope="session")
        )
        there = await api.store(
            p, ns, MemoryIn(content="We agreed on a red logo", user_id="bea", session_id="s2", scope="session")
        )
        r = await signed_in.get(_search(ns, "logo colour", user_id="bea", session_id="s1"))
        assert r.status_code == 200 and f'id="hit-{here.id}"' in r.text and f'id="hit-{there.id}"' not in r.text
        assert 'name="session_id" maxlength="200" value="s1"' in r.text

    async def test_a_namespace_out_of_reach_is_refused(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await api.create_namespace(tenant_a.principal, NamespaceIn(name="hr"))
        m = await api.store(tenant_a.principal, "hr", MemoryIn(content="salaries"))
        await browser.sign_in(await add_member(api, tenant_a, "member", namespaces=[tenant_a.namespace]))
        assert (await browser.get(_memory("hr", m.id))).status_code == 403
        assert (await browser.get(_search("hr", "salaries"))).status_code == 403
        listed = await browser.get("/dashboard/explorer")
        assert 'value="hr"' not in listed.text
