"""Seeded schedules of slurm-dsl's own commands in the simulated world (tests/sim/schedule.py).

Each CI run plays a fresh range of seeds (``--sim-seed`` fixes the first, ``--sim-steps`` the
length); a violation prints the replay command.  And the simulator must find an old bug planted
again: durability-13 (a requeue's cleared object not kept watched until its clear is saved).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurm_dsl.core import ledger_rules
from tests.sim.__main__ import PLANTS
from tests.sim.schedule import first_violation, play

SEEDS = 24
STEPS = 60


def test_schedules_keep_every_flag(tmp_path: Path, sim_seed: int, sim_steps: int) -> None:
    for seed in range(sim_seed, sim_seed + SEEDS):
        played = play(tmp_path, seed, sim_steps)
        assert played.violations == [], f"{played.violations[:3]}; replay: {played.replay()}"


def test_pair_schedules_keep_every_flag(tmp_path: Path, sim_seed: int, sim_steps: int) -> None:
    """A 24.11 primary/backup pair: takeovers, hand-backs holding requests, applied later."""
    for seed in range(sim_seed, sim_seed + SEEDS // 3):
        played = play(tmp_path, seed, sim_steps, pair=True)
        assert played.violations == [], f"{played.violations[:3]}; replay: {played.replay(pair=True)}"


def test_the_simulator_finds_durability_13_planted_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With Rule L8 dropped (a clear by a call ends the watch at once), a schedule loses a flag."""
    monkeypatch.setattr(ledger_rules, "cleared_by_a_call", lambda outcome: False)
    found = first_violation(tmp_path, range(1, 41), STEPS)
    assert found is not None and "lost-flag" in found.violations[0], "not found in 40 schedules"


def test_the_simulator_finds_a_clear_taken_for_saved_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With Rule D2 dropped (no save needs to be seen before a clear counts as saved), a sweep
    clears an object whose clear slurmctld has not saved: a lost flag."""
    from slurm_dsl.run import durable, looks

    for module in (looks, durable):
        monkeypatch.setattr(module, "looks_needed", lambda *args, **kwargs: 0)
    found = first_violation(tmp_path, range(1, 41), STEPS)
    assert found is not None, "not found in 40 schedules"
    assert found.violations[0].startswith(("lost-flag", "durable-not-saved")), found.violations[0]


def test_the_simulator_finds_keys_acting_twice_planted_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a keyed job no longer decided again under its lease (the fix of keys acting twice under
    concurrency reverted), a run frozen before its lease acts after the key's other run did."""
    from slurm_dsl.run import tracked

    monkeypatch.setattr(tracked, "not_to_act", lambda *args, **kwargs: {})
    found = first_violation(tmp_path, range(8, 11), STEPS)  # seed 8: its first alone
    assert found is not None and "key-acted-twice" in found.violations[0], "not found in 40 schedules"


def test_the_simulator_finds_a_requeue_without_its_intent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With Rule L1 dropped (no may_be_set committed before a requeue's script), a command killed
    after its call 1 leaves the flag set and the object clear."""
    monkeypatch.setattr(ledger_rules, "intent", lambda op, nonce: None)
    found = first_violation(tmp_path, range(1, 41), STEPS)
    assert found is not None and "lost-flag" in found.violations[0], "not found in 40 schedules"


def test_the_simulator_finds_durables_extra_call_planted_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The durability issue's finding 4: --durable's wait makes the op's last call again with no
    lease, intent or row; the unleased-call check sees every scontrol call, a script's or not."""
    PLANTS["durable-again"](monkeypatch.setattr)
    found = first_violation(tmp_path, range(3, 6), STEPS)
    assert found is not None and found.violations[0].startswith("unleased-call"), found and found.violations[0]


def test_the_simulator_finds_one_save_taken_as_proof(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rule D2 turned (one save seen replaced after the look taken as proof): on a large cluster,
    whose save under way at the ack does not carry the change, a --durable row said saved is not."""
    PLANTS["one-save"](monkeypatch.setattr)
    found = first_violation(tmp_path, range(12, 15), STEPS)  # seed 12: its first alone
    assert found is not None, "not found"
    assert found.violations[0].startswith(("durable-not-saved", "lost-flag")), found.violations[0]


def test_the_simulator_finds_a_purge_taken_as_saved_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The durability issue's finding 3 (Rule D8 dropped: "gone" read before the purge is saved):
    the purge move times the purge to a sweep's lookup and kills slurmctld before its save."""
    PLANTS["gone-at-once"](monkeypatch.setattr)
    found = first_violation(tmp_path, range(1, 4), STEPS)
    assert found is not None and "lost-flag" in found.violations[0], found and found.violations[0]


def test_the_simulator_finds_a_retry_that_never_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Contract §12 step 4 dropped (``--retry`` settles, never runs again): slurmctld killed as a
    keyed run's script starts and restarted after its call failed, the job settled absent and not
    run again within the deadline."""
    PLANTS["no-retry"](monkeypatch.setattr)
    found = first_violation(tmp_path, range(22, 25), STEPS)  # seed 22: its first alone
    assert found is not None and found.violations[0].startswith("retry-not-run"), found and found.violations[0]


def test_the_simulator_finds_a_clear_bit_its_calls_belie(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Contract §7 loosened (any ``Requeue=0`` call taken as clearing): slurmctld killed between a
    requeue's calls, its call 3 fails, and the row says its bit clear."""
    PLANTS["clear-trusted"](monkeypatch.setattr)
    found = first_violation(tmp_path, range(38, 41), STEPS)  # seed 38: its first alone
    assert found is not None and "bit clear" in found.violations[0], found and found.violations[0]


def test_the_simulator_finds_absent_read_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rules S6 and S13 dropped (absent read from any lookup after the end, no settle delay): an op
    TERMed while its request waits for slurmctld's job lock, a sweep at once reads absent, and the
    request is applied after that lookup (settle-delay.md §2)."""
    PLANTS["absent-at-once"](monkeypatch.setattr)
    found = first_violation(tmp_path, range(13, 16), STEPS)  # seed 13: its first alone
    assert found is not None and found.violations[0].startswith("false-verdict"), found and found.violations[0]


def test_a_baseline_a_crash_undid_no_longer_makes_a_key_act_twice(tmp_path: Path) -> None:
    """The schedule of the hour's run that found a key acting twice (contract §12 Rule 16, "a
    baseline a crash undid"): an unsaved requeue in the keyed requeue's baseline, lost in a
    takeover, its own requeue applied after it.  Now the verdict is undecidable, and the key's
    next run acts no more."""
    played = play(tmp_path, 501307, 42, pair=True)
    assert played.violations == [] and played.known == [], played


def test_the_simulator_finds_a_baseline_a_crash_undid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rule 16 dropped (a requeue at its baseline's RestartCnt absent whatever controller gave the
    baseline): the same schedule has the key act twice."""
    PLANTS["boot-blind"](monkeypatch.setattr)
    played = play(tmp_path, 501307, 42, pair=True)
    assert played.violations and {v.split(":")[0] for v in played.violations} == {"key-acted-twice"}, played
