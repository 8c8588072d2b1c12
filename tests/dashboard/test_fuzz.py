"""Every form the dashboard shows a signed-in owner, sent with hostile values, and every page with a
path parameter opened with hostile ids: each answer is a page (or a redirect) with a status below
500. The REST door has schemathesis and the MCP door tests/mcp/test_fuzz.py; these are the pages'.

The forms are found on the pages themselves (their action, method and fields, as a browser sees
them), so a form added to a page is covered without anyone listing it. For each form, one field at
a time takes each hostile value while the others keep the page's own values; a POST carries the
session's form token, so it reaches the route's own reading of the fields. Sign-out is left out
(it would end the session the rest needs).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import quote

import pytest

from memvault.api import NamespaceAPI
from memvault.memories.schemas import MemoryIn
from tests.conftest import Tenant
from tests.dashboard.conftest import Browser, csrf_in
from tests.dashboard.test_routes import ROUTES

pytestmark = pytest.mark.slow

HOSTILE = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "x" * 5000,
    "\u00fc\u200b\U0001d518\u202e",
    "-1",
    "0",
    "1e309",
    "99999999999999999999999999",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "' OR 1=1 --",
    "2026-13-45T25:61:00Z",
    "owner",
    str(uuid.UUID(int=0)),
]
# Path segments: the same, where a URL can carry them.
HOSTILE_IDS = [v for v in HOSTILE if v.strip() and len(v) < 100] + [str(uuid.uuid4())]
LEAVE_OUT = {"/dashboard/signout"}


@dataclass
class Form:
    method: str
    action: str
    # name -> the value the page gives it (its first option, its checked box, its value attribute)
    fields: dict[str, str] = field(default_factory=dict)


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(Form(a.get("method", "get").lower(), a.get("action", "")))
        elif not self.forms or "name" not in a or a["name"] == "csrf":
            return
        elif tag in ("input", "textarea"):
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio") and "checked" not in a:
                self.forms[-1].fields.setdefault(a["name"], "")
            else:
                self.forms[-1].fields[a["name"]] = a.get("value", "")
        elif tag == "select":
            self._select = a["name"]
            self.forms[-1].fields.setdefault(a["name"], "")
        if tag == "option" and self._select and self.forms:
            chosen = self.forms[-1].fields
            if not chosen.get(self._select) or "selected" in a:
                chosen[self._select] = a.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None


def forms_on(html: str) -> list[Form]:
    parser = _Forms()
    parser.feed(html)
    return [f for f in parser.forms if f.action.startswith("/dashboard") and f.action not in LEAVE_OUT]


@pytest.fixture
async def owner_pages(api: NamespaceAPI, tenant_a: Tenant, signed_in: Browser) -> tuple[Browser, list[str]]:
    """The owner of tenant A, signed in, with a memory to look at; the pages to read forms from."""
    [memory] = await api.store_many(tenant_a.principal, tenant_a.namespace, [MemoryIn(content="Ana likes tea")])
    pages = sorted({path for method, path in ROUTES if method == "GET" and "{" not in path} - {"/dashboard/usage.csv"})
    pages += [
        f"/dashboard/explorer/{tenant_a.namespace}/memories/{memory.id}",
        f"/dashboard/namespaces/{tenant_a.namespace}",
        f"/dashboard/explorer?namespace={tenant_a.namespace}&query=tea",
    ]
    return signed_in, pages


async def test_every_form_answers_hostile_values_without_a_server_error(
    owner_pages: tuple[Browser, list[str]],
) -> None:
    browser, pages = owner_pages
    first = await browser.get("/dashboard")
    token = csrf_in(first.text)
    seen: dict[tuple[str, str], Form] = {}
    for page in pages:
        r = await browser.get(page)
        assert r.status_code < 500, (page, r.status_code)
        for form in forms_on(r.text):
            seen.setdefault((form.method, form.action), form)
    assert len(seen) >= 10, sorted(seen)  # the pages do show their forms
    failures = []
    for (method, action), form in sorted(seen.items()):
        for name in form.fields:
            for value in HOSTILE:
                data = {**form.fields, name: value}
                if method == "get":
                    r = await browser.http.get(action, params=data)
                else:
                    r = await browser.post(action, data, csrf=token)
                if r.status_code >= 500:
                    failures.append(f"{method.upper()} {action} {name}={value[:40]!r}: {r.status_code}")
    assert not failures, "\n".join(failures)


async def test_every_page_answers_hostile_ids_without_a_server_error(
    owner_pages: tuple[Browser, list[str]],
) -> None:
    browser, _ = owner_pages
    token = csrf_in((await browser.get("/dashboard")).text)
    failures = []
    for method, path in ROUTES:
        if "{" not in path or path in LEAVE_OUT:
            continue
        for value in HOSTILE_IDS:
            url = re.sub(r"\{[^}]+\}", quote(value, safe=""), path)
            r = await (browser.http.get(url) if method == "GET" else browser.post(url, {}, csrf=token))
            if r.status_code >= 500:
                failures.append(f"{method} {url[:120]}: {r.status_code}")
    assert not failures, "\n".join(failures)
