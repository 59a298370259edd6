"""The chaos checker: a history in, the violations out (docs/testing.md §6).

Strategy: written from the contract's words (each invariant below names the section of
docs/contract.md it comes from; §13 is the durability section, quoted in docs/testing.md §6.4
until it is in the contract), never from the product's code, and it imports nothing of ``slurm_dsl``
(a test says so): what the product reports (its rows, exit statuses, ledger dump) is set against
what the lab shows (the jobs' records, read with ``squeue -O``), the scontrol calls that were
really made (logged by the run's scontrol wrapper) and the faults injected.  It is pure: lines
in, a ``Report`` out, no clock, file or process.

What "the record contradicts it" means.  A row's result is a claim about a field of the job's
record (the effect table of §12): a hold ``ok`` says PriorityLong is 0 after it; a release or
open ``ok`` that it is above 0; a requeue ``ok`` that RestartCnt went up, and a requeue whose
call 3 succeeded that the flag is 0; a restore ``ok`` that the flag is 0; ``bit_set`` that the
flag is 1.  ``rejected``, ``not_found``, ``expired``, ``not_run`` (and a settled ``absent``) say
the op did nothing: the field did not move the way the op moves it.  A claim is checked against
the first record looked up after the command ended (and, for "did nothing" and "went up", the
last one before it started) only when nothing else could have moved that field in between:
no scontrol call of another command or sweep on that job and field whose span (start to end,
plus ``LATE`` for a request applied just after its client died) meets the window, and no
controller crash or takeover in it (§13: an acknowledged change lost in a crash is not a false
``ok``).  Otherwise the claim is counted as not checkable, never as a violation.

The invariants, by ``Violation.kind``:

- ``false-claim``: a result (or settled effect) the record contradicts (§7, §12, above).
- ``lost-flag``: once the schedule is quiet and a sweep has run, a job at Requeue=1 whose ledger
  object is clear or missing (§9: "nothing is ever lost"; §13: "No object is cleared before its
  clear is saved"), unless the last call that set its flag was another admin's (a call of no
  command of the run: the other-admin fault): that flag is the admin's, not slurm-dsl's.  One
  that fits §13's window (its flag's ``Requeue=0`` acknowledged, then slurmctld SIGKILLed within
  5 s) says so (``known``: ``durability-13``).
- ``key-acted-twice``: a run of a key (or a command's own retry) made the op's first call on a job
  after another run of that key had its effect acknowledged on that job (§12: "if one is ok, or
  settles as present, the job is not acted on again"; "never both act on a job"), no crash in
  between; and, for requeue, RestartCnt up by two or more over a key's runs with no other
  requeue of the job in between (§12: "no job is ever requeued twice by one command and its
  retries").
- ``deadline``: an operation command that ended later than its timeout + 16 s (+ its start-up
  tolerance and any time it was frozen by SIGSTOP), with the ledger answering throughout
  (§10.0); or an op's scontrol call that started after the deadline (§2, §10.0), or, where its
  runner was frozen (cli-stop) at the deadline and so sent no TERM, after the backstop's bound.
- ``traceback``: a Python traceback on any command's stderr (§10: diagnostics are one line,
  ``slurm-dsl: <message>``; §6: the reader never raises).
- ``usage-ran``: a command that exited 2 made an op's call (§10: "2 is a usage error ... nothing
  ran").
- ``exit-status``: an operation command's exit status that is not its worst row's (§10, §12).
- ``unsettled``: an unknown or unfinished operation with no verdict after two sweeps past the
  settle delay and CONTROL_TIMEOUT plus MessageTimeout (counted, for the final sweeps' own host,
  from the first one's end), the schedule quiet (§12: "Every sweep settles the unknown operations"), and past
  every time the ledger's clock wrote while it stood ahead (§13.7: the times decide where a run
  cannot be told over); not for a job gone in the end (§13.2: gone once two saves are seen after
  the purge, which the run does not watch).
- ``ledger-lost``: the ledger could not be read back once the schedule was quiet, or a command
  found it corrupt (SQLite's ``database disk image is malformed``): every flag it tracked is
  then untracked (§9: "nothing is ever lost"; §9.1: a committed intent survives a power cut).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

OVERRUN = 16.0  # §10.0: a command ends at most SECONDS + 16 s after it starts
LATE = 1.0  # seconds a request may be applied after its client died (settle-delay.md §2: 0.1 s seen)
HANDBACK = 35.0  # a call made around a controller restart or takeover may be applied this late (§13)
KILLED_TAIL = 5.0  # a killed command's calls are gone by its deadline + kill grace + guard margin
DURABILITY_WINDOW = 5.0  # §13: SAVE_MAX_WAIT
UNANSWERED_WAIT = 30.0 + 10.0  # §13.6: CONTROL_TIMEOUT plus MessageTimeout (its default), before absent
CRASHES = frozenset({"slurmctld-kill", "slurmctld-kill-after-ack", "slurmctld-kill-after-purge", "takeover"})
CONTROLLER_EVENTS = CRASHES | {"slurmctld-restart"}
LEDGER_OUTAGES = frozenset({"mariadb-kill", "mariadb-skew"})  # mariadb-skew: its two restarts
EXIT_OF_RESULT = {"ok": 0, "rejected": 10, "not_found": 11, "expired": 12, "not_run": 13, "bit_set": 14, "unknown": 15}
# The op's first call (acting) and the call whose acknowledgement is its effect (§1).
FIRST_ACTION = {"hold": "hold", "release": "release", "open": "release", "requeue": "requeue=1", "restore": "requeue=0",
                "requeuehold": "requeue=1"}
# A requeuehold's call 2 is the requeue action: it writes what a requeue does, and holds (§1).
EFFECT_ACTION = {"hold": "hold", "release": "release", "open": "release", "requeue": "requeue", "restore": "requeue=0",
                 "requeuehold": "requeue"}
REQUEUES = frozenset({"requeue", "requeuehold"})  # the ops of three calls, the Requeue flag set for call 2
OP_ACTIONS = frozenset({"hold", "release", "requeue", "requeue=1", "requeue=0"})
_REFUSAL = re.compile(r"(?P<msg>.+) for job (?P<id>[0-9]+)\Z")
_SUSPEND = re.compile(r"slurm_suspend error(:.*)?\Z")
CORRUPT = ("database disk image is malformed", "file is not a database")


@dataclass(frozen=True)
class Violation:
    kind: str
    message: str
    lines: Tuple[int, ...]
    job: Optional[str] = None
    known: Optional[str] = None


@dataclass
class Report:
    violations: List[Violation]
    figures: Dict[str, Any]


@dataclass
class Invocation:
    id: str
    kind: str  # cli, library, sweep
    op: str
    jobs: Tuple[str, ...]
    key: Optional[str]
    retry: int
    timeout: Optional[float]
    deadline: Optional[float]
    start: float
    phase: str
    line: int
    host: str = ""
    end: Optional[float] = None
    exit: Optional[int] = None
    rows: List[Dict[str, Any]] = field(default_factory=list)
    stderr: str = ""
    end_line: Optional[int] = None
    select: bool = False  # its jobs named by selector (--name of their names), not by id

    @property
    def killed(self) -> bool:
        return self.exit is None or self.exit < 0

    def end_eff(self) -> float:
        """When nothing of it can act any more: its end, or for one that was killed (or never
        seen to end), its deadline past the kill grace and guard margin."""
        end = self.end if self.end is not None else self.start
        if not self.killed:
            return end
        return max(end, self.start + (self.timeout or 0.0) + KILLED_TAIL)


@dataclass(frozen=True)
class Call:
    inv: str
    action: str  # hold, release, requeue, requeue=1, requeue=0, other
    ids: Tuple[str, ...]
    fields: frozenset[str]
    t0: float
    t1: Optional[float]
    exit: Optional[int]
    acked: frozenset[str]
    line: int


@dataclass(frozen=True)
class Seen:
    t0: float
    t1: float
    record: Optional[Mapping[str, Any]]  # None: slurmctld does not know the job
    line: int


@dataclass(frozen=True)
class Fault:
    id: str
    kind: str
    t: float
    end: Optional[float]
    target: Optional[str]
    line: int


def parse_call(argv: Sequence[str]) -> Tuple[str, Tuple[str, ...], frozenset[str]]:
    """What one scontrol call does (§1): its action, the job ids it names and the record fields
    it may write (prio: PriorityLong, flag: Requeue, restarts: RestartCnt)."""
    if not argv:
        return "other", (), frozenset()
    verb = argv[0]
    if verb in ("hold", "release", "uhold") and len(argv) >= 2:
        return ("hold" if verb == "uhold" else verb), tuple(argv[1].split(",")), frozenset({"prio"})
    if verb in ("requeue", "requeuehold") and len(argv) >= 2:
        return "requeue", tuple(argv[1].split(",")), frozenset({"restarts", "flag", "prio"})
    if verb == "update":
        ids: Tuple[str, ...] = ()
        requeue: Optional[str] = None
        others = False
        for arg in argv[1:]:
            name, _, value = arg.partition("=")
            if name.lower() == "jobid":
                ids = tuple(value.split(","))
            elif name.lower() == "requeue":
                requeue = value
            else:
                others = True
        if requeue is not None and not others:
            return f"requeue={requeue}", ids, frozenset({"flag"})
        return "update", ids, frozenset({"prio", "flag", "restarts"})
    return "other", (), frozenset()


def acked_ids(ids: Sequence[str], exit: Optional[int], stderr: str) -> frozenset[str]:
    """The ids slurmctld acknowledged in one call (§11's reading of a list call, kept strict):
    every id when it exited 0; when it exited 1, the ids no line names, provided every line is a
    refusal line or a ``slurm_suspend error`` line; otherwise none."""
    if exit == 0:
        return frozenset(ids)
    if exit != 1:
        return frozenset()
    named: Set[str] = set()
    for line in stderr.splitlines():
        line = line.strip()
        if not line or _SUSPEND.match(line):
            continue
        m = _REFUSAL.match(line)
        if m is None:
            return frozenset()
        named.add(m.group("id"))
    return frozenset(i for i in ids if i not in named)


class History:
    """The lines of a history, indexed for the checks."""

    def __init__(self, lines: Sequence[Mapping[str, Any]]) -> None:
        self.lines = list(lines)
        self.run: Mapping[str, Any] = next((x for x in self.lines if x["type"] == "run"), {})
        self.settle_delay = float(self.run.get("settle_delay", 10.0))
        self.tolerance = float(self.run.get("startup_tolerance", 2.0))
        self.t_start = float(self.run.get("t", 0.0))
        self.invocations: Dict[str, Invocation] = {}
        self.calls: List[Call] = []
        self.calls_by_job: Dict[str, List[Call]] = defaultdict(list)
        self.seen: Dict[str, List[Seen]] = defaultdict(list)
        self.final_seen: Dict[str, Seen] = {}
        self.faults: List[Fault] = []
        self.jobs: Dict[str, Mapping[str, Any]] = {}
        self.objects: Dict[str, Mapping[str, Any]] = {}
        self.operations: List[Mapping[str, Any]] = []
        self.dump: Optional[Mapping[str, Any]] = None
        self.env: List[Mapping[str, Any]] = []
        fault_ends: Dict[str, float] = {}
        pending_faults: List[Mapping[str, Any]] = []
        for x in self.lines:
            kind = x["type"]
            if kind == "job":
                self.jobs[str(x["job"])] = x
            elif kind == "invoke":
                self.invocations[x["id"]] = Invocation(
                    id=x["id"], kind=x["kind"], op=x["op"], jobs=tuple(str(j) for j in x.get("jobs", ())),
                    key=x.get("key"), retry=int(x.get("retry") or 0), timeout=x.get("timeout"),
                    deadline=x.get("deadline"), start=float(x["t"]), phase=x.get("phase", "run"), line=x["n"],
                    host=x.get("host", ""), select=bool(x.get("select")))
            elif kind == "end":
                inv = self.invocations.get(x["id"])
                if inv is not None:
                    inv.end, inv.exit, inv.end_line = float(x["t"]), x.get("exit"), x["n"]
                    if x.get("deadline") is not None:
                        inv.deadline = float(x["deadline"])
                    inv.rows = [r for r in x.get("rows", []) if isinstance(r, dict)]
                    inv.stderr = x.get("stderr") or ""
            elif kind == "call":
                action, ids, fields = parse_call(x.get("argv", []))
                call = Call(inv=x["inv"], action=action, ids=ids, fields=fields, t0=float(x["t0"]),
                            t1=x.get("t1"), exit=x.get("exit"),
                            acked=acked_ids(ids, x.get("exit"), x.get("stderr") or ""), line=x["n"])
                self.calls.append(call)
                for job in ids:
                    self.calls_by_job[job].append(call)
            elif kind == "observe" and x.get("ok"):
                for job, record in (x.get("jobs") or {}).items():
                    if isinstance(record, dict) and record.get("ambiguous"):
                        continue
                    seen = Seen(float(x["t0"]), float(x["t1"]), record, x["n"])
                    self.seen[job].append(seen)
                    if x.get("source") == "final":
                        self.final_seen[job] = seen
            elif kind == "fault" and not x.get("skipped"):
                pending_faults.append(x)
            elif kind == "fault_end":
                fault_ends[x["id"]] = float(x["t"])
            elif kind == "env":
                self.env.append(x)
            elif kind == "ledger_dump":
                self.dump = x
            elif kind == "ledger_object":
                self.objects[str(x["job"])] = x
            elif kind == "ledger_operation":
                self.operations.append(x)
        # How far ahead of the real clock the ledger's clock ever stood: a clock-step of a SQLite
        # ledger's command clocks (not slurmctld's), a mariadb-skew of the server.  The times it
        # wrote then lie that far ahead: an operation is over, on its times, only that much later.
        mariadb = str(self.run.get("ledger_location", "")).startswith("mariadb")
        ledgers = [x for x in pending_faults if (
            x["kind"] == "mariadb-skew" if mariadb else x["kind"] == "clock-step" and x.get("clock") != "slurmctld")]
        self.ledger_ahead = max([0.0] + [float(x.get("offset") or 0.0) for x in ledgers])
        for x in pending_faults:
            self.faults.append(Fault(x["id"], x["kind"], float(x["t"]), fault_ends.get(x["id"]), x.get("target"),
                                     x["n"]))
        for series in self.seen.values():
            series.sort(key=lambda s: s.t0)
        self.crashes = [f for f in self.faults if f.kind in CRASHES]
        # An id slurmctld gave again after losing its job in a crash names another job from then on.
        self.reused: Dict[str, List[Mapping[str, Any]]] = defaultdict(list)
        for env in self.env:
            if env.get("kind") == "reused":
                self.reused[str(env["job"])].append(env)
        self.controller_events = [f for f in self.faults if f.kind in CONTROLLER_EVENTS]

    # -- time spans ------------------------------------------------------------------------------

    def call_span(self, call: Call) -> Tuple[float, float]:
        """When a call may have changed the record: from its start to its end (or its command's
        end when it was never seen to end) plus LATE; HANDBACK more around a controller event."""
        owner = self.invocations.get(call.inv)
        end = call.t1 if call.t1 is not None else (owner.end_eff() if owner is not None else call.t0 + HANDBACK)
        end += LATE
        if any(call.t0 - LATE <= f.t <= end for f in self.controller_events):
            end += HANDBACK
        return call.t0, end

    def interfering(self, job: str, fld: str, lo: float, hi: float, besides: Iterable[str]) -> Optional[int]:
        """A line that shows something else may have moved ``fld`` of ``job`` in [lo, hi]: a call of
        another command, or a crash; None when nothing could."""
        mine = set(besides)
        for call in self.calls_by_job.get(job, ()):
            if call.inv in mine or fld not in call.fields:
                continue
            t0, t1 = self.call_span(call)
            if t0 <= hi and t1 >= lo:
                return call.line
        for crash in self.crashes:
            if lo <= crash.t <= hi:
                return crash.line
        for env in self.reused.get(job, ()):
            if lo <= float(env["t"]) <= hi:
                return int(env["n"])
        return None

    def before(self, job: str, t: float) -> Optional[Seen]:
        found = None
        for s in self.seen.get(job, ()):
            if s.t1 <= t:
                found = s
            else:
                break
        return found

    def after(self, job: str, t: float) -> Optional[Seen]:
        return next((s for s in self.seen.get(job, ()) if s.t0 >= t), None)

    def frozen(self, inv: Invocation, before: Optional[float] = None) -> float:
        """Seconds ``inv`` was frozen by cli-stop faults (those begun before ``before`` only)."""
        total = 0.0
        for f in self.faults:
            if f.kind == "cli-stop" and f.target == inv.id and (before is None or f.t < before):
                total += (f.end if f.end is not None else (inv.end or f.t)) - f.t
        return total

    def frozen_at(self, inv: Invocation, t: float) -> bool:
        """Whether ``inv`` was frozen by a cli-stop fault at ``t``."""
        return any(f.kind == "cli-stop" and f.target == inv.id and f.t <= t
                   and (f.end if f.end is not None else (inv.end or t)) >= t for f in self.faults)

    def ledger_down(self, lo: float, hi: float) -> bool:
        return any(f.kind in LEDGER_OUTAGES and f.t <= hi and (f.end if f.end is not None else hi) >= lo
                   for f in self.faults)

    def rel(self, t: float) -> str:
        return f"+{t - self.t_start:.2f} s"


# -- claims ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    field: str  # prio, flag, restarts
    kind: str  # eq0, gt0, eq1 (after); not_to_0, not_from_0, not_increased, not_from_1_to_0, increased
    why: str


# §12's table of each op's effect: the field, what the record shows when it took effect, and what
# it must not show when it did nothing (a move the op would have made).
EFFECTS = {
    "hold": ("prio", "eq0", "not_to_0"),
    "release": ("prio", "gt0", "not_from_0"),
    "open": ("prio", "gt0", "not_from_0"),
    "restore": ("flag", "eq0", "not_from_1_to_0"),
    "requeue": ("restarts", "increased", "not_increased"),
    "requeuehold": ("restarts", "increased", "not_increased"),  # and held, when it took effect (below)
}


def claims_of(op: str, row: Mapping[str, Any]) -> List[Claim]:
    """What a row says of the job's record (§7, §12's effect table)."""
    result = row.get("result")
    effect = row.get("effect")
    calls = row.get("calls") or []
    # A row with no call of its own, but for expired and not_run (nothing was started), reports an
    # earlier operation of its key (§12: "its row says so (result of that earlier operation,
    # detail naming it)"): a claim about that operation's moment, not this command's.
    if not calls and result not in ("expired", "not_run"):
        return []
    done = result == "ok" or (result == "unknown" and effect == "present")
    nothing = result in ("expired", "not_run", "rejected", "not_found") or (result == "unknown" and effect == "absent")
    why = str(result) if effect is None else f"{result}, settled {effect}"
    out: List[Claim] = []
    if result == "not_found" or effect == "gone":  # §5: slurmctld does not know the job
        out.append(Claim("exists", "gone", why))
    field, took, did_not = EFFECTS[op]
    if done and (op != "restore" or any(c.get("status") == 0 for c in calls)):  # a restore of a gone job: ok
        out.append(Claim(field, took, why))
    elif nothing:
        out.append(Claim(field, did_not, why))
    if op == "requeuehold" and done:  # §1, §12: back PENDING and held
        out.append(Claim("prio", "eq0", f"{why}, requeued into hold"))
    if op in REQUEUES and any(c.get("number") == 3 and c.get("status") == 0 for c in calls):
        out.append(Claim("flag", "eq0", f"{why}, call 3 (Requeue=0) succeeded"))
    elif op in REQUEUES and result == "bit_set":
        out.append(Claim("flag", "eq1", why))
        # §7 rule 3: call 1 took, call 3 never ran; whether the job was requeued is call 2's own
        # outcome (§12: a bit_set "happened exactly when its call 2" succeeded).
        second = next((c for c in calls if c.get("number") == 2), None)
        said = None if second is None else second.get("outcome")
        if said == "success":
            out.append(Claim("restarts", "increased", f"{why}, call 2 (the requeue) succeeded"))
        elif said in ("rejected", "expired", "not_run"):
            out.append(Claim("restarts", "not_increased", f"{why}, call 2 (the requeue) {said}"))
    return out


def _holds(claim: Claim, before: Optional[Mapping[str, Any]], after: Mapping[str, Any]) -> Optional[bool]:
    if claim.kind == "gone":  # the job's record before and after: it was known all along
        return before is None
    prio, flag, restarts = int(after["priority"]), int(after["requeue"]), int(after["restarts"])
    if claim.kind == "eq0":
        return (prio if claim.field == "prio" else flag) == 0
    if claim.kind == "gt0":
        return prio > 0
    if claim.kind == "eq1":
        return flag == 1
    if before is None:
        return None
    if claim.kind == "not_to_0":
        return not (int(before["priority"]) > 0 and prio == 0)
    if claim.kind == "not_from_0":
        return not (int(before["priority"]) == 0 and prio > 0)
    if claim.kind == "not_from_1_to_0":
        return not (int(before["requeue"]) == 1 and flag == 0)
    if claim.kind == "not_increased":
        return restarts <= int(before["restarts"])
    if claim.kind == "increased":
        return restarts >= int(before["restarts"]) + 1
    raise ValueError(claim.kind)


def _shown(record: Optional[Mapping[str, Any]]) -> str:
    if record is None:
        return "gone"
    return (f"{record.get('state')}/{record.get('reason')} Requeue={record.get('requeue')}"
            f" RestartCnt={record.get('restarts')} PriorityLong={record.get('priority')}")


def check_claims(h: History, out: List[Violation], figures: Counter[str]) -> None:
    for inv in h.invocations.values():
        if inv.kind not in ("cli", "library") or inv.end is None:
            continue
        for row in inv.rows:
            job = str(row.get("job_id"))
            for claim in claims_of(inv.op, row):
                needs_before = claim.kind not in ("eq0", "gt0", "eq1")
                after = h.after(job, inv.end)
                before = h.before(job, inv.start) if needs_before else None
                missing = needs_before and (before is None or before.record is None)
                if claim.kind == "gone" and after is not None and after.record is None:
                    figures["claims checked"] += 1  # gone after it: nothing to contradict
                    continue
                if after is None or after.record is None or missing:
                    figures["claims not checkable (no record before and after)"] += 1
                    continue
                lo = before.t0 if before is not None else inv.start
                blocker = h.interfering(job, claim.field, lo, after.t1, [inv.id])
                if blocker is not None:
                    figures["claims not checkable (something else in flight)"] += 1
                    continue
                held = _holds(claim, before.record if before is not None else None, after.record)
                if held is None:
                    continue
                figures["claims checked"] += 1
                if not held:
                    lines = [inv.line] + ([inv.end_line] if inv.end_line else [])
                    lines += [s.line for s in (before, after) if s is not None]
                    was = f"; before it ({h.rel(before.t0)}): {_shown(before.record)}" if before is not None else ""
                    out.append(Violation(
                        "false-claim",
                        f"{inv.kind} {inv.id} {inv.op} job {job}: {claim.why} ({claim.field} {claim.kind}), but the"
                        f" record after it ({h.rel(after.t0)}) shows {_shown(after.record)}{was}; no other call on"
                        f" that field and no controller crash in between",
                        tuple(lines), job))


# -- lost flags, unsettled operations --------------------------------------------------------------


def check_ledger(h: History, out: List[Violation]) -> None:
    corrupt = sorted((i for i in h.invocations.values() if any(c in i.stderr for c in CORRUPT)
                      or any(c in str(r.get("message", "")) for r in i.rows for c in CORRUPT)), key=lambda i: i.start)
    if corrupt:
        first = corrupt[0]
        out.append(Violation(
            "ledger-lost",
            f"{first.kind} {first.id} ({first.op}) found the ledger corrupt at {h.rel(first.end or 0.0)}, and"
            f" {len(corrupt) - 1} command(s) after it: {first.stderr.strip()[-200:]!r}",
            tuple(x for x in (first.line, first.end_line) if x)))
    if h.dump is not None and not h.dump.get("ok"):
        out.append(Violation("ledger-lost", f"the ledger could not be read back at the end: {h.dump.get('stderr')!r}",
                             (h.dump["n"],)))


def check_final(h: History, out: List[Violation], figures: Counter[str]) -> None:
    sweeps = sorted((i for i in h.invocations.values() if i.kind == "sweep" and i.phase == "final"),
                    key=lambda i: i.start)
    looked = [i for i in sweeps if i.end is not None and any(
        r.get("kind") == "summary" and r.get("lookup_error") is None for r in i.rows)]
    if h.dump is None or not h.dump.get("ok") or not h.final_seen or not looked:
        figures["final checks not made (no ledger dump, final record or sweep that looked)"] += 1
        return
    figures["jobs looked at in the end"] = len(h.final_seen)
    for job, seen in sorted(h.final_seen.items()):
        if seen.record is None or int(seen.record["requeue"]) != 1:
            continue
        obj = h.objects.get(job)
        bit = obj.get("bit") if obj is not None else None
        figures["jobs at Requeue=1 in the end"] += 1
        if bit is not None and bit != "clear":
            continue
        if admins_flag(h, job):
            figures["jobs at Requeue=1 whose flag another admin set last (not checked)"] += 1
            continue
        known, note = durability_window(h, job)
        lines = [seen.line] + ([obj["n"]] if obj is not None else []) + [looked[0].line] + note
        out.append(Violation(
            "lost-flag",
            f"job {job} is at Requeue=1 ({_shown(seen.record)}) after the schedule went quiet and a sweep ran,"
            f" and its ledger object is {'missing' if obj is None else 'clear'}"
            + (f"; {known}" if known else ""),
            tuple(lines), job, "durability-13" if known else None))
    # Two sweeps that looked, the second at least the settle delay after every operation ended, and
    # after the ledger's clock passed every time it wrote while ahead (§13.7: where a run cannot be
    # told over, its operation's times decide). The final sweeps run on a host of their own, which
    # counts the delay from when it first found each operation over (§13.7): from the first one's
    # end. And an unknown whose calls met a controller that did not answer waits CONTROL_TIMEOUT
    # plus MessageTimeout more (§13.6: "absent" is never read before then).
    last_end = max((i.end_eff() for i in h.invocations.values() if i.kind != "sweep" or i.phase != "final"),
                   default=h.t_start)
    first_over = max(last_end + h.ledger_ahead, looked[0].end_eff() if looked else h.t_start)
    if len(looked) < 2 or looked[1].start < first_over + h.settle_delay + UNANSWERED_WAIT:
        figures["unsettled check not made (fewer than two sweeps past the settle delay)"] += 1
        return
    for op in h.operations:
        if op.get("result") in ("unknown", None) and op.get("settlement") is None:
            last = h.final_seen.get(str(op.get("job")))
            if last is not None and last.record is None:
                # Gone in the end: settled only once two of slurmctld's saves are seen after the
                # lookup that first found it gone (§13.2), and an idle slurmctld saves only at its
                # checkpoint; the run does not watch its saves, so it cannot tell.
                figures["unsettled checks not made (the job gone, its purge not known saved)"] += 1
                continue
            out.append(Violation(
                "unsettled",
                f"operation {op.get('id')} ({op.get('op')} job {op.get('job')}, result"
                f" {op.get('result') or 'none: unfinished'}) has no verdict after two sweeps past the settle delay",
                (op["n"], looked[0].line, looked[1].line), str(op.get("job"))))
    figures["operations in the ledger"] = len(h.operations)


def admins_flag(h: History, job: str) -> bool:
    """Whether the last call that set (or may have set: never seen to end) ``job``'s Requeue flag
    was another admin's: a call of no command of the run."""
    setters = [c for c in h.calls_by_job.get(job, ()) if c.action == "requeue=1" and (job in c.acked or c.t1 is None)]
    return bool(setters) and max(setters, key=lambda c: c.t0).inv not in h.invocations


