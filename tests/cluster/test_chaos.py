"""A short seeded subset of the chaos campaign (scripts/chaos.py, issue 13): CHAOS_RUNS runs
(default 2) of CHAOS_MINUTES (default 0.6) with the fixed seed CHAOS_SEED (default 1313) and the
fault kinds CHAOS_FAULTS (default every kind), on their own 3-broker Kafka (replication factor 3,
min.insync.replicas 2) and moto.
No acknowledged event may be lost, no event duplicated, no run may fail otherwise. Skipped with
the reason when java/kcat, the bucket flags or moto are missing; the `disk` fault is left out
(printed) where mounting a tmpfs is refused.
"""

from __future__ import annotations

import faulthandler
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import chaos  # noqa: E402

SEED = int(os.environ.get("CHAOS_SEED", "1313"))
RUNS = int(os.environ.get("CHAOS_RUNS", "2"))
MINUTES = float(os.environ.get("CHAOS_MINUTES", "0.6"))
FAULTS = [f for f in os.environ.get("CHAOS_FAULTS", "kill,pause,broker,s3,disk,bitrot,wipe").split(",") if f]

pytestmark = pytest.mark.needs_cluster

def test_seeded_chaos_runs_lose_and_duplicate_nothing(tmp_path):
    reason = chaos.support()
    if reason:
        pytest.skip(f"chaos: {reason}")
    # Bounded like every test, by the runs' own length plus starts, heals and checks.
    faulthandler.dump_traceback_later(180 + RUNS * (MINUTES * 60 + 240), exit=True)
    results = chaos.run_campaign(seed=SEED, runs=RUNS, minutes=MINUTES, faults=FAULTS, out=tmp_path / "chaos",
                                 log=lambda s: print(s, flush=True))
    summary = chaos.summary_line(results)
    print(summary)
    assert len(results) == RUNS
    assert sum(len(r.faults) for r in results) > 0, "no fault was injected"
    failed = [r for r in results if not r.ok]
    assert not any(r.lost or r.duplicated for r in failed), summary
    assert not failed, (f"{summary}\n" + "\n".join(
        f"seed {r.seed}: {'; '.join(p[:2000] for p in r.problems)}\nreplay: "
        f"{chaos.replay_command(r.seed, MINUTES, 3, 3, FAULTS)}\ntimeline:\n{r.timeline}"
        for r in failed))
