"""The secrets guard on its labelled corpus (tests/guard/corpus.py) and on a clock: recall,
false-refusal rate and per-family figures, then the time per call on a 32 KB prose input, on
adversarial 32 KB inputs and on short strings, for the working tree's guard beside an older one
(default: main's) loaded from git in the same process, so the ratio is measured in one run.

    python loadtests/guard_corpus.py                    # working tree beside main
    python loadtests/guard_corpus.py --before HEAD~3    # beside another commit
    python loadtests/guard_corpus.py --misses           # list what is missed or wrongly refused
    python loadtests/guard_corpus.py --detect-secrets vendor   # also detect-secrets, when installed

Needs only the standard library and memvault's guard (itself stdlib-only), so it also runs in a
throwaway virtualenv that has detect-secrets: PYTHONPATH=services <venv>/bin/python loadtests/...
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
# LoCoMo (CC BY-NC 4.0) is read in place when present, never copied: ordinary conversation prose.
LOCOMO = [p / "shared" / "datasets" / "locomo" / "locomo10.json" for p in (ROOT.parent, ROOT.parent.parent)]
sys.path.insert(0, str(ROOT / "services"))


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


def _memvault_modules() -> dict[str, ModuleType]:
    return {n: m for n, m in sys.modules.items() if n == "memvault" or n.startswith("memvault.")}


def _guard_at(ref: str) -> ModuleType:
    """`memvault.guard` as it was at `ref` (one module, or the package it became), imported from a
    copy of its files while the working tree's memvault modules are set aside, so that neither
    version picks up the other's rules."""
    root = Path(tempfile.mkdtemp(prefix="memvault-guard-"))
    # Removed when the run ends, not here: the old guard may still import a module of it lazily.
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    for name in _git("ls-tree", "-r", "--name-only", ref, "services/memvault/").split():
        rel = name.removeprefix("services/")
        if rel in ("memvault/__init__.py", "memvault/errors.py", "memvault/guard.py") or rel.startswith(
            "memvault/guard/"
        ):
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_git("show", f"{ref}:{name}"))
    own = _memvault_modules()
    for name in own:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        return importlib.import_module("memvault.guard")
    finally:
        sys.path.remove(str(root))
        for name in _memvault_modules():
            del sys.modules[name]
        sys.modules.update(own)


# detect-secrets' rules for named vendors, without its entropy, keyword and public-IP heuristics
# (which refuse most near misses: hashes, ids, base64 of prose).
DS_VENDOR_PLUGINS = [
    "ArtifactoryDetector",
    "AWSKeyDetector",
    "AzureStorageKeyDetector",
    "BasicAuthDetector",
    "CloudantDetector",
    "DiscordBotTokenDetector",
    "GitHubTokenDetector",
    "GitLabTokenDetector",
    "IbmCloudIamDetector",
    "IbmCosHmacDetector",
    "JwtTokenDetector",
    "MailchimpDetector",
    "NpmDetector",
    "OpenAIDetector",
    "PrivateKeyDetector",
    "PypiTokenDetector",
    "SendGridDetector",
    "SlackDetector",
    "SoftlayerDetector",
    "SquareOAuthDetector",
    "StripeDetector",
    "TelegramBotTokenDetector",
    "TwilioKeyDetector",
]


def _detect_secrets(vendor_only: bool) -> Callable[[str], bool]:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings, transient_settings

    # Process-wide settings, entered once for the whole run (entering them per call costs more than
    # the scan); the closure keeps the context open: collected, it would reset them.
    plugins = {"plugins_used": [{"name": name} for name in DS_VENDOR_PLUGINS]}
    settings = transient_settings(plugins) if vendor_only else default_settings()
    settings.__enter__()

    def detect(text: str, _settings: object = settings) -> bool:
        return any(True for line in text.splitlines() for _ in scan_line(line))

    return detect