def durability_window(h: History, job: str) -> Tuple[str, List[int]]:
    """Whether a lost flag fits §13: a ``Requeue=0`` acknowledged, then slurmctld SIGKILLed within
    SAVE_MAX_WAIT."""
    for call in h.calls_by_job.get(job, ()):
        if call.action != "requeue=0" or job not in call.acked or call.t1 is None:
            continue
        for crash in h.crashes:
            if 0 <= crash.t - call.t1 <= DURABILITY_WINDOW:
                return (f"it fits §13: Requeue=0 acknowledged at {h.rel(call.t1)}, then {crash.kind}"
                        f" {crash.t - call.t1:.2f} s later (durability-13)"), [call.line, crash.line]
    return "", []


# -- keys -----------------------------------------------------------------------------------------


def check_keys(h: History, out: List[Violation], figures: Counter[str]) -> None:
    groups: Dict[Tuple[str, str], List[Invocation]] = defaultdict(list)
    for inv in h.invocations.values():
        if inv.kind not in ("cli", "library") or inv.op not in FIRST_ACTION:
            continue
        # A key's requeues are one, into hold or not (docs/contract.md §1: stored as op requeue).
        op = "requeue" if inv.op in REQUEUES else inv.op
        if inv.key:
            groups[(op, f"key {inv.key}")].append(inv)
        elif inv.retry > 0:
            groups[(op, f"the retries of {inv.id}")].append(inv)
    for (op, name), members in groups.items():
        ids = {m.id for m in members}
        jobs = sorted({j for m in members for j in m.jobs})
        for job in jobs:
            figures["key groups checked (op, key, job)"] += 1
            effects = [c for c in h.calls_by_job.get(job, ()) if c.inv in ids and c.action == EFFECT_ACTION[op]]
            said_ok = [m for m in members for r in m.rows if str(r.get("job_id")) == job and r.get("result") == "ok"]
            if said_ok and not effects:
                # At least once (§12): a key's row says ok only for an effect one of its own runs
                # called; an ok none of them called for is a key that said done and never acted.
                # (A settled "present" is not checked: the record cannot say who made it.)
                out.append(Violation(
                    "key-never-acted", f"{op} job {job} under {name}: {said_ok[0].id} said ok, and no run of it"
                    f" called {EFFECT_ACTION[op]} on the job", (said_ok[0].line,), job))
            if op in REQUEUES:  # RestartCnt never goes back: any acknowledged requeue took effect
                acks = [c for c in effects if job in c.acked and c.t1 is not None]
            else:
                # A hold may be settled absent (another command released the job) and run again
                # (§12): what took effect for good is the last call of a run whose row said ok.
                ok_rows = {m.id for m in members for r in m.rows
                           if str(r.get("job_id")) == job and r.get("result") == "ok" and r.get("calls")}
                last = {c.inv: c for c in sorted(effects, key=lambda c: c.t0)}
                acks = [c for inv, c in last.items() if inv in ok_rows and job in c.acked and c.t1 is not None]
            acts = [c for c in h.calls_by_job.get(job, ()) if c.inv in ids and c.action == FIRST_ACTION[op]]
            found = False
            for ack in sorted(acks, key=lambda c: c.t1 or 0.0):
                assert ack.t1 is not None
                for act in sorted(acts, key=lambda c: c.t0):
                    if act.t0 <= ack.t1 or act is ack:
                        continue
                    if any(ack.t1 <= f.t <= act.t0 for f in h.crashes):
                        continue
                    out.append(Violation(
                        "key-acted-twice",
                        f"{op} job {job} under {name}: {act.inv} made its call ({act.action}) at {h.rel(act.t0)},"
                        f" after {ack.inv}'s {ack.action} was acknowledged at {h.rel(ack.t1)}",
                        (h.invocations[ack.inv].line, ack.line, h.invocations[act.inv].line, act.line), job))
                    found = True
                    break
                if found:
                    break
            if op in REQUEUES and not found and (len(members) > 1 or any(m.retry for m in members)):
                check_restarts(h, name, [m for m in members if job in m.jobs], job, out, figures)


