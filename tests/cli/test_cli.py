"""The `memvault` command as an operator runs it: a real subprocess of the installed console script.

`memvault admin ...` runs against the session database (MEMVAULT_DATABASE_URL set to its owner URL)
and its keys are then used over the ASGI client. `memvault serve` runs on the embedded default
over real HTTP, is stopped and started again on the same data folder (the README's quick start).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from memvault.db.urls import DatabaseUrls

# Every test runs the `memvault` console script in a process of its own (imports torch each time).
pytestmark = pytest.mark.slow

MEMVAULT = Path(sys.executable).with_name("memvault")


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any MEMVAULT_ setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env.update(extra)
    return env


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, f"exit {self.code}\n{self.stderr}"
        return json.loads(self.stdout)


Admin = Callable[..., Awaitable[Run]]


@pytest.fixture
def admin(pg_urls: DatabaseUrls, tmp_path: Path) -> Admin:
    """Runs `memvault admin ...` against the session database, from an empty folder (no .env)."""
    env = clean_env(MEMVAULT_DATABASE_URL=pg_urls.owner.render_as_string(hide_password=False))

    async def run(*args: str) -> Run:
        proc = await asyncio.create_subprocess_exec(
            str(MEMVAULT),
            "admin",
            *args,
            env=env,
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
        assert proc.returncode is not None
        return Run(proc.returncode, out.decode(), err.decode())

    return run


def unique(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:10]}"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def new_tenant(admin: Admin, *extra: str) -> dict[str, Any]:
    return (await admin("create-tenant", unique("cli"), *extra)).json()


class TestCreateTenant:
    async def test_prints_an_api_key_that_works(self, admin: Admin, client: httpx.AsyncClient) -> None:
        name = unique("cli")

        created = (await admin("create-tenant", name)).json()

        assert created["name"] == name
        assert created["namespace"] == "default"
        assert re.fullmatch(r"mv_[A-Za-z0-9]{40}", created["api_key"])
        assert "shown once" in created["note"]
        r = await client.get("/v1/namespaces", headers=bearer(created["api_key"]))
        assert r.status_code == 200, r.text
        assert [ns["name"] for ns in r.json()] == ["default"]
        r = await client.post(
            "/v1/namespaces/default/memories", json={"content": "made by the CLI"}, headers=bearer(created["api_key"])
        )
        assert r.status_code == 201, r.text

    async def test_names_the_first_namespace(self, admin: Admin, client: httpx.AsyncClient) -> None:
        created = await new_tenant(admin, "--namespace", "notes")

        r = await client.get("/v1/namespaces", headers=bearer(created["api_key"]))
        assert [ns["name"] for ns in r.json()] == ["notes"]

    async def test_a_taken_name_exits_1_with_a_message(self, admin: Admin) -> None:
        name = unique("cli")
        await admin("create-tenant", name)

        again = await admin("create-tenant", name)

        assert again.code == 1
        assert again.stdout == ""
        assert f"error: tenant '{name}' already exists (tenant_exists)" in again.stderr

    async def test_an_invalid_namespace_name_is_refused(self, admin: Admin) -> None:
        name = unique("cli")

        run = await admin("create-tenant", name, "--namespace", "has spaces/and slashes")

        assert run.code == 1
        assert "Traceback" not in run.stderr
        assert "error:" in run.stderr and "validation_error" in run.stderr
        # Nothing half-made: the tenant does not exist.
        assert "(not_found)" in (await admin("list-keys", "--tenant", name)).stderr


class TestCreateKey:
    async def test_a_read_only_key_reads_but_cannot_write(self, admin: Admin, client: httpx.AsyncClient) -> None:
        tenant = await new_tenant(admin)

        created = (
            await admin(
                "create-key", "--tenant", tenant["name"], "--scopes", "read", "--namespaces", "default", "--name", "r"
            )
        ).json()

        assert created["scopes"] == ["read"]
        assert created["namespaces"] == ["default"]
        assert created["name"] == "r"
        headers = bearer(created["key"])
        r = await client.get("/v1/namespaces/default/memories", headers=headers)
        assert r.status_code == 200, r.text
        r = await client.post("/v1/namespaces/default/memories", json={"content": "nope"}, headers=headers)
        assert r.status_code == 403
        assert r.json()["code"] == "forbidden"

    async def test_default_scopes_read_and_write_but_not_admin(self, admin: Admin, client: httpx.AsyncClient) -> None:
        tenant = await new_tenant(admin)

        created = (await admin("create-key", "--tenant", tenant["name"])).json()

        assert created["scopes"] == ["read", "write"]
        assert created["namespaces"] is None
        headers = bearer(created["key"])
        r = await client.post("/v1/namespaces/default/memories", json={"content": "written"}, headers=headers)
        assert r.status_code == 201, r.text
        r = await client.get("/v1/keys", headers=headers)
        assert r.status_code == 403

    async def test_an_unknown_scope_exits_with_a_message(self, admin: Admin) -> None:
        tenant = await new_tenant(admin)

        run = await admin("create-key", "--tenant", tenant["name"], "--scopes", "superuser")

        assert run.code == 1
        assert "Traceback" not in run.stderr
        assert "error:" in run.stderr and "superuser" in run.stderr


class TestListKeys:
    async def test_lists_every_key_without_its_secret(self, admin: Admin) -> None:
        tenant = await new_tenant(admin)
        reader = (await admin("create-key", "--tenant", tenant["name"], "--scopes", "read", "--name", "reader")).json()

        run = await admin("list-keys", "--tenant", tenant["name"])

        keys = run.json()
        assert {k["id"] for k in keys} == {tenant["key_id"], reader["id"]}
        for k in keys:
            assert "key" not in k
        assert tenant["api_key"] not in run.stdout
        assert reader["key"] not in run.stdout
        listed = next(k for k in keys if k["id"] == reader["id"])
        assert listed["scopes"] == ["read"]
        assert listed["revoked_at"] is None
        assert reader["key"].startswith(listed["prefix"])

    async def test_other_tenant_sees_nothing(self, admin: Admin) -> None:
        a, b = await new_tenant(admin), await new_tenant(admin)

        keys = (await admin("list-keys", "--tenant", b["name"])).json()

        assert [k["id"] for k in keys] == [b["key_id"]]
        assert a["key_id"] not in json.dumps(keys)


class TestRevokeKey:
    async def test_a_revoked_key_gets_401(self, admin: Admin, client: httpx.AsyncClient) -> None:
        tenant = await new_tenant(admin)
        key = (await admin("create-key", "--tenant", tenant["name"])).json()
        r = await client.get("/v1/namespaces", headers=bearer(key["key"]))
        assert r.status_code == 200

        revoked = (await admin("revoke-key", "--tenant", tenant["name"], key["id"])).json()

        assert revoked["id"] == key["id"]
        assert revoked["revoked_at"] is not None
        r = await client.get("/v1/namespaces", headers=bearer(key["key"]))
        assert r.status_code == 401
        assert r.json()["code"] == "api_key_revoked"
        # The tenant's other key is untouched.
        r = await client.get("/v1/namespaces", headers=bearer(tenant["api_key"]))
        assert r.status_code == 200

    async def test_another_tenants_key_cannot_be_revoked(self, admin: Admin, client: httpx.AsyncClient) -> None:
        a, b = await new_tenant(admin), await new_tenant(admin)

        run = await admin("revoke-key", "--tenant", b["name"], a["key_id"])

        assert run.code == 1
        assert "(api_key_not_found)" in run.stderr
        r = await client.get("/v1/namespaces", headers=bearer(a["api_key"]))
        assert r.status_code == 200

    async def test_a_key_id_that_is_not_a_uuid_is_a_usage_error(self, admin: Admin) -> None:
        tenant = await new_tenant(admin)

        run = await admin("revoke-key", "--tenant", tenant["name"], "not-a-uuid")

        assert run.code == 2
        assert "Traceback" not in run.stderr
        assert "key_id" in run.stderr


class TestCreateNamespace:
    async def test_the_namespace_is_usable_at_once(self, admin: Admin, client: httpx.AsyncClient) -> None:
        tenant = await new_tenant(admin)

        created = (
            await admin("create-namespace", "--tenant", tenant["name"], "notes", "--description", "meeting notes")
        ).json()

        assert created["name"] == "notes"
        assert created["description"] == "meeting notes"
        headers = bearer(tenant["api_key"])
        r = await client.post("/v1/namespaces/notes/memories", json={"content": "standup at 9"}, headers=headers)
        assert r.status_code == 201, r.text
        r = await client.get("/v1/namespaces", headers=headers)
        assert sorted(ns["name"] for ns in r.json()) == ["default", "notes"]

    async def test_a_taken_name_exits_1(self, admin: Admin) -> None:
        tenant = await new_tenant(admin)

        run = await admin("create-namespace", "--tenant", tenant["name"], "default")

        assert run.code == 1
        assert "(namespace_exists)" in run.stderr

    async def test_an_invalid_name_exits_with_a_message(self, admin: Admin) -> None:
        tenant = await new_tenant(admin)

        run = await admin("create-namespace", "--tenant", tenant["name"], "no/slashes")

        assert run.code == 1
        assert "Traceback" not in run.stderr
        assert "error:" in run.stderr


class TestUnknownTenant:
    @pytest.mark.parametrize(
        "command",
        [
            ["create-key"],
            ["list-keys"],
            ["create-namespace", "notes"],
            ["revoke-key", "00000000-0000-0000-0000-000000000000"],
        ],
        ids=lambda c: c[0],
    )
    async def test_exits_1_naming_the_tenant(self, admin: Admin, command: list[str]) -> None:
        ghost = unique("ghost")

        run = await admin(command[0], "--tenant", ghost, *command[1:])

        assert run.code == 1
        assert run.stdout == ""
        assert f"error: no tenant named '{ghost}' (not_found)" in run.stderr
        assert "Traceback" not in run.stderr


# ---- the README's quick start, over real HTTP -----------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ServeRun:
    proc: subprocess.Popen[bytes]
    base: str
    out: Path
    err: Path

    def logs(self) -> str:
        return f"--- stdout\n{self.out.read_text()}\n--- stderr\n{self.err.read_text()[-6000:]}"


def serve(data_dir: Path, workdir: Path, tag: str) -> ServeRun:
    port = free_port()
    out, err = workdir / f"{tag}.out", workdir / f"{tag}.err"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(
            [str(MEMVAULT), "serve", "--workers", "1", "--port", str(port), "--data-dir", str(data_dir)],
            cwd=workdir,
            env=clean_env(HF_HUB_OFFLINE="1"),
            stdout=o,
            stderr=e,
            start_new_session=True,
        )
    run = ServeRun(proc, f"http://127.0.0.1:{port}", out, err)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"memvault serve exited with {proc.returncode} before answering\n{run.logs()}")
        try:
            if httpx.get(f"{run.base}/v1/status", timeout=2).status_code == 200:
                return run
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    stop(run, signal.SIGKILL)
    pytest.fail(f"memvault serve did not answer /v1/status within 90 s\n{run.logs()}")


def postmaster_pid(data_dir: Path) -> int:
    return int((data_dir / "pg" / "postmaster.pid").read_text().splitlines()[0])


def processes_using(data_dir: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if str(data_dir) in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def stop(run: ServeRun, sig: signal.Signals) -> int:
    run.proc.send_signal(sig)
    try:
        return run.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(run.proc.pid, signal.SIGKILL)
        run.proc.wait()
        pytest.fail(f"memvault serve did not exit within 60 s of {sig.name}\n{run.logs()}")


def end_all(procs: list[psutil.Process]) -> None:
    for proc in procs:
        proc.terminate()  # for the postmaster: a fast shutdown; its workers follow it
    _, alive = psutil.wait_procs(procs, timeout=10)
    for proc in alive:
        proc.kill()


def assert_everything_stopped(data_dir: Path, postmaster: int, run: ServeRun) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (psutil.pid_exists(postmaster) or processes_using(data_dir)):
        time.sleep(0.25)
    leftovers = processes_using(data_dir)
    end_all(leftovers)  # do not leak them into the rest of the session, then fail
    assert not leftovers, f"left running: {[p.info['cmdline'] for p in leftovers]}\n{run.logs()}"
    assert not psutil.pid_exists(postmaster), f"embedded PostgreSQL {postmaster} still runs\n{run.logs()}"
    assert not (data_dir / "pg" / "postmaster.pid").exists()


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data folder outside pytest's tmp_path: PostgreSQL runs as its own system user, and every
    pytest start re-permissions /tmp/pytest-of-<user>, which would lock it out mid-test when
    another pytest run starts alongside (as tests/conftest.py's pg_uri explains)."""
    folder = Path(tempfile.mkdtemp(prefix="memvault-serve-test-"))
    path = folder / "memvault-data"
    yield path
    # Whatever a failed run left behind (the postmaster runs in a session of its own).
    end_all(processes_using(path))
    shutil.rmtree(folder, ignore_errors=True)


