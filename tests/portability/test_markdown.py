"""The Markdown mirror (`memvault export --markdown DIR`): one file per current memory with front
matter a YAML reader parses back, the same bytes on a second run, forgotten or replaced memories'
files removed, files it did not write left alone, and only the tenant's own memories."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from memvault.api import NamespaceAPI
from memvault.db.urls import DatabaseUrls
from memvault.memories.schemas import MemoryIn
from memvault.namespaces.schemas import NamespaceIn
from memvault.portability.markdown import MANIFEST, Mirror
from memvault.principal import Principal
from tests.conftest import Tenant
from tests.mcp.test_stdio import MEMVAULT


async def mirror(api: NamespaceAPI, p: Principal, root: Path, only: str | None = None) -> dict[str, int]:
    names = [only] if only else [n.name for n in await api.list_namespaces(p)]
    m = Mirror(root)
    for name in names:
        async for record in await api.export_current_memories(p, name):
            m.put(record)
    return m.finish(names, every_namespace=only is None)


def tree(root: Path) -> dict[str, str]:
    return {str(f.relative_to(root)): f.read_text() for f in sorted(root.rglob("*")) if f.is_file()}


def front_matter(text: str) -> tuple[dict[str, Any], str]:
    _, head, body = text.split("---\n", 2)
    return yaml.safe_load(head), body


async def seed(api: NamespaceAPI, t: Tenant) -> dict[str, Any]:
    p = t.principal
    await api.create_namespace(p, NamespaceIn(name="work"))
    old = await api.store(p, "default", MemoryIn(content="Prefers tea", type="preference", key="drink", user_id="ana"))
    tea = await api.store(
        p,
        "default",
        MemoryIn(
            content='Prefers green tea: "sencha"\n---\nnot front matter', type="preference", key="drink", user_id="ana"
        ),
    )
    fact = await api.store(p, "default", MemoryIn(content="Ana lives in Porto", importance=0.8))
    sprint = await api.store(p, "work", MemoryIn(content="Sprint ends Friday", type="task", session_id="s-1"))
    return {"old": old, "tea": tea, "fact": fact, "sprint": sprint}


class TestMirror:
    async def test_files_front_matter_and_a_second_run_changes_nothing(
        self, api: NamespaceAPI, tenant_a: Tenant, tmp_path: Path
    ) -> None:
        m = await seed(api, tenant_a)
        counts = await mirror(api, tenant_a.principal, tmp_path)
        files = tree(tmp_path)
        # The replaced version of "drink" is history: only the current one has a file.
        assert set(files) == {
            f"default/preference/{m['tea'].id}.md",
            f"default/fact/{m['fact'].id}.md",
            f"work/task/{m['sprint'].id}.md",
            MANIFEST,
        }
        assert counts == {"written": 3, "unchanged": 0, "removed": 0}
        meta, body = front_matter(files[f"default/preference/{m['tea'].id}.md"])
        assert body == '\nPrefers green tea: "sencha"\n---\nnot front matter\n'
        assert meta["id"] == str(m["tea"].id) and meta["type"] == "preference" and meta["key"] == "drink"
        assert meta["namespace"] == "default" and meta["scope"] == "user" and meta["user_id"] == "ana"
        assert meta["supersedes"] == str(m["old"].id) and meta["session_id"] is None
        assert meta["created_at"] == m["tea"].created_at.isoformat() and meta["importance"] == m["tea"].importance
        assert front_matter(files[f"default/fact/{m['fact'].id}.md"])[0]["importance"] == 0.8
        assert front_matter(files[f"work/task/{m['sprint'].id}.md"])[0]["session_id"] == "s-1"

        # Reading memories (which counts accesses) and running again: not a byte differs.
        await api.get_memory(tenant_a.principal, "default", m["fact"].id)
        again = await mirror(api, tenant_a.principal, tmp_path)
        assert again == {"written": 0, "unchanged": 3, "removed": 0}
        assert tree(tmp_path) == files

    async def test_forgotten_and_replaced_memories_lose_their_files_others_stay(
        self, api: NamespaceAPI, tenant_a: Tenant, tmp_path: Path
    ) -> None:
        p = tenant_a.principal
        m = await seed(api, tenant_a)
        await mirror(api, p, tmp_path)
        (tmp_path / "README.md").write_text("my notes\n")
        (tmp_path / "default/fact/mine.md").write_text("written by hand\n")

        await api.delete_memory(p, "default", m["fact"].id)
        newer = await api.store(
            p, "default", MemoryIn(content="Prefers coffee", type="preference", key="drink", user_id="ana")
        )
        counts = await mirror(api, p, tmp_path)

        assert counts == {"written": 1, "unchanged": 1, "removed": 2}
        assert set(tree(tmp_path)) == {
            f"default/preference/{newer.id}.md",
            f"work/task/{m['sprint'].id}.md",
            "default/fact/mine.md",
            "README.md",
            MANIFEST,
        }
        # A run over one namespace prunes only that namespace's files.
        await api.delete_memory(p, "default", newer.id)
        assert (await mirror(api, p, tmp_path, only="work"))["removed"] == 0
        assert (tmp_path / f"default/preference/{newer.id}.md").exists()
        manifest = json.loads((tmp_path / MANIFEST).read_text())
        assert set(manifest["files"]) == {"default", "work"}

    async def test_another_tenant_exports_none_of_it(
        self, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant, tmp_path: Path
    ) -> None:
        await seed(api, tenant_a)
        await api.store(tenant_b.principal, "default", MemoryIn(content="B's own memory"))
        counts = await mirror(api, tenant_b.principal, tmp_path)
        assert counts["written"] == 1
        texts = "".join(tree(tmp_path).values())
        assert "B's own memory" in texts and "Porto" not in texts and "tea" not in texts


@pytest.mark.slow
async def test_the_command(api: NamespaceAPI, tenant_a: Tenant, pg_urls: DatabaseUrls, tmp_path: Path) -> None:
    m = await seed(api, tenant_a)
    out = tmp_path / "mirror"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env["MEMVAULT_DATABASE_URL"] = pg_urls.owner.render_as_string(hide_password=False)

    async def export(*args: str) -> dict[str, Any]:
        proc = await asyncio.create_subprocess_exec(
            str(MEMVAULT),
            "export",
            "--markdown",
            str(out),
            "--tenant",
            tenant_a.name,
            *args,
            env=env,
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=120)
        assert proc.returncode == 0, stderr.decode()
        return json.loads(stdout)

    assert await export() == {"dir": str(out), "written": 3, "unchanged": 0, "removed": 0}
    first = tree(out)
    assert await export() == {"dir": str(out), "written": 0, "unchanged": 3, "removed": 0}
    assert tree(out) == first
    await api.delete_memory(tenant_a.principal, "work", m["sprint"].id)
    assert (await export("--namespace", "work"))["removed"] == 1
    assert not (out / "work").exists()