def check_restarts(h: History, name: str, members: List[Invocation], job: str, out: List[Violation],
                   figures: Counter[str]) -> None:
    lo = min(m.start for m in members)
    hi = max(m.end_eff() for m in members) + LATE
    before, after = h.before(job, lo), h.after(job, hi)
    if before is None or after is None or before.record is None or after.record is None:
        return
    if h.interfering(job, "restarts", before.t0, after.t1, [m.id for m in members]) is not None:
        figures["key RestartCnt checks not checkable"] += 1
        return
    figures["key RestartCnt checks"] += 1
    if int(after.record["restarts"]) - int(before.record["restarts"]) >= 2:
        out.append(Violation(
            "key-acted-twice",
            f"requeue job {job} under {name}: RestartCnt {before.record['restarts']} before its first run"
            f" ({h.rel(before.t0)}), {after.record['restarts']} after its last ({h.rel(after.t0)}), and no other"
            " requeue of the job nor a crash in between",
            tuple([m.line for m in members] + [before.line, after.line]), job))


# -- deadlines, tracebacks, exit statuses -----------------------------------------------------------


def row_exit(op: str, row: Mapping[str, Any]) -> Optional[int]:
    """§10, §12: the exit a row stands for."""
    result, effect = row.get("result"), row.get("effect")
    if result not in EXIT_OF_RESULT:
        return None
    if result != "unknown" or effect is None:
        return EXIT_OF_RESULT[str(result)]
    if effect == "present":
        return 14 if op in REQUEUES and row.get("requeue_bit") not in (None, "clear") else 0
    if effect == "gone":
        return 11
    return 15


