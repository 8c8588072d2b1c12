"""`memvault mcp`: the same tools over stdio, for local clients that launch a command.

Two modes. With `--url` it is a bridge: every request is forwarded to a remote memvault's /mcp
with the API key from `MEMVAULT_API_KEY`, and answered with the remote's response; `--profile`
asks the remote for that profile (`?profile=`), else the URL's own applies. A refused key or an
unreachable URL ends it with one line on stderr and a non-zero status. Without it,
the tools run in this process against the configured database (the embedded default unless
`MEMVAULT_DATABASE_URL`), as the key in `MEMVAULT_API_KEY` or, if none is set, as the first
tenant's administrator (the machine's owner). Only protocol goes to stdout; logs go to stderr.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, TextContent

from memvault import __version__
from memvault.config import Settings
from memvault.mcp import setup
from memvault.mcp.server import Profile

log = logging.getLogger(__name__)


# Tools whose answer has a field about the client's project (mcp/setup.py), which only this side sees.
LOCAL_RULES = {"memory_status": "rules", "memory_setup": "installed"}


class BridgeError(RuntimeError):
    pass


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


async def serve_local(settings: Settings, profile: Profile) -> None:
    from memvault.api import NamespaceAPI
    from memvault.db.session import Database
    from memvault.embeddings import build_embedder
    from memvault.mcp.runtime import Runtime
    from memvault.mcp.server import build_server
    from memvault.operator import bootstrap, find_tenant, prepare_database
    from memvault.principal import Principal
    from memvault.retrieval.rerank import build_reranker
    from memvault.retrieval.rewrite import build_rewriter

    # Starting a database, migrating it and loading a model may print; none of it may reach the
    # protocol stream, so stdout (the descriptor, for child processes too) points at stderr until
    # the server takes it over.
    with _stdout_to_stderr():
        db = Database(prepare_database(settings), pool_size=2)
        embedder = build_embedder(settings)
        load = getattr(embedder, "load", None)
        if load is not None:
            load()
        reranker, rewriter = build_reranker(settings), build_rewriter(settings)
        reranker_load = getattr(reranker, "load", None)
        if reranker_load is not None:
            try:
                reranker_load()
            except Exception:  # best effort: searches report rerank "failed" (retrieval/stages.py)
                log.exception("could not load the reranker")
    api = NamespaceAPI(db, embedder, settings, reranker=reranker, rewriter=rewriter)
    try:
        with _stdout_to_stderr():
            key = os.environ.get("MEMVAULT_API_KEY")
            if key:
                principal = await api.authenticate(key)
            else:
                await bootstrap(db, settings)
                tenant = await find_tenant(db, settings.bootstrap_tenant)
                if tenant is None:
                    raise BridgeError(f"no tenant '{settings.bootstrap_tenant}'; set MEMVAULT_API_KEY")
                principal = Principal.system(tenant.id, subject="stdio")
        # A client launches the bridge in its project: memory_status reports that project's rule files.
        runtime = Runtime(api=lambda: api, fixed_principal=principal, project_dir=Path.cwd())
        server = build_server(runtime, profile)
        await server.run_stdio_async()
    finally:
        await api.aclose()
        await embedder.aclose()
        for stage in (reranker, rewriter):
            if stage is not None:
                await stage.aclose()
        await db.dispose()


def profile_url(url: str, profile: Profile | None) -> str:
    """``url`` asking for ``profile`` (the query wins over the path on the server), or as given."""
    if profile is None:
        return url
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "profile"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("profile", profile)])))


class _FirstRefusal:
    """Keeps the first HTTP error the remote answers: the SDK turns it into a bare "Server returned
    an error response", which tells a person neither that the key was wrong nor why."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.detail = ""

    async def __call__(self, response: httpx2.Response) -> None:
        if response.status_code < 400 or self.status is not None:
            return
        await response.aread()
        self.status = response.status_code
        try:
            body = response.json()
            self.detail = f"{body.get('code', '')}: {body.get('detail') or body.get('title') or ''}".strip(": ")
        except (ValueError, AttributeError):
            self.detail = response.reason_phrase

    def explain(self, url: str) -> str:
        if self.status in (401, 403):
            return f"{url} refused the key in MEMVAULT_API_KEY (HTTP {self.status}, {self.detail})"
        return f"{url} answered HTTP {self.status} ({self.detail})"


