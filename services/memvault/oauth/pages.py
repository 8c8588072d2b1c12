"""The sign-in and consent pages: plain server-rendered HTML forms, no JavaScript, every value
escaped. The authorization request travels in hidden fields and is checked again on every POST."""

from __future__ import annotations

from html import escape
from urllib.parse import urlsplit

from memvault.oauth.authorization import AuthorizationRequest, ConsentView
from memvault.oauth.schemas import DEFAULT_OAUTH_SCOPES

SCOPE_TEXT = {
    "read": "Read your memories: search, recall and list what is stored",
    "write": "Add, change and forget memories",
    "act_as": "Act for other users of this organisation: read and write any member's memories by naming them",
}

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;line-height:1.5;color:#111}
h1{font-size:1.4rem} label{display:block;margin-top:.8rem} input[type=email],input[type=password]{width:100%;
padding:.5rem;font-size:1rem} fieldset{margin-top:1rem} button{margin-top:1.2rem;padding:.5rem 1.2rem;font-size:1rem}
.error{color:#a00;border:1px solid #a00;padding:.5rem} .muted{color:#555;font-size:.9rem} code{word-break:break-all}
"""


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)} · memvault</title><style>{_STYLE}</style></head>"
        f"<body><main>{body}</main></body></html>"
    )


def _hidden(req: AuthorizationRequest) -> str:
    return "".join(f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">' for k, v in req.fields().items())


def _error(message: str | None) -> str:
    return f'<p class="error" role="alert">{escape(message)}</p>' if message else ""


def _client_label(req: AuthorizationRequest) -> str:
    return escape(req.client_name or "An application")


def login(
    req: AuthorizationRequest, *, error: str | None = None, email: str = "", accounts: list[str] | None = None
) -> str:
    """Step 1: who is signing in (and, when the email is a user of several accounts whose
    passwords all matched, which account)."""
    choice = ""
    if accounts:
        options = "".join(f'<option value="{escape(a)}">{escape(a)}</option>' for a in accounts)
        choice = f'<label for="account">Account</label><select id="account" name="account">{options}</select>'
    return _page(
        "Sign in",
        f"<h1>Sign in to memvault</h1>"
        f"<p><strong>{_client_label(req)}</strong> wants to use your memvault memory.</p>"
        f"{_error(error)}"
        '<form method="post" action="/oauth/authorize">'
        f'{_hidden(req)}<input type="hidden" name="step" value="login">'
        '<label for="email">Email</label>'
        f'<input id="email" name="email" type="email" autocomplete="username" required value="{escape(email)}">'
        '<label for="password">Password</label>'
        '<input id="password" name="password" type="password" autocomplete="current-password" required>'
        f"{choice}"
        '<button type="submit">Continue</button></form>',
    )


def consent(view: ConsentView, *, error: str | None = None) -> str:
    """Step 2: what the client may do, and in which namespaces."""
    req = view.request
    where = destination(req.redirect_uri)
    # act_as comes unticked: a client that asks for every scope it finds in the metadata must not
    # get the power to act for everyone by a click on Allow.
    scopes = "".join(
        f'<label><input type="checkbox" name="grant_scope" value="{escape(s)}"'
        f"{' checked' if s in DEFAULT_OAUTH_SCOPES else ''}> "
        f"{escape(SCOPE_TEXT.get(s, s))} (<code>{escape(s)}</code>)</label>"
        for s in view.scopes
    )
    namespaces = "".join(
        f'<label><input type="checkbox" name="namespace" value="{escape(n)}"'
        f"{' checked' if n in view.checked_namespaces else ''}> {escape(n)}</label>"
        for n in view.namespaces
    )
    return _page(
        "Allow access",
        f"<h1>Allow {_client_label(req)} to use your memory?</h1>"
        f'<p class="muted">Signed in as {escape(view.user_email)}. The application will be sent back to '
        f"<code>{escape(where)}</code>. Client id: <code>{escape(req.client_id)}</code>.</p>"
        f"{_error(error)}"
        '<form method="post" action="/oauth/authorize">'
        f'{_hidden(req)}<input type="hidden" name="step" value="consent">'
        f'<input type="hidden" name="ticket" value="{escape(view.ticket)}">'
        f"<fieldset><legend>It may</legend>{scopes}</fieldset>"
        f"<fieldset><legend>In these namespaces</legend>{namespaces}</fieldset>"
        '<button type="submit" name="decision" value="allow">Allow</button> '
        '<button type="submit" name="decision" value="deny">Deny</button></form>'
        '<p class="muted">You can revoke this at any time; your administrator sees it in the account page.</p>',
    )


def destination(redirect_uri: str) -> str:
    """Where the browser goes next, as a person should judge it: scheme, host and port, never a
    userinfo part (`https://claude.ai@evil.example` goes to evil.example)."""
    target = urlsplit(redirect_uri)
    if not target.hostname:
        return f"{target.scheme}:"
    host = f"[{target.hostname}]" if ":" in target.hostname else target.hostname
    port = target.port or {"https": 443, "http": 80}.get(target.scheme.lower())
    return f"{target.scheme}://{host}" + (f":{port}" if port else "")


def problem(title: str, detail: str) -> str:
    """A request that cannot be sent back to the client (unknown client, unregistered redirect)."""
    return _page(title, f"<h1>{escape(title)}</h1>{_error(detail)}<p>Return to the application and try again.</p>")
