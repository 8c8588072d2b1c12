"""The `memvault admin` commands: tenants, keys, namespaces, users, plans and the signing key,
run by an operator against the configured database (`memvault export` reuses the runner)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from memvault.config import Settings


def run_admin(settings: Settings, fn: Callable[[Any, Any], Awaitable[Any]]) -> int:
    """Run ``fn(api, db)`` against the configured database and print its result as JSON; a
    refusal prints its reason and code, exit status 1."""
    from pydantic import ValidationError

    from memvault.api import NamespaceAPI
    from memvault.db.session import Database
    from memvault.embeddings import build_embedder
    from memvault.errors import MemvaultError
    from memvault.operator import prepare_database

    urls = prepare_database(settings)

    async def run() -> Any:
        db = Database(urls, pool_size=1)
        # The embedder loads lazily and admin commands never embed, so this costs nothing.
        api = NamespaceAPI(db, build_embedder(settings), settings)
        try:
            return await fn(api, db)
        finally:
            await api.aclose()
            await db.dispose()

    try:
        result = asyncio.run(run())
    except MemvaultError as exc:
        print(f"error: {exc.detail} ({exc.code})", file=sys.stderr)
        return 1
    except ValidationError as exc:  # a bad --scopes or name: the operator needs the reason, not a traceback
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        print(f"error: {field}: {first['msg']} (validation_error)", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2, default=str))
    return 0


async def existing_tenant(db: Any, name: str) -> Any:
    """The tenant named ``name``; NotFound (exit 1 with the reason) when there is none."""
    from memvault.errors import NotFound
    from memvault.operator import find_tenant

    tenant = await find_tenant(db, name)
    if tenant is None:
        raise NotFound(f"no tenant named '{name}'")
    return tenant


async def tenant_principal(db: Any, name: str) -> Any:
    from memvault.principal import Principal

    tenant = await existing_tenant(db, name)
    return Principal.system(tenant.id, subject="cli", operator=True)


def command(args: argparse.Namespace, settings: Settings) -> int:
    """One `memvault admin` subcommand (``args.admin_cmd``)."""
    from memvault.keys.schemas import KeyIn
    from memvault.namespaces.schemas import NamespaceIn

    def csv(value: str | None) -> list[str] | None:
        return [v.strip() for v in value.split(",") if v.strip()] if value else None

    if args.admin_cmd == "create-tenant":

        async def fn(api: Any, db: Any) -> Any:
            t = await api.create_tenant(args.name, namespace=args.namespace, plan=args.plan)
            return {
                "tenant_id": t.id,
                "name": t.name,
                "plan": args.plan,
                "namespace": t.namespace,
                "key_id": t.key_id,
                "api_key": t.api_key,
                "note": "the API key is shown once; store it now",
            }

    elif args.admin_cmd == "create-key":

        async def fn(api: Any, db: Any) -> Any:
            p = await tenant_principal(db, args.tenant)
            body = KeyIn(
                name=args.name or "",
                scopes=csv(args.scopes) or ["read", "write"],
                namespaces=csv(args.namespaces),
                default_namespace=args.default_namespace,
                expires_in_days=args.expires_in_days,
            )
            return (await api.create_key(p, body, operator=args.operator)).model_dump(mode="json")

    elif args.admin_cmd == "list-keys":

        async def fn(api: Any, db: Any) -> Any:
            p = await tenant_principal(db, args.tenant)
            keys, cursor = [], None
            while True:
                page = await api.list_keys(p, limit=200, cursor=cursor)
                keys += [k.model_dump(mode="json") for k in page.data]
                if (cursor := page.next_cursor) is None:
                    return keys

    elif args.admin_cmd == "rotate-key":

        async def fn(api: Any, db: Any) -> Any:
            from memvault.keys.schemas import KeyRotateIn

            p = await tenant_principal(db, args.tenant)
            body = KeyRotateIn(grace_seconds=args.grace_seconds)
            return (await api.rotate_key(p, args.key_id, body)).model_dump(mode="json")

    elif args.admin_cmd == "revoke-key":

        async def fn(api: Any, db: Any) -> Any:
            p = await tenant_principal(db, args.tenant)
            return (await api.revoke_key(p, args.key_id)).model_dump(mode="json")

    elif args.admin_cmd == "create-namespace":

        async def fn(api: Any, db: Any) -> Any:
            p = await tenant_principal(db, args.tenant)
            body = NamespaceIn(name=args.name, description=args.description)
            return (await api.create_namespace(p, body)).model_dump(mode="json")

    elif args.admin_cmd == "create-user":
        password = _read_password(args.password_env)

        async def fn(api: Any, db: Any) -> Any:
            from memvault.oauth.schemas import UserIn

            p = await tenant_principal(db, args.tenant)
            scopes = csv(args.scopes) or ["read", "write"]
            body = UserIn(email=args.email, password=password, name=args.name or "", scopes=scopes, role=args.role)
            return (await api.create_user(p, body)).model_dump(mode="json")

    elif args.admin_cmd == "set-password":
        password = _read_password(args.password_env, prompt=f"New password for {args.email}: ")

        async def fn(api: Any, db: Any) -> Any:
            p = await tenant_principal(db, args.tenant)
            out = (await api.set_user_password(p, args.email, password)).model_dump(mode="json")
            return {**out, "note": "the new password signs in to the dashboard and to MCP clients"}

    elif args.admin_cmd == "disable-user":

        async def fn(api: Any, db: Any) -> Any:
            p = await tenant_principal(db, args.tenant)
            user = await api.find_user(p, args.email)
            return (await api.disable_user(p, user.id)).model_dump(mode="json")

    elif args.admin_cmd == "delete-tenant":
        if args.confirm != args.tenant:
            print(
                f"error: deleting tenant '{args.tenant}' erases everything it holds; "
                f"repeat its name: --confirm {args.tenant}",
                file=sys.stderr,
            )
            return 2

        async def fn(api: Any, db: Any) -> Any:
            from memvault.errors import NotFound
            from memvault.operator import delete_tenant

            deleted = await delete_tenant(db, args.tenant)
            if deleted is None:
                raise NotFound(f"no tenant named '{args.tenant}'")
            return {"tenant": args.tenant, "deleted": deleted}

    elif args.admin_cmd in ("create-plan", "set-plan", "list-plans"):
        try:
            plan_fn = _plan_command(args)
        except ValueError as exc:  # a bad limit: the operator needs the reason, not a traceback
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return run_admin(settings, plan_fn)

    elif args.admin_cmd == "rotate-signing-key":

        async def fn(api: Any, db: Any) -> Any:
            return {"kid": await api.rotate_signing_key(), "note": "older keys verify until their tokens expire"}

    else:  # pragma: no cover - argparse enforces the choices
        raise SystemExit(2)
    return run_admin(settings, fn)


_PLAN_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


def _limit_pairs(pairs: list[str], where: str) -> dict[str, int | None]:
    """``NAME=N`` (or ``NAME=unlimited``) pairs, checked against PlanLimits' names and values."""
    from memvault.plans.limits import PlanLimits

    values: dict[str, int | None] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep:
            raise ValueError(f"{where} {pair!r}: write NAME=NUMBER (or NAME=unlimited)")
        value: int | None
        if raw.strip().lower() in ("unlimited", "none", "null"):
            value = None
        else:
            try:
                value = int(raw)
            except ValueError:
                raise ValueError(f"{where} {name}: {raw!r} is not a whole number (or 'unlimited')") from None
        values[name.strip()] = value
    PlanLimits.parse(values, where=where.lstrip("-"))
    return values