def _per_call_us(detectors: list[Callable[[str], object]], texts: list[str], repeat: int) -> list[float]:
    """Microseconds per call for each detector, the best of `repeat` passes over `texts`; the passes
    alternate between detectors so that a busy machine slows them alike."""
    best = [float("inf")] * len(detectors)
    rounds = max(1, 100_000 // sum(len(t) for t in texts))  # ~100 KB of text per timed pass
    for _ in range(repeat):
        for i, detect in enumerate(detectors):
            start = time.perf_counter()
            for _ in range(rounds):
                for t in texts:
                    detect(t)
            best[i] = min(best[i], (time.perf_counter() - start) / rounds)
    return [b / len(texts) * 1e6 for b in best]


def _timing_inputs(corpus: list, near_texts: list[str]) -> dict[str, list[str]]:
    prose = " ".join(near_texts)
    while len(prose) < 32 * 1024:
        prose += " " + prose
    prose = prose[: 32 * 1024]
    russian = ("Пароль от базы хранится в хранилище секретов, а не в коде. " * 600)[: 32 * 1024]  # noqa: RUF001
    english = " ".join(t for t in near_texts if t.isascii() and " " in t and "%" not in t and "\\" not in t)
    notes = (english * (1 + 32 * 1024 // len(english)))[: 32 * 1024]
    inputs: dict[str, list[str]] = {}
    locomo = next((p for p in LOCOMO if p.exists()), None)
    if locomo:
        turns = [
            t["text"]
            for conv in json.loads(locomo.read_text())
            for k, v in conv["conversation"].items()
            if k.startswith("session_") and isinstance(v, list)
            for t in v
        ]
        inputs["32 KB conversation (LoCoMo turns, read in place)"] = [" ".join(turns)[: 32 * 1024]]
    return inputs | {
        "32 KB English notes (the corpus's ASCII prose, placeholders, code)": [notes],
        "128 KB of the same (linear: ~4x the row above)": [(notes * 4)],
        "32 KB prose (all the corpus's near misses: non-ASCII, escapes, base64)": [prose],
        "32 KB prose + one token at the end": [
            prose + " " + next(s.text for s in corpus if s.family == "secret:github_token")
        ],
        "32 KB Cyrillic prose (normalised path)": [russian],
        "32 KB 'password=' repeated": [("password=" * 4000)[: 32 * 1024]],
        "32 KB 'a://b:' repeated": [("a://b:" * 6000)[: 32 * 1024]],
        "32 KB base64 of text": [__import__("base64").b64encode((prose * 2)[:24000].encode()).decode()],
        "32 KB one base64 run of random bytes": [
            __import__("base64").b64encode(__import__("os").urandom(24000)).decode()
        ],
        "32 KB 'AKIA 1 ' repeated": [("AK" + "IA 1 " * 6000)[: 32 * 1024]],
        "32 KB '%41' repeated": [("%41" * 11000)[: 32 * 1024]],
        "32 KB '\\\\.' repeated": [("\\." * 17000)[: 32 * 1024]],
        "short strings (the corpus's near misses, 10-300 chars)": [t for t in near_texts if len(t) <= 300],
        "short strings (names and ids, under 40 chars)": [
            "alice",
            "user-42",
            "session_2024_01_15",
            "conv-26",
            "agent.planner",
            "default",
            "b2f1c0de-0000-4000-8000-000000000001",
            "Ordinary note about lunch",
        ],
    }


def _report(name: str, result: dict) -> None:
    print(
        f"{name}: recall {result['recall']:.3f} ({result['secrets'] - len(result['missed'])}/{result['secrets']}), "
        f"false refusals {result['false_refusal_rate']:.3f} ({len(result['refused'])}/{result['near_misses']})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="main", help="git ref of the guard to compare with (default: main)")
    parser.add_argument("--misses", action="store_true", help="list missed secrets and refused near misses")
    parser.add_argument(
        "--detect-secrets",
        choices=["default", "vendor"],
        help="also measure detect-secrets (if installed): all its default plugins, or its vendor rules only",
    )
    parser.add_argument("--repeat", type=int, default=5, help="timing passes per input (best is kept)")
    args = parser.parse_args()

    corpus_mod = _load("guard_corpus_data", ROOT / "tests" / "guard" / "corpus.py")
    corpus = corpus_mod.build()
    after = importlib.import_module("memvault.guard")
    before = _guard_at(args.before)
    detectors: dict[str, Callable[[str], object]] = {
        f"before ({args.before})": before.find_secret,
        "after (working tree)": after.find_secret,
    }
    if args.detect_secrets:
        ds = _detect_secrets(vendor_only=args.detect_secrets == "vendor")
        detectors[f"detect-secrets 1.5, {args.detect_secrets} plugins"] = ds
        detectors["after or detect-secrets"] = lambda t: after.find_secret(t) or ds(t)

    secrets = sum(s.secret for s in corpus)
    print(f"corpus: {len(corpus)} samples, {secrets} secrets, {len(corpus) - secrets} near misses\n")
    results = {}
    for name, detect in detectors.items():
        results[name] = corpus_mod.evaluate(corpus, detect)
        _report(name, results[name])

    print("\n| family | n | " + " | ".join(detectors) + " |")
    print("|---|---|" + "---|" * len(detectors))
    for fam in sorted(results[next(iter(results))]["families"]):
        n = results[next(iter(results))]["families"][fam][1]
        cells = [str(r["families"][fam][0]) for r in results.values()]
        print(f"| {fam} | {n} | " + " | ".join(cells) + " |")
    print("(cells: secrets refused, or near misses wrongly refused)")

    if args.misses:
        for name, result in results.items():
            print(f"\n## {name}")
            for s in result["missed"]:
                print(f"  missed   {s.family:32} {s.text[:90]!r}")
            for s in result["refused"]:
                print(f"  refused  {s.family:32} {s.text[:90]!r}")

    near_texts = [s.text for s in corpus if not s.secret]
    print("\n| input | " + " | ".join(f"{n} µs/call" for n in detectors) + " | after / before |")
    print("|---|" + "---|" * (len(detectors) + 1))
    for label, texts in _timing_inputs(corpus, near_texts).items():
        times = _per_call_us(list(detectors.values()), texts, args.repeat)
        ratio = times[1] / times[0]
        print(f"| {label} | " + " | ".join(f"{t:,.1f}" for t in times) + f" | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
