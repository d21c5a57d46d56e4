"""Runs every case of cases/*.test (format: README.md) against the real server of the `corpus`
fixture: one pytest test per case, named `<file>:<line>`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import corpus as corpus_lib
from corpus_server import bounded_test, corpus  # noqa: F401 - fixtures

CASES = corpus_lib.load_cases(Path(__file__).resolve().parent / "cases")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_query(corpus, case: corpus_lib.Case) -> None:
    if case.skip:
        pytest.skip(case.skip)
    s = corpus.server
    assert case.dataset in corpus.expected_counts, (
        f"{case.id}: no dataset {case.dataset!r} in data/ (have {sorted(corpus.expected_counts)})")
    body = json.dumps({"queryString": case.query, "start": case.start, "end": case.end, "isLive": False})
    r = s.query_raw(case.query, repo=case.dataset, body=body)
    problem = corpus_lib.check(case, r.status_code, r.text)
    if problem:
        notes = "".join(f"\nsetup: {n}" for n in corpus.setup_notes)
        warnings = r.headers.get("X-Sediment-Warning")
        if warnings:
            notes += f"\nX-Sediment-Warning: {warnings}"
        if r.status_code >= 500:
            notes += f"\n{s.describe(tail=3000)}"
        pytest.fail(f"{case.id} (dataset {case.dataset}, range [{case.start}, {case.end}))\n"
                    f"query:\n  " + case.query.replace("\n", "\n  ") + f"\n{problem}{notes}",
                    pytrace=False)
