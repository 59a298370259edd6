"""A chaos run's schedule: a seed and a length in, the operations and faults out (pure).

Contract: ``make(options)`` is a pure function of its ``Options``: the same options give the same
schedule, event for event, which is what ``--seed`` replays.  Every random choice is drawn for
every event whatever the options that filter (``without``, ``only_slots``, ``only_faults``), so
switching a fault kind off, or shrinking to a few jobs or faults, keeps the rest of the schedule
as it was.  What the lab does with a schedule (which process is alive when a fault fires, how long
slurmctld takes) is not reproducible; the schedule is.

Jobs are named by slot (``SLOTS``): the runner gives each slot a real job of that kind, and a new
one when the schedule replaces it.  A fault names its target by a number in [0, 1) (``pick``): the
runner picks among what is alive at that moment, or the operation it is aimed at (``target``).

Keyed episodes are what the key faults need: two or three runs of one key on one job, close
together, their lookups slowed (the gap between a run's look-back and its lease: docs/contract.md
§12, "A key is decided under the job's lease"), one of them frozen (SIGSTOP) or killed in it, and
no other requeue of that job meanwhile, so that RestartCnt can say how many times it was
requeued.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import FrozenSet, List, Optional, Tuple, Union

SLOTS: Tuple[str, ...] = (
    "running", "running", "running", "running", "array-task", "array-task", "array-master",
    "held_user", "held_admin", "pending_begin", "pending_begin", "pending_dep", "completed", "cancelled",
)
MASTER = SLOTS.index("array-master")
# Slots whose jobs run (or ran): keyed episodes pick among these.
RUNNING = tuple(i for i, kind in enumerate(SLOTS) if kind in ("running", "array-task"))
OPS = ("hold", "release", "requeue", "restore", "open", "requeuehold")
OP_WEIGHTS = (20, 18, 26, 12, 10, 6)
# The scontrol calls of each op, as the run's wrapper names them (its fault's verb).
VERBS = {"hold": ("hold",), "release": ("release",), "open": ("release",), "restore": ("update-0",),
         "requeue": ("update-1", "requeue", "update-0"), "requeuehold": ("update-1", "requeuehold", "update-0")}
WRAPPER_FAULTS = {  # what the wrapper does to the first call of its verb, by fault kind
    "scontrol-hang": ("hang", "hang-after"),
    "scontrol-slow": ("slow",),
    "scontrol-die": ("die-before", "die-after", "half"),
}
# Faults at random moments: kind -> (per minute, (shortest, longest) seconds it lasts).
RANDOM_FAULTS = {
    "cli-kill": (2.0, (0.0, 0.0)),
    "cli-stop": (2.0, (1.0, 6.0)),
    "script-kill": (2.0, (0.0, 0.0)),
    "script-stop": (1.5, (1.0, 4.0)),
    "scontrol-kill": (2.0, (0.0, 0.0)),
    "scontrol-stop": (1.5, (1.0, 5.0)),
    "sweep-kill": (1.0, (0.0, 0.0)),
    "slurmctld-kill": (0.6, (0.2, 4.0)),
    "slurmctld-kill-after-ack": (0.6, (0.0, 1.5)),
    "slurmctld-restart": (0.5, (0.2, 3.0)),
    "mariadb-kill": (0.5, (0.5, 4.0)),
    "ledger-lock": (1.0, (1.0, 8.0)),
    "takeover": (0.3, (3.0, 10.0)),
    # Issue 41's faults (docs/testing.md §6.2): a clock stepped (the size, either way: ``pick``
    # chooses the clock and the way), the ledger server's clock off (the offset, either way) for
    # a while, a purge SIGKILLed before it is saved (the delay after it), the StateSaveLocation
    # stalled (how long), another admin's scontrol call on a job (``pick``: which call).
    "clock-step": (1.5, (5.0, 120.0)),
    "mariadb-skew": (0.3, (5.0, 60.0)),
    "slurmctld-kill-after-purge": (0.5, (0.0, 1.5)),
    "saves-stall": (0.8, (1.0, 8.0)),
    "other-admin": (3.0, (0.0, 0.0)),
}
FAULT_KINDS: Tuple[str, ...] = (*RANDOM_FAULTS, *WRAPPER_FAULTS, "squeue-slow")

# Names that stand for several kinds in --without.
GROUPS = {
    # SIGKILL of slurmctld: an acknowledged Requeue=0 lost in the crash is the durability issue's
    # lost flag, not fixed yet (docs/testing.md §6): CI runs without it until it is.
    "durability-13": ("slurmctld-kill", "slurmctld-kill-after-ack"),
    "slurmctld": ("slurmctld-kill", "slurmctld-kill-after-ack", "slurmctld-kill-after-purge", "slurmctld-restart",
                  "takeover"),
    "clocks": ("clock-step", "mariadb-skew"),
    "processes": ("cli-kill", "cli-stop", "script-kill", "script-stop", "scontrol-kill", "scontrol-stop", "sweep-kill"),
    "wrapper": (*WRAPPER_FAULTS, "squeue-slow"),
}


def expand(names: FrozenSet[str]) -> FrozenSet[str]:
    """Fault kinds and group names (``GROUPS``) as fault kinds; an unknown name is a ValueError."""
    kinds: set[str] = set()
    for name in names:
        if name in GROUPS:
            kinds.update(GROUPS[name])
        elif name in FAULT_KINDS:
            kinds.add(name)
        else:
            raise ValueError(f"unknown fault kind {name!r}: one of {', '.join((*FAULT_KINDS, *GROUPS))}")
    return frozenset(kinds)


@dataclass(frozen=True)
class Options:
    seed: int
    minutes: float
    ledger: str = "sqlite"  # sqlite (one host) or mariadb (two hosts, ctl-a and ctl-b)
    without: FrozenSet[str] = frozenset()  # fault kinds switched off (expanded)
    only_slots: Optional[FrozenSet[int]] = None  # shrinking: only operations on these slots
    only_faults: Optional[FrozenSet[int]] = None  # shrinking: only these faults (by number)
    rate: float = 0.8  # operations started per second, on average
    fault_rates: Tuple[Tuple[str, float], ...] = ()  # per minute, instead of RANDOM_FAULTS' own
    episode_every: Tuple[float, float] = (8.0, 18.0)


@dataclass(frozen=True)
class Invoke:
    number: int
    t: float
    caller: str  # cli or library
    host: str  # "" (this host), ctl-a or ctl-b
    op: str
    slots: Tuple[int, ...]
    timeout: float
    key: Optional[str] = None
    retry: int = 0
    settle: bool = False
    one_by_one: bool = False
    parallel: int = 1
    fault: Optional[str] = None  # the wrapper's fault: "VERB:ACTION[:SECONDS]"
    fault_kind: Optional[str] = None
    squeue_only: bool = False  # no slurm-dsl-jobinfo: every lookup through the run's squeue
    squeue_slow: float = 0.0  # seconds each of its squeue calls waits first
    episode: Optional[int] = None


@dataclass(frozen=True)
class Fault:
    number: int
    t: float
    kind: str
    pick: float  # which target among those alive, in [0, 1)
    seconds: float  # how long it lasts (a stop, a lock), or the delay before a restart
    target: Optional[int] = None  # the operation it is aimed at (an episode's), by number


@dataclass(frozen=True)
class Sweep:
    t: float
    host: str


@dataclass(frozen=True)
class Env:
    t: float
    kind: str  # cancel (scancel the slot's job), replace (a fresh job in the slot)
    slot: int


Event = Union[Invoke, Fault, Sweep, Env]


@dataclass
class Schedule:
    options: Options
    events: List[Event] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return self.options.minutes * 60.0

    def faults(self) -> List[Fault]:
        return [e for e in self.events if isinstance(e, Fault)]


def make(options: Options) -> Schedule:
    rng = random.Random(options.seed)
    length = options.minutes * 60.0
    hosts = ("ctl-a", "ctl-b") if options.ledger == "mariadb" else ("",)
    events: List[Event] = []
    counter = [0, 0]  # operations, faults

    def next_number(i: int) -> int:
        counter[i] += 1
        return counter[i]

    # Keyed episodes first: their jobs are kept from other requeues while they last.
    reserved: List[Tuple[float, float, int]] = []
    t = rng.uniform(2.0, 6.0)
    episode = 0
    while t < length - 20.0:
        episode += 1
        slot = rng.choice(RUNNING)
        op = rng.choices(("requeue", "hold", "release"), (75, 15, 10))[0]
        key = f"ep{episode}"
        slow = [rng.uniform(1.0, 2.5) if rng.random() < 0.75 else 0.0 for _ in range(2)]
        hosts_ab = (hosts[0], hosts[-1]) if rng.random() < 0.5 else (hosts[-1], hosts[0])
        members = []
        for i, delay in enumerate((0.0, rng.uniform(0.0, 0.3))):
            members.append(Invoke(
                number=next_number(0), t=t + delay, caller="library" if rng.random() < 0.2 else "cli",
                host=hosts_ab[i], op=op, slots=(slot,), timeout=round(rng.uniform(8.0, 12.0), 1), key=key,
                squeue_only=slow[i] > 0, squeue_slow=round(slow[i], 2), episode=episode))
        if rng.random() < 0.4:  # a third run, later, that retries what the first ones left absent
            members.append(Invoke(
                number=next_number(0), t=t + rng.uniform(3.0, 10.0), caller="cli", host=rng.choice(hosts), op=op,
                slots=(slot,), timeout=12.0, key=key, retry=1, episode=episode))
        events.extend(members)
        stop, kill = rng.random(), rng.random()
        offset, frozen = rng.uniform(0.3, 1.2), rng.uniform(3.0, 8.0)
        if stop < 0.5:  # the second run frozen, very likely between its look-back and its lease
            events.append(Fault(next_number(1), members[1].t + offset, "cli-stop", 0.0, round(frozen, 2),
                                target=members[1].number))
        kill_at = rng.uniform(0.2, 1.5)
        if kill < 0.2:
            events.append(Fault(next_number(1), members[0].t + kill_at, "cli-kill", 0.0, 0.0,
                                target=members[0].number))
        reserved.append((t - 1.0, t + 30.0, slot))
        t += rng.uniform(*options.episode_every)

    # Random operations.
    t = rng.expovariate(options.rate)
    while t < length:
        op = rng.choices(OPS, OP_WEIGHTS)[0]
        bulk = rng.random() < 0.35
        if not bulk and rng.random() < 0.03:
            slots: Tuple[int, ...] = (MASTER,)  # an array's own JobId: refused, nothing run (§9.4)
        else:
            pool = [i for i in range(len(SLOTS)) if i != MASTER]
            slots = tuple(rng.sample(pool, rng.randint(2, 5) if bulk else 1))
        keyed, retry_draw, settle_draw = rng.random(), rng.random(), rng.random()
        retry = rng.choice((1, 2)) if retry_draw < 0.15 else 0
        settle = retry == 0 and settle_draw < 0.12
        timeout = round(rng.uniform(8.0, 14.0) if (retry or settle) else rng.uniform(3.0, 10.0), 1)
        fault_draw, fault_kind = rng.random(), rng.choice(tuple(WRAPPER_FAULTS))
        action = rng.choice(WRAPPER_FAULTS[fault_kind])
        verb = rng.choice(VERBS[op])
        slow_draw, slow_s = rng.random(), round(rng.uniform(0.5, 3.0), 2)
        one_by_one, parallel = rng.random() < 0.15, rng.randint(1, 3)
        caller, host = ("library" if rng.random() < 0.2 else "cli"), rng.choice(hosts)
        squeue_only = rng.random() < 0.3
        fault: Optional[str] = None
        kind: Optional[str] = None
        if fault_draw < 0.15 and not (action == "half" and len(slots) < 2):
            seconds = f":{rng.uniform(0.5, 4.0):.2f}" if action == "slow" else ""
            fault, kind = f"{verb}:{action}{seconds}", fault_kind
        if op in ("requeue", "requeuehold") and any(lo <= t <= hi and s in slots for lo, hi, s in reserved):
            slots = tuple(s for s in slots if not any(lo <= t <= hi and s == r for lo, hi, r in reserved))
        if slots:
            events.append(Invoke(
                number=next_number(0), t=t, caller=caller, host=host, op=op, slots=slots, timeout=timeout,
                key=f"k{int(keyed * 40) % 6}" if keyed < 0.25 else None, retry=retry, settle=settle,
                one_by_one=one_by_one and len(slots) > 1, parallel=parallel, fault=fault, fault_kind=kind,
                squeue_only=squeue_only or slow_draw < 0.1, squeue_slow=slow_s if slow_draw < 0.1 else 0.0))
        t += rng.expovariate(options.rate)

    # Random faults, kind by kind, each kind from a generator of its own: another rate for one kind
    # leaves the others' moments as they were.
    rates = dict(options.fault_rates)
    for kind, (per_minute, (shortest, longest)) in RANDOM_FAULTS.items():
        per_minute = rates.get(kind, per_minute)
        own = random.Random(f"{options.seed}:{kind}")
        t = own.expovariate(per_minute / 60.0) if per_minute > 0 else length
        while t < length:
            events.append(Fault(next_number(1), t, kind, own.random(), round(own.uniform(shortest, longest), 2)))
            t += own.expovariate(per_minute / 60.0)

    # Sweeps beside it all, and the jobs' own lives.
    own = random.Random(f"{options.seed}:sweeps")
    t = own.uniform(3.0, 8.0)
    while t < length:
        events.append(Sweep(t, own.choice(hosts)))
        t += own.uniform(4.0, 10.0)
    own = random.Random(f"{options.seed}:jobs")
    t = own.uniform(30.0, 60.0)
    while t < length:
        events.append(Env(t, "cancel" if own.random() < 0.4 else "replace", own.choice(
            [i for i in range(len(SLOTS)) if i != MASTER])))
        t += own.uniform(30.0, 60.0)

    return Schedule(options, sorted(_kept(events, options), key=lambda e: e.t))


def _kept(events: List[Event], options: Options) -> List[Event]:
    """The events the options keep: fault kinds switched off go (an operation keeps running, its
    wrapper fault dropped), and a shrunk schedule keeps only its slots and faults."""
    kept: List[Event] = []
    dropped_ops = set()
    for e in events:
        if isinstance(e, Invoke):
            if e.fault_kind in options.without:
                e = replace(e, fault=None, fault_kind=None)
            if "squeue-slow" in options.without and e.squeue_slow:
                e = replace(e, squeue_slow=0.0)
            if options.only_slots is not None:
                slots = tuple(s for s in e.slots if s in options.only_slots)
                if not slots:
                    dropped_ops.add(e.number)
                    continue
                e = replace(e, slots=slots)
            kept.append(e)
        elif isinstance(e, Fault):
            if e.kind in options.without or (options.only_faults is not None and e.number not in options.only_faults):
                continue
            kept.append(e)
        elif isinstance(e, Env):
            if options.only_slots is None or e.slot in options.only_slots:
                kept.append(e)
        else:
            kept.append(e)
    return [e for e in kept if not (isinstance(e, Fault) and e.target in dropped_ops)]