ADMIN_KEY = re.compile(r"Admin API key \(shown once; store it now\):\n\s+(mv_[A-Za-z0-9]{40})\n")


OWNER = re.compile(r"Email +(\S+)\n +Password +(\S+)\n")


def sign_in(base: str, email: str, password: str) -> str:
    """Sign in to the dashboard as a browser would (the form's token and its cookie); the home page."""
    with httpx.Client(base_url=base, timeout=30) as web:
        form = web.get("/dashboard/signin").text
        token = re.search(r'name="csrf" value="([^"]+)"', form)
        assert token, form
        data = {"csrf": token.group(1), "email": email, "password": password, "next": "/dashboard"}
        r = web.post("/dashboard/signin", data=data, headers={"Origin": base})
        assert r.status_code == 303, r.text
        home = web.get("/dashboard")
        assert home.status_code == 200, home.text
        return home.text


@pytest.mark.slow
@pytest.mark.timeout(420)
class TestServeEndToEnd:
    """SLOW (about a minute): `memvault serve` on the embedded default, as the README's quick start
    promises. First start prints an admin key and the owner's password once (the password signs in
    to the dashboard); the key stores and finds a memory over real
    HTTP; stopping stops the embedded PostgreSQL too; a second start on the same folder keeps the
    key and the memory and prints no key."""

    def test_first_start_key_memory_and_restart(self, data_dir: Path, tmp_path: Path) -> None:
        # First start: an empty folder, so a tenant and a key are made and the key is printed once.
        first = serve(data_dir, tmp_path, "first")
        postmaster = postmaster_pid(data_dir)
        try:
            printed = first.out.read_text()
            match = ADMIN_KEY.search(printed)
            assert match, printed
            key = match.group(1)
            assert f"embedded PostgreSQL in {data_dir.resolve()}" in printed
            assert f"REST API   {first.base}/v1" in printed
            assert f"Dashboard  {first.base}/dashboard" in printed
            owner = OWNER.search(printed)
            assert owner, printed
            signed_in = sign_in(first.base, *owner.groups())
            assert "(owner)" in signed_in and "default" in signed_in
            headers = bearer(key)

            status = httpx.get(f"{first.base}/v1/status", headers=headers, timeout=10).json()
            assert status["database"] == {"ok": True, "embedded": True}
            assert status["jobs"] == "in-process"
            assert status["principal"]["namespaces"] == ["default"]
            assert status["principal"]["scopes"] == ["admin", "read", "write"]

            r = httpx.post(
                f"{first.base}/v1/namespaces/default/memories",
                json={"content": "Ana prefers window seats on long flights", "type": "preference", "user_id": "ana"},
                headers=headers,
                timeout=30,
            )
            assert r.status_code == 201, r.text
            memory_id = r.json()["id"]
            r = httpx.post(
                f"{first.base}/v1/namespaces/default/search",
                json={"query": "where does Ana like to sit on a plane?"},
                headers=headers,
                timeout=30,
            )
            assert r.status_code == 200, r.text
            assert r.json()["results"][0]["memory"]["id"] == memory_id

            # `memvault admin` beside the running server shares its embedded database ...
            beside = subprocess.run(
                [str(MEMVAULT), "admin", "list-keys", "--tenant", "default", "--data-dir", str(data_dir)],
                cwd=tmp_path,
                env=clean_env(HF_HUB_OFFLINE="1"),
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert beside.returncode == 0, beside.stderr
            assert len(json.loads(beside.stdout)) == 1
            assert key not in beside.stdout
            # ... and leaving does not stop it under the server.
            r = httpx.get(f"{first.base}/v1/namespaces/default/memories/{memory_id}", headers=headers, timeout=10)
            assert r.status_code == 200, r.text
            assert psutil.pid_exists(postmaster)
        finally:
            code = stop(first, signal.SIGTERM)
        assert_everything_stopped(data_dir, postmaster, first)
        assert code == 0, first.logs()
        assert "Traceback" not in first.err.read_text(), first.logs()

        # Second start on the same folder: no new tenant, no key printed, the old key and memory work.
        second = serve(data_dir, tmp_path, "second")
        postmaster = postmaster_pid(data_dir)
        try:
            printed = second.out.read_text()
            assert "API key" not in printed and "mv_" not in printed, printed
            assert "First start" not in printed and "Password" not in printed
            assert f"Dashboard  {second.base}/dashboard" in printed

            r = httpx.post(
                f"{second.base}/v1/namespaces/default/search",
                json={"query": "window seat on a plane"},
                headers=headers,
                timeout=30,
            )
            assert r.status_code == 200, r.text
            assert [hit["memory"]["id"] for hit in r.json()["results"]] == [memory_id]
            status = httpx.get(f"{second.base}/v1/status", headers=headers, timeout=10).json()
            assert status["principal"]["memories"] == 1
        finally:
            code = stop(second, signal.SIGINT)
        assert_everything_stopped(data_dir, postmaster, second)
        assert code == 0, second.logs()
        assert "Traceback" not in second.err.read_text(), second.logs()

    def test_a_killed_server_does_not_leave_postgres_running_forever(self, data_dir: Path, tmp_path: Path) -> None:
        # A server killed outright (OOM killer, kill -9) cannot stop the embedded PostgreSQL; the next
        # start attaches to it, and that server's clean exit must then stop it.
        crashed = serve(data_dir, tmp_path, "crashed")
        postmaster = postmaster_pid(data_dir)
        crashed.proc.kill()
        crashed.proc.wait(timeout=30)
        assert psutil.pid_exists(postmaster)

        again = serve(data_dir, tmp_path, "again")
        try:
            assert postmaster_pid(data_dir) == postmaster
        finally:
            code = stop(again, signal.SIGTERM)
        assert_everything_stopped(data_dir, postmaster, again)
        assert code == 0, again.logs()
