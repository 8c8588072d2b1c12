"""A labelled corpus for the secrets guard: fake secrets of every kind it knows, the same secrets
hidden by simple evasions, and near misses a user may well store (prose about credentials,
placeholders, hashes, ids, base64 of ordinary text, URLs without passwords, code naming env vars).

Everything is generated from one seed at import time, so the corpus is the same on every machine,
and no literal credential shape appears in this file (prefixes are split, bodies are random): push
protection scanning the repository must stay quiet. Plain stdlib: loadtests/guard_corpus.py loads
it by path, also into a virtualenv without memvault to measure another detector on it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass

SEED = 27
ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"


@dataclass(frozen=True)
class Sample:
    text: str
    kind: str | None  # the kind the guard should name; None: a near miss it must accept
    family: str  # "secret:<kind>", "evasion:<how>" or "near:<what>", for the per-family figures

    @property
    def secret(self) -> bool:
        return self.kind is not None


def _rand(rng: random.Random, n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choices(alphabet, k=n))


def _b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def _password(rng: random.Random, n: int, punct: str = "!@#$%^&*-_+=") -> str:
    """A generated password: letters, digits and punctuation, each class at least once."""
    body = _rand(rng, n - 3, ALNUM + punct)
    return rng.choice(string.ascii_uppercase) + body + rng.choice(string.digits) + rng.choice(punct)


# -- one fake token per kind: (token, kind) --------------------------------------------------------

_DASHES = "-" * 5
_PRIVATE = "PRIVATE" + " KEY"


def _pem(rng: random.Random) -> str:
    label = rng.choice(["RSA ", "EC ", "OPENSSH ", "", "ENCRYPTED ", "DSA "]) + _PRIVATE
    raw = base64.b64encode(rng.randbytes(rng.choice([180, 240, 600]))).decode()
    body = "\n".join(raw[i : i + 64] for i in range(0, len(raw), 64))
    return f"{_DASHES}BEGIN {label}{_DASHES}\n{body}\n{_DASHES}END {label}{_DASHES}"


def _jwt(rng: random.Random) -> str:
    header = _b64url({"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"})
    claims = _b64url(
        {"sub": str(uuid.UUID(int=rng.getrandbits(128))), "iat": rng.randrange(1_600_000_000, 1_800_000_000)}
    )
    return f"{header}.{claims}.{_rand(rng, rng.choice([43, 86, 342]), B64URL)}"


# Bare tokens: their shape alone makes them secrets, whatever the text around them.
TOKENS: dict[str, Callable[[random.Random], str]] = {
    "aws_access_key_id": lambda r: (
        r.choice(["AK" + "IA", "AS" + "IA"]) + _rand(r, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    ),
    "github_token": lambda r: r.choice(
        ["gh" + p + "_" + _rand(r, 36) for p in "pousr"] + ["github" + "_pat_" + _rand(r, 22) + "_" + _rand(r, 59)]
    ),
    "gitlab_token": lambda r: "gl" + "pat-" + _rand(r, 20, B64URL),
    "slack_webhook_url": lambda r: (
        "https://hooks.slack"
        + ".com/services/T"
        + _rand(r, 8, UPPER_ALNUM)
        + "/B"
        + _rand(r, 10, UPPER_ALNUM)
        + "/"
        + _rand(r, 24)
    ),
    "slack_token": lambda r: (
        "xo" + "x" + r.choice("bpa") + "-" + "-".join(_rand(r, n, string.digits) for n in (12, 13)) + "-" + _rand(r, 24)
    ),
    "stripe_secret_key": lambda r: r.choice(["sk", "rk"]) + "_" + r.choice(["live", "test"]) + "_" + _rand(r, 99),
    "anthropic_api_key": lambda r: "sk" + "-ant-api03-" + _rand(r, 93, B64URL) + "AA",
    "openai_api_key": lambda r: (
        "sk" + r.choice(["-proj-", "-svcacct-", "-"]) + _rand(r, r.choice([48, 64, 156]), B64URL)
    ),
    "google_api_key": lambda r: "AI" + "za" + _rand(r, 35, B64URL),
    "google_oauth_client_secret": lambda r: "GOC" + "SPX-" + _rand(r, 28, B64URL),
    "twilio_api_key": lambda r: "S" + "K" + _rand(r, 32, HEX),
    "sendgrid_api_key": lambda r: "S" + "G." + _rand(r, 22, B64URL) + "." + _rand(r, 43, B64URL),
    "npm_token": lambda r: "np" + "m_" + _rand(r, 36),
    "pypi_token": lambda r: "py" + "pi-AgEI" + "cHlwaS5vcmc" + _rand(r, 150, B64URL),
    "huggingface_token": lambda r: "h" + "f_" + _rand(r, 34, string.ascii_letters),
    "memvault_api_key": lambda r: "m" + "v_" + _rand(r, 40),
    "jwt": _jwt,
    "private_key": _pem,
    # Kinds detect-secrets knows and the guard did not, before the comparison in docs/benchmarks.md.
    "telegram_bot_token": lambda r: _rand(r, 10, string.digits) + ":AA" + _rand(r, 33, B64URL),
    "discord_bot_token": lambda r: (
        r.choice("MNO") + _rand(r, 23, ALNUM) + "." + _rand(r, 6, B64URL) + "." + _rand(r, 27, B64URL)
    ),
    "mailchimp_api_key": lambda r: _rand(r, 32, HEX) + "-us" + str(r.randrange(1, 21)),
    "azure_storage_key": lambda r: (
        "DefaultEndpointsProtocol=https;AccountName=prodlogs;Account"
        + "Key="
        + base64.b64encode(r.randbytes(64)).decode()
        + ";EndpointSuffix=core.windows.net"
    ),
    "square_oauth_secret": lambda r: "sq0" + "csp-" + _rand(r, 43, B64URL),
}
_NEW_KINDS = (
    "telegram_bot_token",
    "discord_bot_token",
    "mailchimp_api_key",
    "azure_storage_key",
    "square_oauth_secret",
)

# Secrets that need their context: (text, kind).
CONTEXTUAL: dict[str, Callable[[random.Random], str]] = {
    "aws_secret_access_key": lambda r: r.choice(
        [
            "aws_secret_access_key = {}",
            "AWS_SECRET_ACCESS_KEY={}",
            '"aws_secret_key": "{}"',
            "aws_secret_access_key: {}",
        ]
    ).format(_rand(r, 40, ALNUM + "/+")),
    "url_password": lambda r: r.choice(
        [
            "postgres://{u}:{p}@db.internal:5432/app",
            "DATABASE_URL=postgresql://{u}:{p}@10.0.3.7/orders",
            "mysql://{u}:{p}@mysql.prod.example.net/shop",
            "mongodb+srv://{u}:{p}@cluster0.x1y2z.mongodb.net/?retryWrites=true",
            "redis://:{p}@cache.internal:6379/0",
            "amqp://{u}:{p}@rabbit:5672/vhost",
            "git clone https://{u}:{p}@git.example.com/org/repo.git",
            "smtp://{u}:{p}@smtp.mailhost.io:587",
        ]
    ).format(u=r.choice(["app", "svc", "deploy", "admin", "reporter"]), p=_rand(r, r.randrange(12, 28))),
    "authorization_header": lambda r: r.choice(
        [
            "Authorization: Bearer {t}",
            'headers = {{"Authorization": "Bearer {t}"}}',
            "authorization: token {h}",
            "Authorization: Basic {b}",
            "curl -H 'Authorization: Bearer {t}' https://api.example.com/v1/items",
        ]
    ).format(
        t=_rand(r, 40, B64URL),
        h=_rand(r, 40, HEX),
        b=base64.b64encode(f"svc:{_rand(r, 20)}".encode()).decode(),
    ),
    "bearer_token": lambda r: r.choice(["-H 'X-Auth: Bearer {}'", "use bearer {} for the staging api"]).format(
        _rand(r, 40, B64URL)
    ),
    "generic_secret": lambda r: r.choice(
        [
            "password={}",
            'DB_PASSWORD: "{}"',
            "api_key: {}",
            "client_secret='{}'",
            '{{"access_token": "{}"}}',
            "X-Api-Key: {}",
            "const apiKey = '{}';",
            "SECRET_KEY = '{}'",
            "passwd: {}",
            "refresh_token={}",
        ]
    ).format(r.choice([_password(r, 20), _rand(r, 32), _rand(r, 40, HEX), _rand(r, 44, ALNUM + "+/")])),
}

# Sentences a bare token is written into.
CONTEXTS = [
    "{}",
    "my key is {}",
    "export TOKEN={}",
    "use {} for the staging deploy",
    '{{"credential": "{}"}}',
    "creds:\n  value: {}\n",
    "Here you go: `{}` (rotate it after the demo)",
    "curl -H 'X-Key: {}' https://api.example.com/v1/ping",
    "The one for CI is {}. Thanks!",
    "ключ для продакшена: {}",
    "clé de l'API : {}",
    "remember: {} is the prod one",
]


def _plain(rng: random.Random) -> list[Sample]:
    out = []
    for kind, make in TOKENS.items():
        for _ in range(12):
            out.append(Sample(rng.choice(CONTEXTS).format(make(rng)), kind, f"secret:{kind}"))
    for kind, make in CONTEXTUAL.items():
        for _ in range(12):
            out.append(Sample(make(rng), kind, f"secret:{kind}"))
    return out


# -- evasions: the same secrets, hidden --------------------------------------------------------------

_INVISIBLES = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]
_CYRILLIC = {"A": "\u0410", "B": "\u0412", "E": "\u0415", "K": "\u041a", "M": "\u041c", "H": "\u041d"}
_CYRILLIC |= {"O": "\u041e", "P": "\u0420", "C": "\u0421", "T": "\u0422", "X": "\u0425", "a": "\u0430"}
_CYRILLIC |= {"e": "\u0435", "o": "\u043e", "p": "\u0440", "c": "\u0441", "x": "\u0445", "y": "\u0443"}
_PREFIXED = [k for k in TOKENS if k not in ("jwt", "private_key", "slack_webhook_url", *_NEW_KINDS)]


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _evasions(rng: random.Random) -> list[Sample]:
    out: list[Sample] = []

    def add(how: str, text: str, kind: str) -> None:
        out.append(Sample(text, kind, f"evasion:{how}"))

    for _ in range(20):
        kind = rng.choice(_PREFIXED)
        token = TOKENS[kind](rng)
        at = rng.randrange(1, len(token))
        ctx = rng.choice(CONTEXTS)
        add("zero-width", ctx.format(token[:at] + rng.choice(_INVISIBLES) + token[at:]), kind)
        spots = [i for i, c in enumerate(token) if c in _CYRILLIC]
        i = rng.choice(spots[:4])  # the prefix is where a filter looks first
        add("homoglyph", ctx.format(token[:i] + _CYRILLIC[token[i]] + token[i + 1 :]), kind)
        cut = rng.choice([len(token), 4])
        add("fullwidth", ctx.format(_fullwidth(token[:cut]) + token[cut:]), kind)
        add("base64", "decode this: " + base64.b64encode(token.encode()).decode(), kind)
        split = rng.randrange(4, len(token) - 2)
        add("split-by-space", ctx.format(token[:split] + " " + token[split:]), kind)
    for kind in [k for k in _PREFIXED if any(c in TOKENS[k](random.Random(0)) for c in "_-.")]:
        for _ in range(3):
            token = TOKENS[kind](rng)
            encoded = token.replace("_", "%5F").replace("-", "%2D").replace(".", "%2E")
            add("percent-encoded", rng.choice(CONTEXTS).format(encoded), kind)
    for _ in range(10):
        token = _jwt(rng)
        add("escaped-dot", rng.choice(CONTEXTS).format(token.replace(".", "\\.")), "jwt")
        key_id = TOKENS["aws_access_key_id"](rng)
        add("lowercase", rng.choice(CONTEXTS).format(key_id.lower()), "aws_access_key_id")
    for _ in range(10):
        # base64 of a whole line: the context is what makes these secrets.
        kind = rng.choice(list(CONTEXTUAL))
        add("base64-line", base64.b64encode(CONTEXTUAL[kind](rng).encode()).decode(), kind)
    for _ in range(12):
        pw = _password(rng, rng.randrange(16, 25), "#&?!")
        if "#" not in pw and "&" not in pw:
            pw = pw[:5] + rng.choice("#&") + pw[5:]
        add("password-#&-url", f"postgres://app:{pw}@db.internal:5432/app", "url_password")
        add(
            "password-#&-assignment",
            rng.choice(["password={}", "DB_PASSWORD={}", "passwd: {}"]).format(pw),
            "generic_secret",
        )
    return out


# -- near misses ---------------------------------------------------------------------------------------

PROSE = [
    "Rotate the AWS access keys every 90 days and keep them in the vault, never in the repo.",
    "The API key goes in the X-Api-Key header; the token endpoint returns an access_token and a refresh_token.",
    "She forgot her password again and asked IT to reset it; the reset link expires in an hour.",
    "Our Postgres database runs on port 5432 and the replica lags by about two seconds.",
    "Use the Authorization header with a bearer token; Basic auth is disabled for the public API.",
    "GitHub personal access tokens start with ghp_ and fine-grained ones with github_pat_.",
    "AKIA is the prefix of long-lived AWS access key ids and ASIA of temporary ones.",
    "Slack bot tokens start with xoxb- and user tokens with xoxp-.",
    "Stripe secret keys begin with sk_live_ in production and sk_test_ in test mode.",
    "The JWT header is base64url of a JSON object, so it always starts with eyJ.",
    "Never paste a private key into chat; share the public key (ssh-ed25519 ...) instead.",
    "The user prefers the password manager to generate 20-character passwords.",
    "Remind me to revoke the old deploy token after Friday's release.",
    "Token budget: keep max_tokens under 4096 for the summariser.",
    "He keeps the database password in 1Password under 'prod db'.",
    "Secrets are mounted from Kubernetes as files under /var/run/secrets.",
    "The OAuth client secret is shown once when the app is created.",
    "password reset emails go out from no-reply@example.com",
    "The API returns 401 when the token is expired and 403 when the scope is missing.",
    "Set OPENAI_API_KEY in your shell before running the notebook.",
    "Пароль от базы хранится в хранилище секретов, а не в коде.",  # noqa: RUF001
    "Ο κωδικός πρόσβασης αλλάζει κάθε τρεις μήνες.",  # noqa: RUF001
    "APIキーは環境変数に保存してください。トークンの有効期限は１時間です。",
    "密钥每九十天轮换一次，令牌保存在保险库中。",  # noqa: RUF001
    "كلمة المرور يجب أن تكون طويلة وعشوائية",
    "Team offsite 🧑\u200d💻👩\u200d👩\u200d👧 next week; bring laptops.",
    "co\u00adop\u00aderation between the pass\u00adword and token teams",
    "ＡＰＩキー と トークン の 管理 方法 に ついて",
    "sk-learn is a frequent misspelling of scikit-learn",
    "npm install @types/node left-pad lodash.merge",
    "hf_hub_download(repo_id='sentence-transformers/all-MiniLM-L6-v2')",
    "tokenizer=bert-base-uncased, max_tokens: 4096",
    "The regex ^api\\.example\\.com$ matches only the bare host.",
    "Open C:\\Users\\alice\\Documents\\keys\\readme.txt for the rotation checklist.",
    "He said: password: hunter2 (a joke from the old IRC days).",
    "my password is hunter2",
    "password=correct horse battery staple",
    "token=abc123",
    "tls:\n  secret: my-app-tls-secret-2024\n",
    "token=2024-01-15T10:30:00Z",
    "Tr0ub4dor&3 is the password from the xkcd comic, not a real one.",
    "Q&A about API keys: who owns them & who rotates them?",
    "R&D asked for the token & password policy by Monday.",
]

PLACEHOLDERS = [
    "Authorization: Bearer <token>",
    "Authorization: Bearer $GITHUB_TOKEN",
    "Authorization: Bearer eyJhbGciOi...",
    'headers = {"Authorization": f"Bearer {token}"}',
    "client_secret: YOUR_CLIENT_SECRET_HERE",
    "api_key=<your-api-key-goes-here>",
    "postgresql://{user}:{password}@{host}/{db}",
    "mysql://root:***@db.internal/app",
    "redis://:${REDIS_PASSWORD}@cache:6379/0",
    "mongodb+srv://user:<password>@cluster0.mongodb.net",
    "scheme://user:password@host",
    "postgres://postgres:postgres@localhost:5432/app",
    "ftp://anonymous:guest@ftp.example.com/pub",
    "TOKEN=gh" + "p_" + "x" * 36,
    "AWS_ACCESS_KEY_ID=AK" + "IA" + "X" * 16,
    "https://hooks.slack.com/services/T00000000/B00000000/" + "X" * 24,
    "OPENAI_API_KEY=sk-...",
    "STRIPE_SECRET_KEY=sk_live_...",
    "password: ********",
    "api_key: [REDACTED]",
    "secret = 'changeme'",
    "DB_PASSWORD=${DB_PASSWORD:?set it}",
    "token: {{ secrets.GITHUB_TOKEN }}",
    "Authorization: Basic " + base64.b64encode(b"user:password").decode(),
    f"{_DASHES}BEGIN RSA {_PRIVATE}{_DASHES}\n...redacted...\n{_DASHES}END RSA {_PRIVATE}{_DASHES}",
]

CODE = [
    'api_key = os.environ["API_KEY"]',
    'token = os.getenv("GITHUB_TOKEN")',
    "access_token = request.headers.get('Authorization')",
    "OPENAI_API_KEY=process.env.OPENAI_API_KEY",
    "const stripe = new Stripe(process.env.STRIPE_SECRET_KEY);",
    "password = settings.database.password",
    "client_secret=config.oauth.client_secret",
    "export AWS_SECRET_ACCESS_KEY=$(vault kv get -field=secret aws/prod)",
    'secret_key = env("DJANGO_SECRET_KEY")',
    "if not api_key: raise RuntimeError('set MEMVAULT_API_KEY')",
    "token: ${{ secrets.NPM_TOKEN }}",
    "password_hash = argon2.hash(password)",
    "def check_password(user, password): return verify(user.password_hash, password)",
    "kubectl create secret generic db --from-literal=password=$DB_PASSWORD",
    'aws configure set aws_secret_access_key "$AWS_SECRET_ACCESS_KEY"',
    'curl -u "$USER:$TOKEN" https://api.example.com',
    "r'https?://[^\\s/]+\\.example\\.com/.*'",
    "re.compile(r'AKIA[0-9A-Z]{16}')",
    "SELECT id, email FROM users WHERE password_reset_token IS NOT NULL;",
    "grep -rn 'ghp_' . | wc -l",
]


def _near_generated(rng: random.Random) -> list[Sample]:
    out: list[Sample] = []

    def add(what: str, text: str) -> None:
        out.append(Sample(text, None, f"near:{what}"))

    for _ in range(12):
        data = rng.randbytes(32)
        add("hash", f"sha256 {hashlib.sha256(data).hexdigest()}  release.tar.gz")
        add("hash", f"md5: {hashlib.md5(data).hexdigest()}")
        add("hash", f"checksum={hashlib.sha1(data).hexdigest()}")
        add("hash", f"image@sha256:{hashlib.sha256(data + b'i').hexdigest()}")
        add("hash", f"sha512-{base64.b64encode(hashlib.sha512(data).digest()).decode()}")
        add("uuid", f"request {uuid.UUID(int=rng.getrandbits(128), version=4)} failed with 502")
        add("uuid", f"user_id={uuid.UUID(int=rng.getrandbits(128), version=4)}")
        add("uuid", f'{{"session_id": "{uuid.UUID(int=rng.getrandbits(128), version=4)}"}}')
        sha = _rand(rng, 40, HEX)
        add("git-sha", f"fixed in commit {sha}")
        add("git-sha", f"git checkout {sha[:12]} && git cherry-pick {_rand(rng, 7, HEX)}")
        add("git-sha", f"https://github.com/org/repo/commit/{sha}")
        add("trace-id", f"trace_id={_rand(rng, 32, HEX)} span_id={_rand(rng, 16, HEX)}")
        add("trace-id", f"x-request-id: req_{_rand(rng, 24)}")
    sentences = [
        "The meeting moved to Thursday at 3pm.",
        "Remember to water the plants while I'm away.",
        "She likes her coffee black, no sugar.",
        "The quarterly report is due next Friday, ask Dana for the numbers.",
        "We decided to migrate the billing service to the new cluster in March.",
        "User prefers dark mode and short answers.",
        '{"theme": "dark", "language": "en", "notifications": false}',
        "The password policy requires 12 characters and a number.",
    ]
    for s in sentences:
        add("base64-text", f"payload: {base64.b64encode(s.encode()).decode()}")
        add("base64-text", base64.urlsafe_b64encode(s.encode()).decode().rstrip("="))
        add("base64-text", f"data:text/plain;base64,{base64.b64encode((s * 3).encode()).decode()}")
    for _ in range(8):
        add("base64-binary", f"avatar: data:image/png;base64,{base64.b64encode(rng.randbytes(300)).decode()}")
        add("base64-binary", f"nonce={base64.b64encode(rng.randbytes(12)).decode()}")
    urls = [
        "https://example.com/search?page=2&sort=asc",
        "postgres://localhost:5432/app",
        "https://user@example.com/repo",
        "http://[::1]:8080/health",
        "http://localhost:3000?email=alice@example.com",
        "https://api.example.com:8443/#/login?user=bob@example.com",
        "https://mastodon.social/@alice/111222333",
        "ssh://git@github.com:22/org/repo.git",
        "git@github.com:org/repo.git",
        "mailto:alice.smith+memvault@example.co.uk",
        "https://example.com/search?q=api%20key%20rotation&lang=en",
        "https://example.com/login?password=hunter2&next=/home",
        "https://example.com/reset?token=abc123&email=alice%40example.com",
        "https://docs.example.com/auth#bearer-tokens",
        "https://www.google.com/maps/@52.52,13.40,12z",
        "s3://my-bucket/backups/2024-01-15/db.dump",
        "arn:aws:iam::123456789012:role/deploy",
        "https://example.com/a%2Fb/c%3Fd",
        "wss://realtime.example.com:443/socket?vsn=2.0.0",
        "http://host:8080#section@anchor",
    ]
    for u in urls:
        add("url", f"see {u} for details")
    for _ in range(8):
        add("stripe-publishable", "pk_" + "live_" + _rand(rng, 24))
        add("slug", f"secret: {rng.choice(['prod', 'staging', 'dev'])}-db-credentials-{rng.randrange(2020, 2030)}")
        add("id", f"customer cus_{_rand(rng, 14)} paid invoice in_{_rand(rng, 24)}")
        add("id", f"order #{rng.randrange(10**5, 10**6)} shipped, tracking 1Z{_rand(rng, 16, UPPER_ALNUM)}")
        add("percent", f"filename=report%20{rng.randrange(2000, 2030)}%20Q{rng.randrange(1, 5)}.pdf")
        add("pagination", f"next_page_token={_rand(rng, 32)}")
        ssh = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + _rand(rng, 43, ALNUM + "+/")
        add("public-key", f"{ssh} alice@laptop")
        add("version", f"pip install 'torch=={rng.randrange(1, 3)}.{rng.randrange(0, 14)}.0' numpy>=1.26")
    return out


def build(seed: int = SEED) -> list[Sample]:
    """The whole corpus, in a stable order."""
    rng = random.Random(seed)
    near = [
        Sample(t, None, f"near:{fam}")
        for fam, texts in (("prose", PROSE), ("placeholder", PLACEHOLDERS), ("code", CODE))
        for t in texts
    ]
    return _plain(rng) + _evasions(rng) + near + _near_generated(rng)


def evaluate(samples: list[Sample], detect: Callable[[str], object]) -> dict[str, object]:
    """Recall (share of secrets refused), false-refusal rate (share of near misses refused) and
    per-family recall or refusals, for any detector returning something truthy on a secret."""
    hits: dict[str, list[bool]] = {}
    missed: list[Sample] = []
    refused: list[Sample] = []
    for s in samples:
        found = bool(detect(s.text))
        hits.setdefault(s.family, []).append(found)
        if s.secret and not found:
            missed.append(s)
        if not s.secret and found:
            refused.append(s)
    secrets = [s for s in samples if s.secret]
    near = [s for s in samples if not s.secret]
    return {
        "secrets": len(secrets),
        "near_misses": len(near),
        "recall": 1 - len(missed) / len(secrets),
        "false_refusal_rate": len(refused) / len(near),
        "families": {fam: (sum(v), len(v)) for fam, v in hits.items()},
        "missed": missed,
        "refused": refused,
    }
