"""What a secret looks like: the rules `scan` applies to a text (`memvault.guard` applies them to
text as written, then as `normalising` rewrites it).

False positives are costly: users store prose about keys, tokens and databases. So every rule
wants a shape (a vendor prefix, a fixed length, a PEM body, a password inside a URL) or, for
`password=...`-style assignments, a value that is long, mixed and high-entropy. Bare prefixes
("AKIA is the AWS prefix"), placeholders (`<password>`, `${TOKEN}`, `***`) and short human
passwords in prose ("my password is hunter2") pass.

Every pattern is anchored on a literal or a character-class boundary and its quantifiers never
overlap (where a class must admit a character conditionally, as '&' in a password but not before
the next query parameter, each alternative takes exactly one character), so Python's backtracking
engine stays linear on 32 KB inputs. Each rule runs only when its needle (a lowercased literal every
match holds) is in the text, which keeps most regex passes off ordinary prose. The tests time
adversarial inputs; tests/guard/corpus.py measures recall and false refusals.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    kind: str  # stable id: clients may branch on it
    label: str  # for humans, used in the error detail


# -- value heuristics ------------------------------------------------------------------------------

_MIN_ENTROPY = 3.0  # bits per character; random 16-char strings score ~3.5-4, words ~2.5-3.2
_MIN_GENERIC_LEN = 16

# Templated or elided values: <password>, {password}, ${PASSWORD}, {{ secrets.X }}, $PASSWORD, %s, %(pw)s, [redacted].
_TEMPLATED = re.compile(r"^(?:<.*>|\{.*\}|\$\{.*\}|\$[A-Za-z_]\w*|%\(\w*\)s|%s|\[.*\])$", re.DOTALL)
# Values that name where the secret lives rather than holding it: os.environ.get(, settings.api_key.
_REFERENCE = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:[(\[].*)?$", re.DOTALL)
_PLACEHOLDER_WORDS = re.compile(
    r"(?i)your|example|placeholder|redacted|changeme|dummy|replace|insert|xxxx|\*\*\*|\.\.\.|\u2026"
)
# Conventional non-secrets in user:password pairs (anonymous FTP, docs).
_PLACEHOLDER_PASSWORDS = frozenset(
    {"pass", "pw", "pwd", "secret", "changeme", "redacted", "placeholder", "example", "hidden", "token"}
    | {"guest", "anonymous"}
)
# Lowercase words and numbers joined by - _ . (my-app-tls-secret-2024) name things; tokens mix case or
# mix letters and digits inside a chunk.
_SLUG = re.compile(r"^(?:[a-z]+|[0-9]+)(?:[-_.](?:[a-z]+|[0-9]+))+$")
# Timestamps are mixed and high-entropy enough to pass as tokens (token=2024-01-15T10:30:00Z).
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d")
# Filler in docs and templates: ghp_xxxxxxxx..., T00000000/B00000000/XXXXXXXX; random tokens never
# repeat a character six times in a row.
_FILLER_RUN = re.compile(r"(.)\1{5}")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=]+")


def _entropy(value: str) -> float:
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def char_classes(value: str) -> tuple[bool, bool, bool, bool]:
    return (
        any(c.islower() for c in value),
        any(c.isupper() for c in value),
        any(c.isdigit() for c in value),
        any(not c.isalnum() for c in value),
    )


def _looks_random(value: str, min_len: int) -> bool:
    """Long, high-entropy and mixed: three character classes, or letters and digits from 20 up
    (hex and lowercase-alphanumeric tokens). Passphrases of plain words do not qualify."""
    if len(value) < min_len or _entropy(value) < _MIN_ENTROPY:
        return False
    lower, upper, digit, other = char_classes(value)
    classes = lower + upper + digit + other
    return classes >= 3 or (digit and (lower or upper) and len(value) >= 20)


def _is_placeholder(value: str) -> bool:
    return bool(
        _TEMPLATED.match(value)
        or _PLACEHOLDER_WORDS.search(value)
        or len(set(value)) == 1
        or "password" in value.lower()
        or "passwd" in value.lower()
    )


def secret_value(value: str) -> bool:
    """The value side of `password=...`: a real credential, not a placeholder or a code reference."""
    return (
        _looks_random(value, _MIN_GENERIC_LEN)
        and not _is_placeholder(value)
        and not _REFERENCE.match(value)
        and not _TIMESTAMP.match(value)
        and not _SLUG.match(value)
    )


def _real_password(user: str, password: str) -> bool:
    """The password half of user:password, in a URL or a Basic credential."""
    # user == password is a local default (postgres:postgres, guest:guest), not something to hide.
    return not (password.lower() in _PLACEHOLDER_PASSWORDS or _is_placeholder(password) or password == user)


# -- rule checks -----------------------------------------------------------------------------------


Check = Callable[[re.Match[str]], bool]


def _not_filler(m: re.Match[str]) -> bool:
    return _FILLER_RUN.search(m.group(0)) is None


def _random_group(min_len: int, group: int = 1) -> Check:
    return lambda m: _looks_random(m.group(group), min_len) and not _is_placeholder(m.group(group))


def _aws_key_id(m: re.Match[str]) -> bool:
    body = m.group(1)
    return (body.isupper() and m.group(0)[:4].isupper()) or any(c.isdigit() for c in body)


def _has_digit(m: re.Match[str]) -> bool:
    return any(c.isdigit() for c in m.group(0))


def _mixed_case(m: re.Match[str]) -> bool:
    lower, upper, _, _ = char_classes(m.group(0))
    return lower and upper


def _pem_body(m: re.Match[str]) -> bool:
    # A header alone is prose ("files start with -----BEGIN RSA PRIVATE KEY-----") or a redacted
    # example; a key has base64 lines of 64 characters right after it (or after PEM headers).
    window = m.string[m.end() : m.end() + 400].split("-----END", 1)[0]
    return any(len(run.group(0)) >= 40 for run in _BASE64_RUN.finditer(window))


def _jwt_header(m: re.Match[str]) -> bool:
    # "eyJ" is base64 of '{"'; a header that decodes to a JSON object makes the shape plausible.
    head = m.group(1)
    try:
        decoded = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (binascii.Error, ValueError):
        return False
    return isinstance(decoded, dict)


_PORT_THEN_QUERY = re.compile(r"\d{1,5}[?#]")


def _url_password(m: re.Match[str]) -> bool:
    return not _PORT_THEN_QUERY.match(m.group(2)) and _real_password(m.group(1), m.group(2))


def _authorization(m: re.Match[str]) -> bool:
    scheme, credential = m.group(1), m.group(2)
    if not _looks_random(credential, 12) or _is_placeholder(credential):
        return False
    if scheme and scheme.lower() == "basic":
        # Basic is base64 of user:password; the docs example (user:password) is not a secret.
        try:
            user, sep, password = base64.b64decode(credential, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return True
        return not sep or _real_password(user, password)
    return True


# Pagination cursors (next_page_token=...) are high-entropy but grant nothing.
PAGINATION_NAME = re.compile(r"(?i)(?:page|next|continuation|sync|resume|cursor)[_-]?$")


def _assignment(m: re.Match[str]) -> bool:
    if PAGINATION_NAME.search(m.string, max(0, m.start() - 24), m.start()):
        return False
    return secret_value(m.group(1))


# -- rules, most specific first: the first rule that matches names the kind -----------------------


@dataclass(frozen=True)
class _Rule:
    finding: Finding
    pattern: re.Pattern[str]
    # Second opinions on a match the regex alone cannot settle (filler, entropy, placeholders, JSON header).
    checks: tuple[Check, ...] = (_not_filler,)


# Secret names for assignments and JSON keys; matched as a suffix, so DB_PASSWORD, clientSecret,
# x-api-key and GITHUB_TOKEN count, while tokenizer=, token_type= and max_tokens: do not.
_SECRET_NAME = r"(?:api[_-]?key|secret(?:[_-]?(?:access[_-]?)?key)?|private[_-]?key|token|password|passwd)"
SECRET_KEY_NAME = re.compile(rf"(?i){_SECRET_NAME}$")

_RULES: tuple[_Rule, ...] = (
    _Rule(
        Finding("private_key", "private key"),
        re.compile(r"-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----"),
        (_pem_body,),
    ),
    _Rule(
        Finding("aws_access_key_id", "AWS access key id"),
        # Any case ("a lowercase key id" is still one); a body that is not all capitals needs a digit,
        # so a word that happens to follow "akia" does not count.
        re.compile(r"(?i)(?<![a-z0-9+/])(?:akia|asia)([a-z0-9]{16})(?![a-z0-9])"),
        (_not_filler, _aws_key_id),
    ),
    _Rule(
        Finding("aws_secret_access_key", "AWS secret access key"),
        re.compile(r"(?i)aws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"),
    ),
    _Rule(
        Finding("github_token", "GitHub token"),
        re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{50,251})"),
    ),
    _Rule(
        Finding("gitlab_token", "GitLab access token"),
        re.compile(r"(?<![A-Za-z0-9_])glpat-[A-Za-z0-9_-]{20,}"),
    ),
    _Rule(
        Finding("slack_webhook_url", "Slack webhook URL"),
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{20,}"),
    ),
    _Rule(
        Finding("slack_token", "Slack token"),
        re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{20,}"),
        (_not_filler, _has_digit),
    ),
    _Rule(
        Finding("stripe_secret_key", "Stripe secret key"),
        re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}"),
    ),
    _Rule(
        Finding("anthropic_api_key", "Anthropic API key"),
        re.compile(r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{30,}"),
        (_not_filler, _has_digit),
    ),
    _Rule(
        Finding("openai_api_key", "OpenAI API key"),
        # sk-proj-, sk-svcacct-, sk-admin- and the legacy sk- + 48; "sk-learn" is too short and too plain.
        re.compile(r"(?<![A-Za-z0-9_-])sk-((?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})"),
        (_not_filler, _random_group(20)),
    ),
    _Rule(
        Finding("google_api_key", "Google API key"),
        re.compile(r"(?<![A-Za-z0-9+/_-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
    ),
    _Rule(
        Finding("google_oauth_client_secret", "Google OAuth client secret"),
        re.compile(r"(?<![A-Za-z0-9])GOCSPX-[A-Za-z0-9_-]{24,}"),
    ),
    _Rule(
        Finding("twilio_api_key", "Twilio API key"),
        re.compile(r"(?<![A-Za-z0-9])SK[0-9a-f]{32}(?![A-Za-z0-9])"),
    ),
    _Rule(
        Finding("sendgrid_api_key", "SendGrid API key"),
        re.compile(r"(?<![A-Za-z0-9])SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{30,}"),
    ),
    _Rule(
        Finding("npm_token", "npm access token"),
        re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
        (_not_filler, _has_digit),
    ),
    _Rule(
        Finding("pypi_token", "PyPI API token"),
        # The macaroon's first bytes spell pypi.org (AgEI) or test.pypi.org (AgEN).
        re.compile(r"(?<![A-Za-z0-9_])pypi-Ag(?:EI|EN)[A-Za-z0-9_-]{50,}"),
    ),
    _Rule(
        Finding("huggingface_token", "Hugging Face token"),
        re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,}(?![A-Za-z0-9_])"),
        (_not_filler, _mixed_case),
    ),
    _Rule(
        Finding("memvault_api_key", "memvault API key"),
        re.compile(r"(?<![A-Za-z0-9_])mv_[A-Za-z0-9]{40}(?![A-Za-z0-9])"),
        (_not_filler, _mixed_case),
    ),
    # Five shapes from detect-secrets' vendor rules (see docs/benchmarks.md), with our boundaries.
    _Rule(
        Finding("telegram_bot_token", "Telegram bot token"),
        re.compile(r"(?<![A-Za-z0-9_:-])\d{5,16}:A[A-Za-z0-9_-]{34}(?![A-Za-z0-9_-])"),
        (_not_filler, _mixed_case),
    ),
    _Rule(
        Finding("discord_bot_token", "Discord bot token"),
        re.compile(r"(?<![A-Za-z0-9_.-])[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}(?![\w.-])"),
        (_not_filler, _mixed_case, _has_digit),
    ),
    _Rule(
        Finding("mailchimp_api_key", "Mailchimp API key"),
        re.compile(r"(?<![A-Za-z0-9])[0-9a-f]{32}-us\d{1,2}(?![A-Za-z0-9])"),
    ),
    _Rule(
        Finding("azure_storage_key", "Azure storage account key"),
        re.compile(r"(?i)accountkey=[A-Za-z0-9+/]{86}=="),
    ),
    _Rule(
        Finding("square_oauth_secret", "Square OAuth secret"),
        re.compile(r"(?<![A-Za-z0-9_-])sq0csp-[A-Za-z0-9_-]{43}"),
    ),
    _Rule(
        Finding("jwt", "JSON Web Token"),
        re.compile(r"(?<![A-Za-z0-9_-])(eyJ[A-Za-z0-9_-]{10,})\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{16,}"),
        (_jwt_header,),
    ),
    _Rule(
        Finding("url_password", "URL with an inline password"),
        # scheme://user:password@host; user may be empty (redis://:pw@host). The password stops at
        # '/', so scheme://host:5432/db never reaches an '@'; it may hold '#', '?' and '&', which
        # people type raw although RFC 3986 wants them percent-encoded (a port followed by a query,
        # host:8080?next=a@b, is ruled out by the check).
        re.compile(r"(?i)(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{1,30}://([^\s:/@?#]{0,128}):([^\s/@]{1,256})@[^\s/@]"),
        (_url_password,),
    ),
    _Rule(
        Finding("authorization_header", "Authorization header credential"),
        re.compile(
            r"(?i)(?<![a-z0-9-])authorization[\"']?\s*[:=]\s*[\"']?"
            r"(?:(bearer|basic|token|digest|apikey)\s+)?([A-Za-z0-9._~+/-]{12,}=*)"
        ),
        (_authorization,),
    ),
    _Rule(
        Finding("bearer_token", "bearer token"),
        re.compile(r"(?i)(?<![a-z0-9])bearer\s+([A-Za-z0-9._~+/-]{20,}=*)"),
        (_random_group(20),),
    ),
    _Rule(
        Finding("generic_secret", "password, token or API key value"),
        # The value may hold '&' (Xk9&mQ2...) but stops where a query string's next parameter starts
        # (?password=hunter2&next=/home); each alternative takes one character, so no backtracking.
        re.compile(
            rf"(?i){_SECRET_NAME}[\"']?\s*[:=]\s*[\"']?"
            rf"((?:[^\s\"'`,;&]|&(?![A-Za-z_][\w.-]*=)){{{_MIN_GENERIC_LEN},256}})"
        ),
        (_assignment,),
    ),
)

# What a secret-looking value under a secret-named key is reported as (the guard's walk of a body).
GENERIC = _RULES[-1].finding

# What every match of a rule contains, lowercased: a rule none of whose needles is in the text is
# skipped. A substring search is ~50x cheaper than a regex pass that tries every position, and
# most text holds no vendor prefix at all.
_NEEDLES: dict[str, tuple[str, ...]] = {
    "private_key": ("private key",),
    "aws_access_key_id": ("akia", "asia"),
    "aws_secret_access_key": ("aws",),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab_token": ("glpat-",),
    "slack_webhook_url": ("hooks.slack.com",),
    "slack_token": ("xox",),
    "stripe_secret_key": ("k_live_", "k_test_"),
    "anthropic_api_key": ("sk-ant-",),
    "openai_api_key": ("sk-",),
    "google_api_key": ("aiza",),
    "google_oauth_client_secret": ("gocspx-",),
    "twilio_api_key": ("sk",),
    "sendgrid_api_key": ("sg.",),
    "npm_token": ("npm_",),
    "pypi_token": ("pypi-ag",),
    "huggingface_token": ("hf_",),
    "memvault_api_key": ("mv_",),
    "telegram_bot_token": (":a",),
    "discord_bot_token": (".",),
    "mailchimp_api_key": ("-us",),
    "azure_storage_key": ("accountkey=",),
    "square_oauth_secret": ("sq0csp-",),
    "jwt": ("eyj",),
    "url_password": ("://",),
    "authorization_header": ("authorization",),
    "bearer_token": ("bearer",),
    "generic_secret": ("key", "secret", "token", "passw"),
}
_RULES_AND_NEEDLES = tuple((rule, _NEEDLES[rule.finding.kind]) for rule in _RULES)


def scan(text: str) -> Finding | None:
    """The first kind of secret the rules find in `text` as written, or None."""
    lowered = text.lower()
    for rule, needles in _RULES_AND_NEEDLES:
        for needle in needles:
            if needle in lowered:
                break
        else:
            continue
        for m in rule.pattern.finditer(text):
            if all(check(m) for check in rule.checks):
                return rule.finding
    return None
