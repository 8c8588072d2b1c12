"""The bootstrap owner: the first start of an empty database prints, once, beside the admin key, an
owner's email and password that sign in to the dashboard; and the operator's ways back in when the
printed password is lost (`memvault admin set-password`, or `create-user --role owner`)."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, pool, text
from sqlalchemy.engine import make_url

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.cli import banner
from memvault.config import Settings
from memvault.db import migrate
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls, resolve
from memvault.embeddings.local import LocalEmbedder
from memvault.members.rules import OwnerRequired
from memvault.oauth.errors import UserNotFound, WeakPassword
from memvault.operator import bootstrap
from tests.cli.test_cli import MEMVAULT, clean_env
from tests.conftest import Tenant, running
from tests.dashboard.conftest import ORIGIN, PASSWORD, Browser, add_member

OWNER = re.compile(r"Email +(\S+)\n +Password +(\S+)\n")
NEW_PASSWORD = "a new password for the owner"


@pytest.fixture(scope="module")
def empty_db(pg_uri: str) -> DatabaseUrls:
    """A database of its own on the session's PostgreSQL, migrated and without a tenant: a fresh
    server's first start."""
    return migrated_empty_database(pg_uri)


def migrated_empty_database(pg_uri: str) -> DatabaseUrls:
    name = f"bootstrap_{uuid.uuid4().hex[:8]}"
    admin = create_engine(make_url(pg_uri).set(drivername="postgresql+psycopg"), poolclass=pool.NullPool)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    urls = resolve(
        make_url(pg_uri).set(database=name).render_as_string(hide_password=False), None, "memvault_app", embedded=True
    )
    migrate.upgrade(urls.owner, "memvault_app", allow_login=True)
    return urls


@pytest.fixture
async def fresh_browser(
    settings: Settings, empty_db: DatabaseUrls, embedder: LocalEmbedder
) -> AsyncIterator[tuple[Settings, Browser]]:
    own = settings.model_copy(
        update={"database_url": empty_db.owner.render_as_string(hide_password=False), "public_url": ORIGIN}
    )
    app = create_app(own, urls=empty_db, embedder=embedder)
    transport = httpx.ASGITransport(app=app)
    async with running(app), httpx.AsyncClient(transport=transport, base_url=ORIGIN) as http:
        yield own, Browser(http)


async def test_first_start_prints_an_owner_who_signs_in_once(
    fresh_browser: tuple[Settings, Browser], empty_db: DatabaseUrls
) -> None:
    own, browser = fresh_browser
    db = Database(empty_db, pool_size=1)
    try:
        first = await bootstrap(db, own)
        second = await bootstrap(db, own)
    finally:
        await db.dispose()
    assert first is not None and second is None

    printed = banner(own, "here", 1, first)
    assert f"Dashboard  {ORIGIN}/dashboard\n" in printed and first.tenant.api_key in printed
    match = OWNER.search(printed)
    assert match, printed
    email, password = match.groups()
    assert email == "owner@memvault.local" and len(password) >= 20
    assert f"memvault admin set-password --tenant default --email {email}" in printed

    # A second start prints where the dashboard is, and no secret.
    again = banner(own, "here", 1, second)
    assert f"Dashboard  {ORIGIN}/dashboard" in again
    assert password not in again and "Password" not in again and "mv_" not in again

    await browser.sign_in(email, password)
    home = await browser.get("/dashboard")
    assert home.status_code == 200 and "default" in home.text and "(owner)" in home.text
    r = await browser.http.get("/v1/members", headers={"Authorization": f"Bearer {first.tenant.api_key}"})
    [owner] = r.json()["data"]
    assert owner["email"] == email and owner["role"] == "owner" and owner["email_verified_at"] is not None


async def test_replicas_starting_at_once_on_an_empty_database_make_one_first_tenant(
    settings: Settings, pg_uri: str
) -> None:
    urls = migrated_empty_database(pg_uri)
    own = settings.model_copy(update={"database_url": urls.owner.render_as_string(hide_password=False)})
    dbs = [Database(urls, pool_size=1) for _ in range(3)]
    try:
        started = await asyncio.gather(*(bootstrap(db, own) for db in dbs))
    finally:
        for db in dbs:
            await db.dispose()
    made = [b for b in started if b is not None]
    assert len(made) == 1, started  # one banner with a key and a password; the others print none
    assert made[0].tenant.name == own.bootstrap_tenant


class TestSetPassword:
    async def test_the_new_password_signs_in_and_the_old_sessions_end(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant, owner_of_a: str
    ) -> None:
        await browser.sign_in(owner_of_a)
        out = await api.set_user_password(tenant_a.principal, owner_of_a.upper(), NEW_PASSWORD)
        assert out.email == owner_of_a and out.role == "owner"
        assert (await browser.get("/dashboard")).status_code == 303
        await browser.get("/dashboard/signin")
        r = await browser.post("/dashboard/signin", {"email": owner_of_a, "password": PASSWORD})
        assert r.status_code == 401
        await browser.sign_in(owner_of_a, NEW_PASSWORD)

    async def test_only_an_owner_sets_an_owners_password(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant, owner_of_a: str
    ) -> None:
        await browser.sign_in(await add_member(api, tenant_a, "admin"))
        admin = (await api.web_session(browser.http.cookies["mv_session"])).principal
        with pytest.raises(OwnerRequired):
            await api.set_user_password(admin, owner_of_a, NEW_PASSWORD)
        with pytest.raises(WeakPassword):
            await api.set_user_password(tenant_a.principal, owner_of_a, "short")

    async def test_another_tenants_user_is_not_found(
        self, api: NamespaceAPI, tenant_b: Tenant, owner_of_a: str
    ) -> None:
        with pytest.raises(UserNotFound):
            await api.set_user_password(tenant_b.principal, owner_of_a, NEW_PASSWORD)


@pytest.mark.slow  # runs the `memvault` console script
async def test_the_cli_makes_another_owner_and_sets_a_password(
    pg_urls: DatabaseUrls, tenant_a: Tenant, tmp_path: Path, browser: Browser
) -> None:
    env = clean_env(MEMVAULT_DATABASE_URL=pg_urls.owner.render_as_string(hide_password=False), HF_HUB_OFFLINE="1")

    async def admin(*args: str, stdin: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            str(MEMVAULT), "admin", *args, env=env, cwd=tmp_path,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout=120)
        return proc.returncode or 0, out.decode(), err.decode()

    address = f"second-owner-{uuid.uuid4().hex[:8]}@example.com"
    code, out, err = await admin(
        "create-user", "--tenant", tenant_a.name, "--email", address, "--role", "owner", stdin=PASSWORD + "\n"
    )
    assert code == 0, err
    assert json.loads(out)["role"] == "owner"
    code, out, err = await admin("set-password", "--tenant", tenant_a.name, "--email", address, stdin=NEW_PASSWORD)
    assert code == 0, err
    assert json.loads(out)["email"] == address and NEW_PASSWORD not in out
    await browser.sign_in(address, NEW_PASSWORD)
    assert "(owner)" in (await browser.get("/dashboard")).text
    code, _, err = await admin(
        "set-password", "--tenant", tenant_a.name, "--email", "nobody@example.com", stdin=NEW_PASSWORD
    )
    assert code == 1 and "not_found" in err