def check_commands(h: History, out: List[Violation], figures: Counter[str]) -> None:
    for inv in h.invocations.values():
        if "Traceback (most recent call last)" in inv.stderr:
            out.append(Violation("traceback", f"{inv.kind} {inv.id} ({inv.op}) printed a traceback:"
                                 f" {inv.stderr[-300:]!r}", tuple(x for x in (inv.line, inv.end_line) if x)))
        if inv.kind not in ("cli", "library") or inv.timeout is None:
            continue
        mine = [c for c in h.calls if c.inv == inv.id and c.action in OP_ACTIONS]
        if inv.exit == 2 and mine:
            out.append(Violation("usage-ran", f"{inv.id} exited 2 (a usage error) but made {len(mine)} op call(s)",
                                 (inv.line, mine[0].line)))
        # Its deadline: a library call's own; a command's, set when its handler started, before any
        # process it started (a lookup or a call), and at most its start-up tolerance after it began,
        # plus the time it was frozen before that process (a cli-stop while it started).
        first = min((c.t0 for c in h.calls if c.inv == inv.id), default=None)
        deadline = inv.start + inv.timeout + h.tolerance + h.frozen(inv, first)
        if first is not None:
            deadline = min(deadline, first + inv.timeout)
        if inv.deadline is not None:
            deadline = inv.deadline
        # A runner frozen (cli-stop) at its deadline keeps no time and sends no TERM: its script goes
        # on until the backstop KILLs it, KILL_GRACE + GUARD_MARGIN past the deadline (§2).
        late = KILLED_TAIL if h.frozen_at(inv, deadline) else 0.5
        for call in mine:
            if call.t0 > deadline + late:
                out.append(Violation(
                    "deadline", f"{inv.id} ({inv.op}) started {call.action} at {h.rel(call.t0)},"
                    f" {call.t0 - deadline:.2f} s after its deadline", (inv.line, call.line)))
                break
        if inv.retry == 0:
            # One command acts on a job once (§12: a rerun acts again only under --retry): a second
            # call of its effect on the same job, acknowledged or not, is a job acted on twice.
            action = EFFECT_ACTION.get(inv.op)
            seen: Dict[str, Call] = {}
            for call in mine:
                for job in call.ids if call.action == action else ():
                    if job in seen:
                        out.append(Violation(
                            "acted-twice", f"{inv.id} ({inv.op}) called {action} on job {job} twice, at"
                            f" {h.rel(seen[job].t0)} and {h.rel(call.t0)}", (inv.line, seen[job].line, call.line)))
                    seen.setdefault(job, call)
            figures["one-call-per-job checks"] += 1
        if inv.end is None or inv.killed:
            continue
        took = inv.end - inv.start
        allowed = inv.timeout + OVERRUN + h.tolerance + h.frozen(inv)
        if h.ledger_down(inv.start, inv.end):
            figures["deadline checks not made (ledger down)"] += 1
        else:
            figures["deadline checks"] += 1
            if took > allowed:
                out.append(Violation(
                    "deadline", f"{inv.id} ({inv.op}, --timeout {inv.timeout:g}) took {took:.2f} s, more than"
                    f" {allowed:.2f} s (timeout + {OVERRUN:g} + start-up {h.tolerance:g} + frozen"
                    f" {h.frozen(inv):.2f})", tuple(x for x in (inv.line, inv.end_line) if x)))
        if inv.select:
            # docs/contract.md §10.3: a selection holds only jobs its selectors name (each job's
            # name its own: the invocation's jobs), each once; one that finished may not be listed.
            figures["selections checked"] += 1
            ids = [str(r.get("job_id")) for r in inv.rows if "job_id" in r]
            strangers = sorted(set(ids) - set(inv.jobs))
            if strangers or len(ids) != len(set(ids)):
                out.append(Violation("selection", f"{inv.id} selected by --name acted on {ids}, its names' jobs"
                                     f" being {list(inv.jobs)}", tuple(x for x in (inv.line, inv.end_line) if x)))
        if inv.kind == "cli" and inv.rows and inv.exit not in (1, 2, 3):
            exits = [row_exit(inv.op, r) for r in inv.rows]
            if None not in exits:
                figures["exit statuses checked"] += 1
                worst = max(e for e in exits if e is not None)
                if inv.exit != worst:
                    out.append(Violation("exit-status", f"{inv.id} exited {inv.exit}, its worst row {worst}",
                                         tuple(x for x in (inv.line, inv.end_line) if x)))


