"""The randomized soak (soak.py) as a pytest test; not part of the suite: runs only when
CLUSTER_SOAK_SECONDS is set. CLUSTER_SOAK_SEED replays a seed, CLUSTER_SOAK_FAULTS picks the faults
(comma-separated, default kill,pause,restart,broker), CLUSTER_SOAK_NODES the node count.

    CLUSTER_SOAK_SECONDS=600 python3 -m pytest -q -s tests/cluster/test_soak.py
"""

from __future__ import annotations

import faulthandler
import os
import random

import pytest

from soak import DEFAULT_FAULTS, run_soak

SECONDS = float(os.environ.get("CLUSTER_SOAK_SECONDS", "0") or 0)

pytestmark = [pytest.mark.needs_cluster, pytest.mark.soak,
              pytest.mark.skipif(SECONDS <= 0, reason="soak: set CLUSTER_SOAK_SECONDS to run it")]


def test_soak(kafka, tmp_path):
    seed = int(os.environ.get("CLUSTER_SOAK_SEED") or random.SystemRandom().randrange(1, 2**31))
    faults = [f for f in os.environ.get("CLUSTER_SOAK_FAULTS", ",".join(DEFAULT_FAULTS)).split(",") if f]
    nodes = int(os.environ.get("CLUSTER_SOAK_NODES", "3"))
    # Bounded like every test, but by the soak's own length plus room for checks and restarts.
    faulthandler.dump_traceback_later(SECONDS + 900, exit=True)
    print(f"soak seed: {seed}")
    run_soak(kafka, tmp_path / "soak", seconds=SECONDS, seed=seed, nodes=nodes, faults=faults)