def _plan_command(args: argparse.Namespace) -> Callable[[Any, Any], Awaitable[Any]]:
    """create-plan, set-plan, list-plans. Limits are checked here, before any database work, so a
    typo exits with code 2 and changes nothing."""
    from memvault.errors import InvalidInput
    from memvault.plans.limits import PlanLimits

    def shown(name: str, description: str, limits: PlanLimits) -> dict[str, Any]:
        return {"name": name, "description": description, "limits": limits.as_dict()}

    async def by_name(api: Any, name: str) -> tuple[str, str, PlanLimits]:
        found: list[tuple[str, str, PlanLimits]] = [p for p in await api.list_plans() if p[0] == name]
        if not found:
            raise InvalidInput(f"no plan named {name!r}; see `memvault admin list-plans`")
        return found[0]

    if args.admin_cmd == "list-plans":

        async def list_plans(api: Any, db: Any) -> Any:
            return [shown(*p) for p in await api.list_plans()]

        return list_plans

    if args.admin_cmd == "create-plan":
        if not _PLAN_NAME.fullmatch(args.name):
            raise ValueError(f"plan name {args.name!r}: lower-case letters, digits, '-' and '_', at most 63")
        given = _limit_pairs(args.limit or [], "--limit")

        async def create_plan(api: Any, db: Any) -> Any:
            plans = {p[0]: p for p in await api.list_plans()}
            if args.name in plans and not args.replace:
                raise InvalidInput(f"plan {args.name!r} exists; add --replace to change its limits")
            base = (await by_name(api, args.base))[2] if args.base else PlanLimits()
            limits = PlanLimits.parse({**base.as_dict(), **given})
            description = args.description if args.description is not None else ""
            await api.save_plan(args.name, limits, description)
            return shown(args.name, description, limits)

        return create_plan

    if args.override and args.clear_overrides:
        raise ValueError("give --override or --clear-overrides, not both")
    overrides = _limit_pairs(args.override, "--override") if args.override else ({} if args.clear_overrides else None)

    async def set_plan(api: Any, db: Any) -> Any:
        tenant = await existing_tenant(db, args.tenant)
        await api.set_tenant_plan(tenant.id, args.plan, overrides)
        _, _, limits = await by_name(api, args.plan)
        kept = tenant.plan_overrides if overrides is None else overrides
        return {
            "tenant": args.tenant,
            "plan": args.plan,
            "overrides": kept,
            "limits": limits.with_overrides(kept or {}).as_dict(),
        }

    return set_plan


def _read_password(env_name: str | None, *, prompt: str = "Password for the new user: ") -> str:
    """From the named environment variable, else the first line of standard input: never an
    argument, which other users of the machine could read in the process list."""
    if env_name:
        value = os.environ.get(env_name)
        if value is None:
            raise SystemExit(f"error: environment variable {env_name} is not set")
        return value
    if sys.stdin.isatty():
        import getpass

        return getpass.getpass(prompt)
    return sys.stdin.readline().rstrip("\n")