async def serve_bridge(url: str, api_key: str) -> None:
    """Forward every request to the remote server; one remote session for the bridge's lifetime."""
    headers = {"Authorization": f"Bearer {api_key}"}
    refusal = _FirstRefusal()
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as remote,
    ):
        http.event_hooks["response"].append(refusal)
        try:
            init = await remote.initialize()
        except Exception as exc:
            if refusal.status is None:
                raise
            raise BridgeError(refusal.explain(url)) from exc

        async def list_tools(ctx: Any, params: Any) -> Any:
            return await remote.list_tools(params=params)

        async def call_tool(ctx: Any, params: Any) -> Any:
            result = await remote.call_tool(params.name, params.arguments or {})
            field = LOCAL_RULES.get(params.name)
            return _with_local_rules(result, field) if field else result

        async def list_resources(ctx: Any, params: Any) -> Any:
            return await remote.list_resources(params=params)

        async def list_resource_templates(ctx: Any, params: Any) -> Any:
            return await remote.list_resource_templates(params=params)

        async def read_resource(ctx: Any, params: Any) -> Any:
            return await remote.read_resource(params.uri)

        async def list_prompts(ctx: Any, params: Any) -> Any:
            return await remote.list_prompts(params=params)

        async def get_prompt(ctx: Any, params: Any) -> Any:
            return await remote.get_prompt(params.name, params.arguments)

        server: Server[Any] = Server(
            init.server_info.name,
            version=init.server_info.version or __version__,
            instructions=init.instructions,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_resource_templates,
            on_read_resource=read_resource,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
        )
        async with stdio_server() as (stdin, stdout):
            await server.run(stdin, stdout, server.create_initialization_options())


def _with_local_rules(result: CallToolResult, field: str) -> CallToolResult:
    """The remote cannot see this machine's project; the bridge, launched in it, adds its rule files."""
    if result.is_error or result.structured_content is None:
        return result
    out = {**result.structured_content, field: dict(setup.state(Path.cwd()))}
    text = TextContent(type="text", text=json.dumps(out, indent=2))
    return result.model_copy(update={"structured_content": out, "content": [text]})


def main(settings: Settings, url: str | None, profile: Profile | None) -> int:
    import anyio

    logging.basicConfig(stream=sys.stderr, level=settings.log_level)
    if not url:
        anyio.run(serve_local, settings, profile or settings.mcp_profile)
        return 0
    key = os.environ.get("MEMVAULT_API_KEY")
    if not key:
        print("memvault mcp --url needs MEMVAULT_API_KEY in the environment", file=sys.stderr)
        return 2
    remote = profile_url(url, profile)
    try:
        anyio.run(serve_bridge, remote, key)
    except Exception as exc:  # anyio hands what its task groups raise over in exception groups
        log.debug("bridge failed", exc_info=exc)
        print(f"memvault mcp: {_reason(exc, remote)}", file=sys.stderr)
        return 1
    return 0


def _reason(exc: BaseException, url: str) -> str:
    """One line for a person: what a bridge failure comes down to, without the traceback."""
    for cause in _causes(exc):
        if isinstance(cause, BridgeError):
            return str(cause)
        if isinstance(cause, httpx2.TransportError):
            return f"cannot reach {url} ({type(cause).__name__}: {cause or 'no answer'})"
    return f"{url}: {type(exc).__name__}: {exc}".splitlines()[0]


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, what its exception groups hold and what it was raised from, depth first."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        nested = list(e.exceptions) if isinstance(e, BaseExceptionGroup) else []
        todo.extend(reversed([*nested, *(c for c in (e.__cause__ or e.__context__,) if c is not None)]))
