"""Runs every case of cases/*.test (format: README.md) against the real server of the `corpus`
fixture: one pytest test per case, named `<file>:<line>`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import corpus as corpus_lib
from corpus_server import bounded_test, corpus  # noqa: F401 - fixtures

CASES = corpus_lib.load_cases(Path(__file__).resolve().parent / "cases")
# An `xfail` case is expected to fail with a mismatch (CaseMismatch) until the engine can run it;
# strict: once it passes, the test fails until the `xfail` line is removed. A 5xx still fails.


def xfail_mark(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(raises=corpus_lib.CaseMismatch, strict=True, reason=reason)


PARAMS = [pytest.param(c, id=c.id, marks=xfail_mark(c.xfail)) if c.xfail else pytest.param(c, id=c.id)
          for c in CASES]


@pytest.mark.parametrize("case", PARAMS)
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
        elif case.xfail:
            raise corpus_lib.CaseMismatch(f"{case.id} (xfail: {case.xfail})\n{problem}{notes}")
        pytest.fail(f"{case.id} (dataset {case.dataset}, range [{case.start}, {case.end}))\n"
                    f"query:\n  " + case.query.replace("\n", "\n  ") + f"\n{problem}{notes}",
                    pytrace=False)
