"""The guard on its labelled corpus (tests/guard/corpus.py): a recall floor, a false-refusal ceiling,
and every kind it knows caught and named in plain form. The figures are printed (pytest -s); the
same figures beside main's guard and detect-secrets come from `python loadtests/guard_corpus.py`.
"""

from __future__ import annotations

import pytest

from memvault.guard import find_secret
from tests.guard.corpus import Sample, build, evaluate

RECALL_FLOOR = 0.98  # measured 1.000 (529/529); main 0.599
FALSE_REFUSAL_CEILING = 0.01  # measured 0.000 (0/368); main 0.000


@pytest.fixture(scope="module")
def corpus() -> list[Sample]:
    return build()


def test_recall_and_false_refusals(corpus: list[Sample]) -> None:
    result = evaluate(corpus, find_secret)
    print(
        f"\nsecrets guard on {len(corpus)} samples: recall {result['recall']:.3f} "
        f"({result['secrets'] - len(result['missed'])}/{result['secrets']}), false-refusal rate "
        f"{result['false_refusal_rate']:.3f} ({len(result['refused'])}/{result['near_misses']})"
    )
    for sample in result["missed"]:
        print(f"  missed  {sample.family}: {sample.text[:80]!r}")
    for sample in result["refused"]:
        print(f"  refused {sample.family}: {sample.text[:80]!r}")
    assert result["secrets"] >= 400 and result["near_misses"] >= 300
    assert result["recall"] >= RECALL_FLOOR
    assert result["false_refusal_rate"] <= FALSE_REFUSAL_CEILING


def test_every_kind_in_plain_form_is_caught_and_named(corpus: list[Sample]) -> None:
    plain = [s for s in corpus if s.family.startswith("secret:")]
    assert {s.kind for s in plain} >= {"aws_access_key_id", "github_token", "private_key", "jwt", "url_password"}
    wrong = [
        (s.kind, finding, s.text[:60])
        for s in plain
        if (finding := find_secret(s.text)) is None or finding.kind != s.kind
    ]
    assert wrong == []


def test_every_evasion_family_mostly_caught(corpus: list[Sample]) -> None:
    families = evaluate(corpus, find_secret)["families"]
    evasions = {fam: hit / n for fam, (hit, n) in families.items() if fam.startswith("evasion:")}
    assert len(evasions) >= 10
    assert {fam: rate for fam, rate in evasions.items() if rate < 0.9} == {}
