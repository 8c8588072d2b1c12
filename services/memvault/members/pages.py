"""The sign-up, verification and invitation pages: server-rendered forms like the sign-in pages
(oauth/pages.py), no JavaScript, every value escaped. The dashboard restyles them later."""

from __future__ import annotations

from html import escape

from memvault.oauth.pages import _error, _page


def signup(*, error: str | None = None, email: str = "", organisation: str = "", closed: bool = False) -> str:
    if closed:
        return _page("Sign up", "<h1>Sign-up is closed</h1><p>Ask this server's operator for an account.</p>")
    return _page(
        "Sign up",
        "<h1>Create a memvault organisation</h1>"
        f"{_error(error)}"
        '<form method="post" action="/signup">'
        '<label for="organisation">Organisation name</label>'
        f'<input id="organisation" name="organisation" required minlength="2" maxlength="100" '
        f'value="{escape(organisation)}">'
        '<label for="email">Email</label>'
        f'<input id="email" name="email" type="email" autocomplete="username" required value="{escape(email)}">'
        '<label for="password">Password (at least 10 characters)</label>'
        '<input id="password" name="password" type="password" autocomplete="new-password" required minlength="10">'
        '<button type="submit">Sign up</button></form>'
        '<p class="muted">We mail you a link to verify the address; you can sign in once it is verified.</p>',
    )


def signup_sent(email: str) -> str:
    return _page(
        "Check your mail",
        f"<h1>Check your mail</h1><p>We sent a link to <strong>{escape(email)}</strong>. "
        "Follow it to verify the address and finish signing up.</p>",
    )


def verify(token: str, *, error: str | None = None) -> str:
    """A GET of the link only shows this; the POST verifies, so a mail scanner that follows links
    does not use up the one showing of the API key."""
    return _page(
        "Verify your email",
        f"<h1>Verify your email</h1>{_error(error)}"
        '<form method="post" action="/signup/verify">'
        f'<input type="hidden" name="token" value="{escape(token)}">'
        '<button type="submit">Verify and show my API key</button></form>',
    )


def verified(organisation: str, namespace: str | None, api_key: str | None) -> str:
    if api_key is None:
        return _page(
            "Verified",
            f"<h1>Already verified</h1><p>{escape(organisation)} is ready: sign in from your MCP client.</p>",
        )
    return _page(
        "Verified",
        f"<h1>Welcome to memvault</h1><p>{escape(organisation)} is ready"
        f"{f' with the namespace <code>{escape(namespace)}</code>' if namespace else ''}.</p>"
        "<p>Your organisation's admin API key, shown this once: keep it somewhere safe.</p>"
        f"<p><code>{escape(api_key)}</code></p>"
        '<p class="muted">MCP clients sign in with your email and password; the key is for the REST API and SDK.</p>',
    )


def accept(token: str, *, error: str | None = None) -> str:
    return _page(
        "Accept the invitation",
        f"<h1>Join on memvault</h1>{_error(error)}"
        '<form method="post" action="/invitations/accept">'
        f'<input type="hidden" name="token" value="{escape(token)}">'
        '<label for="password">Choose a password (at least 10 characters)</label>'
        '<input id="password" name="password" type="password" autocomplete="new-password" required minlength="10">'
        '<button type="submit">Accept</button></form>',
    )


def accepted(organisation: str, email: str) -> str:
    return _page(
        "Welcome",
        f"<h1>You are a member of {escape(organisation)}</h1>"
        f"<p>Sign in from your MCP client as <strong>{escape(email)}</strong>.</p>",
    )