def check(lines: Sequence[Mapping[str, Any]]) -> Report:
    """Every invariant over one history; ValueError for one whose run has not ended (its scontrol
    calls, which say what else was in flight, are written last)."""
    if not any((x["type"] == "phase" and x.get("name") == "calls") or x["type"] == "ledger_dump" for x in lines):
        raise ValueError("the history has no scontrol calls yet (its run has not ended): nothing to check")
    h = History(lines)
    out: List[Violation] = []
    figures: Counter[str] = Counter()
    check_claims(h, out, figures)
    check_keys(h, out, figures)
    check_commands(h, out, figures)
    check_final(h, out, figures)
    check_ledger(h, out)
    return Report(out, dict(sorted(figures.items())) | summary(h))


def summary(h: History) -> Dict[str, Any]:
    """The run's figures: operations, faults by kind, records looked at."""
    ops: Counter[str] = Counter()
    for inv in h.invocations.values():
        ops[f"{inv.kind} {inv.op}" + (" (final)" if inv.phase == "final" else "")] += 1
    faults = Counter(f.kind for f in h.faults)
    # The faults an operation carries in its own scontrol wrapper and lookups (schedule.py).
    for x in h.lines:
        if x["type"] == "invoke" and x.get("fault") and not str(x["fault"]).endswith(":mark"):
            faults["scontrol " + str(x["fault"]).split(":")[1]] += 1
        if x["type"] == "invoke" and x.get("squeue_slow"):
            faults["lookups slowed"] += 1
    skipped = Counter(x["kind"] for x in h.lines if x["type"] == "fault" and x.get("skipped"))
    rows = sum(len(i.rows) for i in h.invocations.values() if i.kind != "sweep")
    last = max((float(x.get("t", x.get("t1", 0.0)) or 0.0) for x in h.lines), default=h.t_start)
    return {
        "seconds": round(last - h.t_start, 1),
        "invocations": sum(ops.values()),
        "operations by kind": dict(sorted(ops.items())),
        "rows": rows,
        "scontrol calls": len(h.calls),
        "jobs": len(h.jobs),
        "observations": sum(1 for x in h.lines if x["type"] == "observe"),
        "faults": sum(faults.values()),
        "faults by kind": dict(sorted(faults.items())),
        "faults skipped": dict(sorted(skipped.items())),
    }
