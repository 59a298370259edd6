"""Everything the ``slurm-dsl`` command line shows, human and JSON (docs/contract.md §10, §10.1): pure
functions from values to text, ``--json`` from the same value as the human text.  Outside text is
``shown`` in the human text: old ledger rows may still hold raw control bytes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence

from ..core import ledger_rules as rules
from ..core.model import Op, Outcome, Result
from ..core.shown import shown

if TYPE_CHECKING:  # only their types: an operation, the common case, does not import the sweep nor doctor
    from ..core.jobinfo import JobInfo
    from ..core.predict import Prediction
    from ..run.settling import Row, SettleReport
    from ..run.sweep import Redone, SweepReport, Swept
    from .doctor import Check

UNKNOWN_ACTOR = "unknown"  # rows written before schema 2 did not record who ran them


def json_line(value: Any) -> str:
    """One ``--json`` object, on its own line: every command's JSON is written by this."""
    return json.dumps(value, sort_keys=True) + "\n"


def as_lines(texts: Iterable[str]) -> str:
    """Human lines as one text, each ending in a newline."""
    return "".join(text + "\n" for text in texts)


# -- operations (hold, release, requeue, restore, open; read) ------------------------------------


def format_outcome(outcome: Outcome) -> str:
    """One table row: job, op, result, requeue bit, and what scontrol said or why unknown."""
    bit = outcome.requeue_bit.value if outcome.requeue_bit is not None else "-"
    notes = [c.message for c in outcome.calls if c.message][-1:]
    if outcome.reason is not None:
        notes.append(f"[{outcome.reason.value}]")
    if outcome.settled:  # --settle, --retry, --key (docs/contract.md §12): the effect, and why
        if outcome.effect is not None:
            notes.insert(0, f"effect {outcome.effect.value}:")
        if outcome.detail:
            notes.append(shown(outcome.detail, 200))
    row = f"{outcome.job_id:>10}  {outcome.op.value:<8} {outcome.result.value:<10} {bit:<10} {' '.join(notes)}"
    return row.rstrip()


def outcome_text(outcome: Outcome, as_json: bool, admin_reason: Optional[str] = None) -> str:
    """An operation's result as printed: its table row (and its AdminComment copy's line), or its JSON."""
    if not as_json:
        row = format_outcome(outcome) + "\n"
        said = outcome.comment
        if said is not None:
            row += f"{'':>10}  admin comment: {said.result.value}" + (f" ({shown(said.detail, 200)})\n"
                                                                      if said.detail else "\n")
        return row
    shown_json = outcome.to_json()
    if admin_reason is not None:
        shown_json["admin_reason"] = admin_reason
    return json_line(shown_json)


def prediction_text(op: Op, job_id: str, info: Optional[JobInfo], said: Prediction, as_json: bool) -> str:
    """One job of ``--dry-run``: what a run would call and what the record predicts (``kind`` ``dry_run``)."""
    calls = [["scontrol", *args] for args in said.calls]
    record = None if info is None else {"state": info.state, "requeue": info.requeue, "restarts": info.restarts,
                                        "priority": info.priority}
    if as_json:
        return json_line({"kind": "dry_run", "job_id": job_id, "op": op.value, "would": said.result.value,
                          "why": said.why, "record": record, "calls": calls})
    run = "; ".join(" ".join(call) for call in calls)
    return f"{job_id:>10}  {op.value:<8} would {said.result.value:<10} {shown(said.why)}  [calls: {run}]\n"


# The order of a summary's parts: what needs an admin last, so that it ends the line.
SUMMARY_ORDER = (Result.OK, Result.NOT_FOUND, Result.EXPIRED, Result.REJECTED, Result.NOT_RUN, Result.BIT_SET,
                 Result.UNKNOWN)
SUMMARY_RANGES = 8  # the most id ranges one group of a summary lists; the rest are counted


def summary_line(outcomes: Sequence[Outcome], sep: str = " \u00b7 ") -> str:
    """A run's rows folded into one line, as ``clush -b`` does: ``ok 4,213 · rejected 12 (MESSAGE: 101-112)``."""
    groups: Dict[Result, Dict[str, List[str]]] = {}
    for outcome in outcomes:
        notes = [c.message for c in outcome.calls if c.message][-1:]
        if outcome.reason is not None:
            notes.append(f"[{outcome.reason.value}]")
        groups.setdefault(outcome.exits_as, {}).setdefault(shown(" ".join(notes), 120), []).append(outcome.job_id)
    parts = []
    for result in SUMMARY_ORDER:
        said = groups.get(result)
        if not said:
            continue
        part = f"{result.value} {sum(len(ids) for ids in said.values()):,}"
        if result is not Result.OK:
            part += " (" + "; ".join(f"{t}: {folded(ids)}" if t else folded(ids) for t, ids in said.items()) + ")"
        parts.append(part)
    return sep.join(parts)


def folded(ids: Sequence[str]) -> str:
    """Job ids as ranges, ``101-112,2001``; past ``SUMMARY_RANGES`` ranges, how many ids more."""
    numbers = sorted({int(i) for i in ids if i.isdigit()})
    runs: List[List[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    items = [(str(a) if a == b else f"{a}-{b}", b - a + 1) for a, b in runs]
    items += [(i, 1) for i in sorted({i for i in ids if not i.isdigit()})]
    rest = sum(n for _, n in items[SUMMARY_RANGES:])
    return ",".join(t for t, _ in items[:SUMMARY_RANGES]) + (f" and {rest:,} more" if rest else "")


# -- sweep ----------------------------------------------------------------------------------------


def swept_text(s: Swept, as_json: bool) -> str:
    """One object the sweep looked at (``kind`` ``job``)."""
    return json_line(s.to_json()) if as_json else f"{s.job_id:>10}  {s.done.value:<14} {shown(s.why)}\n"


def orphan_text(info: JobInfo, as_json: bool) -> str:
    """A job showing Requeue=1 that the ledger does not track (``--orphans``; ``kind`` ``orphan``)."""
    if as_json:
        return json_line({"kind": "orphan", "job_id": info.job_id, "orphan": True, "state": info.state})
    return f"{info.job_id:>10}  orphan         shows Requeue=1 ({shown(info.state)}), not tracked by the ledger\n"


def sweep_summary(report: SweepReport, lookup: str, not_clear: int) -> Dict[str, Any]:
    """The sweep's last ``--json`` line (``kind`` ``summary``)."""
    from ..run.settling import counts

    return {"kind": "summary", "summary": report.counts(), "lookup": lookup,
            "lookup_error": report.lookup_error, "orphans": len(report.orphans),
            "fixed_orphans": [o.result.value for o in report.fixed_orphans], "not_clear": not_clear,
            "dry_run": report.dry_run, "seconds": round(report.took, 3),
            "verdicts": counts(report.verdicts), "verdicts_written": report.verdicts_written,
            "unseen": report.unseen, "save_error": report.save_error, "keep_error": report.keep_error,
            "acknowledged": len(report.acknowledged), "lost": len(report.lost), "lost_written": report.lost_written,
            "last_save": None if report.save is None or report.save.started is None else report.save.started}


def verdicts_line(summary: Dict[str, Any]) -> str:
    """The sweep's one line on the unknown operations it looked at (some), from ``sweep_summary``."""
    counted = summary["verdicts"]
    total = sum(counted.values())
    given = [f"{n} {v}" for v, n in counted.items() if n and v != "none"]
    if counted["none"]:
        given.append(f"{counted['none']} no verdict yet")
    written = "dry run: none written" if summary["dry_run"] else f"{summary['verdicts_written']} verdict(s) written"
    return f"unknown operations: {total} looked at: {', '.join(given)} ({written})"


def lost_line(summary: Dict[str, Any]) -> str:
    """The sweep's one line on the acknowledged operations it found lost, from ``sweep_summary``."""
    written = "dry run: none written" if summary["dry_run"] else f"{summary['lost_written']} recorded"
    return (f"acknowledged operations: {summary['acknowledged']} read again, {summary['lost']} acknowledged,"
            f" then lost ({written})")


def summary_text(summary: Dict[str, Any], as_json: bool) -> str:
    """The sweep's closing line, from ``sweep_summary``."""
    if as_json:
        return json_line(summary)
    done = ", ".join(f"{v} {k}" for k, v in summary["summary"].items() if v) or "nothing to do"
    return (f"sweep{' (dry run)' if summary['dry_run'] else ''}: {done}; {summary['not_clear']} object(s) not"
            f" clear (lookup: {summary['lookup']})\n")


def sweep_text(report: SweepReport, lookup: str, not_clear: int, as_json: bool,
               redone: Sequence[Redone] = ()) -> str:
    """All a sweep prints: each object, orphan, unknown and lost operation, each redo, then the summary."""
    summary = sweep_summary(report, lookup, not_clear)
    return ("".join(swept_text(s, as_json) for s in report.swept)
            + "".join(orphan_text(info, as_json) for info in report.orphans)
            + ("".join(json_line(d.to_json()) for d in report.verdicts) if as_json
               else verdicts_line(summary) + "\n" if report.verdicts else "")
            + ("".join(json_line(d.to_json()) for d in report.lost) if as_json
               else lost_line(summary) + "\n" if report.lost else "")
            + "".join(json_line(r.to_json()) if as_json else redo_line(r) + "\n" for r in redone)
            + summary_text(summary, as_json))


def redo_line(r: Redone) -> str:
    """One lost keyed operation as ``sweep --redo-lost`` ran it again: its row, or why it did not run."""
    head = f"redo of operation {r.lost.id} ({r.lost.op.value} {r.lost.job_id}, key {shown(r.lost.key or '')}):"
    return f"{head} {format_outcome(r.outcome).strip() if r.outcome is not None else 'not run: ' + shown(r.why)}"


# -- settle ---------------------------------------------------------------------------------------


def settle_row_line(row: Row) -> str:
    """One operation as ``slurm-dsl settle`` shows it."""
    e = row.entry
    effect = "-" if row.verdict is None else row.verdict.value
    why = {"not_yet": "no verdict yet: look again later", "running": "still running: settled once it has ended"}
    detail = row.detail or why.get(row.when, "")
    return (f"{e.job_id:>10}  {e.id:>6}  {e.op.value:<8} {(e.result.value if e.result else 'unfinished'):<10}"
            f" {effect:<11} {row.when:<8} {shown(detail)}").rstrip()


def settle_text(report: SettleReport, lookup: str, days: Any, as_json: bool) -> str:
    """All ``slurm-dsl settle`` prints: one row per operation; the jobs the ledger never saw."""
    if as_json:
        return ("".join(json_line(r.to_json()) for r in report.rows)
                + "".join(json_line({"kind": "no_record", "job_id": j}) for j in report.no_record))
    lines = [f"{'JOBID':>10}  {'ID':>6}  {'OP':<8} {'RESULT':<10} {'EFFECT':<11} {'SETTLED':<8} DETAIL"]
    lines += [settle_row_line(r) for r in report.rows]
    lines += [f"no record of job {j}" for j in report.no_record]
    if not report.rows:
        scope = "" if days is None else f" started in the last {days} day(s)"
        lines.append(f"no unknown operation to settle{scope}")
    if report.lookup_error is not None:
        lines.append(f"lookup ({lookup}) could not ask: {shown(report.lookup_error)}; nothing was settled")
    return as_lines(lines)


# -- doctor ---------------------------------------------------------------------------------------


def check_json(check: Check) -> Dict[str, str]:
    """One check as ``doctor --json`` prints it."""
    return {"check": check.name, "status": check.status, "detail": check.detail}


def checks_text(checks: Sequence[Check], as_json: bool) -> str:
    """``doctor``'s checks, one line each."""
    if as_json:
        return "".join(json_line(check_json(c)) for c in checks)
    return as_lines(f"{c.status:<5} {c.name:<11} {shown(c.detail, None)}" for c in checks)


# -- history, ledger status|prune|migrate: from view's values ------------------------------------


def history_text(records: Sequence[Dict[str, Any]], as_json: bool) -> str:
    """One job's ``history``, from its ``view.history_json`` records."""
    return "".join(json_line(r) for r in records) if as_json else as_lines(history_lines(records))


def lost_text(records: Sequence[Dict[str, Any]], as_json: bool) -> str:
    """``history --lost``, from ``view.lost_json``: one line per lost operation, and how to redo it."""
    if as_json:
        return "".join(json_line(r) for r in records)
    if not records:
        return "no acknowledged operation was found lost, or every one found lost was redone\n"
    lines = []
    for r in records:
        verdict = r["settlement"]["verdict"] if r.get("settlement") else "?"
        redo = f"redo: {r['redo']}" if r["redo"] else "its job is gone: nothing can redo it"
        key = f" key {r['key']}" if r.get("key") else ""
        lines.append(f"{r['job_id']:>10}  {r['op']:<8} operation {r['id']}{key} ({shown(r['actor'] or UNKNOWN_ACTOR)},"
                     f" {r['started_at']}): {r['result']}, then lost ({verdict}); {redo}")
    return as_lines(lines)


def status_text(status: Dict[str, Any], as_json: bool) -> str:
    """``ledger status``, from ``view.status_json``."""
    return json_line(status) if as_json else as_lines(status_lines(status))


def prune_text(report: Dict[str, Any], as_json: bool) -> str:
    """``ledger prune``, from ``view.prune_json``."""
    return json_line(report) if as_json else prune_line(report) + "\n"


def migrate_text(report: Dict[str, Any], as_json: bool) -> str:
    """``ledger migrate``, from ``view.migrate``'s object."""
    return json_line(report) if as_json else as_lines(migrate_lines(report))


def history_lines(records: Sequence[Dict[str, Any]]) -> List[str]:
    """The human table of one job, from its ``history_json`` records."""
    first = records[0]
    if first["kind"] == "no_record":
        return [f"no record of job {first['job_id']}"]
    lines: List[str] = []
    if first["kind"] == "object":
        lines.append(f"job {first['job_id']}: bit {first['bit']} since {first['since']} ({shown(first['why'])})")
        if first["lookup_failures"]:
            lines.append(f"  lookup failed {first['lookup_failures']} time(s) in a row:"
                         f" {shown(first['lookup_error'] or '')}")
    ops = [r for r in records if r["kind"] == "operation"]
    if not ops:
        lines.append("  no operation recorded (an object made by sweep --orphans --fix, or pruned)")
        return lines
    lines.append(f"  {'ID':>6}  {'STARTED (UTC)':<20}  {'SECS':>6}  {'OP':<8} {'RESULT':<10} {'REQUEUE-BIT':<11}"
                 f"  {'BIT BEFORE -> AFTER':<24}  BY")
    for r in ops:
        secs = "-" if r["finished_at_epoch"] is None else f"{r['finished_at_epoch'] - r['started_at_epoch']:.1f}"
        bits = f"{r['bit_before']} -> {r['bit_after'] or '?'}"
        lines.append(
            f"  {r['id']:>6}  {r['started_at']:<20}  {secs:>6}  {r['op']:<8} {r['result'] or 'unfinished':<10}"
            f" {r['requeue_bit'] or '-':<11}  {bits:<24}  {shown(r['actor'] or UNKNOWN_ACTOR)}"
        )
        pad = " " * 10
        if r.get("admin_reason"):
            lines.append(f"{pad}reason given: {shown(r['admin_reason'])}")
        if r["finished_at"] is None:
            lines.append(f"{pad}not finished: still running, or its process died, or the ledger failed after it"
                         " ran (a requeue's object then stays may_be_set for the sweep)")
        for c in r["calls"]:
            said = f": {shown(c['message'])}" if c["message"] else ""
            why = f" [{c['reason']}]" if c["reason"] else ""
            lines.append(f"{pad}call {c['number']}: {shown(str(c['status']))} {c['outcome']}{said}{why}")
        if r["reason"] or r["detail"]:
            lines.append(f"{pad}why: {shown(': '.join(str(x) for x in (r['reason'], r['detail']) if x))}")
        for c in r.get("admin_comments", ()):
            said = f" ({shown(c['detail'], 200)})" if c["detail"] else ""
            lines.append(f"{pad}admin comment: {c['result']}{said}: {shown(c['text'])}")
        lines += settling_lines(r, pad)
    return lines


def record_words(record: Dict[str, Any]) -> str:
    """A job's record (a baseline, or what a verdict was read from) in one phrase."""
    return (f"{shown(str(record['state']))}, RestartCnt {record['restarts']}, PriorityLong {record['priority']},"
            f" Requeue={int(bool(record['requeue']))}")


def settling_lines(r: Dict[str, Any], pad: str) -> List[str]:
    """An operation's baseline and its verdict line (docs/contract.md §12), each only when there is one."""
    lines = []
    base = r.get("baseline")
    if base is not None:
        at = f" (looked up {r['baseline_at']})" if r.get("baseline_at") else ""
        lines.append(f"{pad}baseline: {record_words(base)}{at}")
    s = r.get("settlement")
    if s is not None:
        source = f"the record looked up {s['looked_at']}" if s.get("record") else f"a lookup at {s['looked_at']}"
        lines.append(f"{pad}verdict: {s['verdict']} (settled {s['settled_at']} by {shown(s['by'] or '?')}, from"
                     f" {source}): {shown(s['detail'] or '')}")
    return lines


def ago(seconds: float) -> str:
    """A duration as people read it: ``42 s``, ``17 min``, ``3.2 h``, ``12.5 d``."""
    if seconds < 120:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * rules.DAY:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / rules.DAY:.1f} d"


def status_lines(status: Dict[str, Any]) -> List[str]:
    """The human ``ledger status``, from ``status_json``."""
    objects = ", ".join(f"{n} {bit}" for bit, n in status["objects"].items())
    ages = ", ".join(f"{name} {n}" for name, n in status["not_clear_by_age"].items())
    lines = [
        f"ledger {shown(status['ledger'])} (schema {status['schema']}): {status['history_rows']} history row(s)",
        f"objects: {objects}",
        f"not clear, by when their bit last changed: {ages}",
    ]
    o = status["oldest_not_clear"]
    if o is None:
        lines.append("oldest not clear: none, every object is clear")
    else:
        lines.append(f"oldest not clear: job {o['job_id']} {o['bit']} since {o['since']}"
                     f" ({ago(o['age_seconds'])} ago): {shown(o['why'])}")
    lines.append(f"lookup back-off: {status['backing_off']} object(s) whose last lookup failed")
    lines.append(unfinished_line(status["unfinished"]))
    u = status["unsettled"]
    by_age = ", ".join(f"{name} {n}" for name, n in u["by_age"].items())
    lines.append(f"unknown operations without a verdict: {u['count']}" + (f", by age: {by_age}" if u["count"] else ""))
    s = status["last_sweep"]
    if s is None:
        lines.append("last sweep: none recorded (run slurm-dsl sweep; contrib/systemd has a timer for it)")
    else:
        summary = s["summary"]
        done = ", ".join(f"{n} {what}" for what, n in summary.get("counts", {}).items()) or "nothing to do"
        settled = "settled" if summary.get("settled") else "NOT settled"
        error = f"; lookup failed: {shown(str(summary['lookup_error']))}" if summary.get("lookup_error") else ""
        given = ", ".join(f"{n} {v}" for v, n in summary.get("verdicts", {}).items() if v != "none")
        verdicts = f"; verdicts: {given}" if given else ""
        lines.append(f"last sweep: {s['finished_at']} ({ago(s['age_seconds'])} ago, took"
                     f" {s['finished_at_epoch'] - s['started_at_epoch']:.1f} s): {done}; {settled}{error}{verdicts}")
    return lines


def unfinished_line(u: Dict[str, Any]) -> str:
    """``ledger status``'s line on the operations without a result, from its ``unfinished``."""
    if not u["count"]:
        return "unfinished operations: none"
    line = f"unfinished operations: {u['count']}, of which {u['lapsed']} no longer running"
    o = u["oldest_lapsed"]
    if o is None:
        return line
    requeues = (f", {u['lapsed_requeues']} of them requeues (their object stays may_be_set until a sweep"
                " settles it)") if u["lapsed_requeues"] else ""
    return (f"{line} (the process died, or the ledger failed after the script ran: the result was never"
            f" recorded){requeues}; the oldest: {o['op']} {o['job_id']} (operation {o['id']}) started"
            f" {o['started_at']}, {ago(o['age_seconds'])} ago")


def prune_line(p: Dict[str, Any]) -> str:
    """The human ``ledger prune``, from ``prune_json``."""
    verb = "would remove" if p["dry_run"] else "removed"
    line = (f"prune{' (dry run)' if p['dry_run'] else ''}: {verb} {p['removed']} history row(s) of {p['jobs']}"
            f" settled job(s), finished before {p['before']} (older than {p['older_than_days']} day(s));"
            " every object keeps its newest row, unsettled and leased objects and unfinished rows are kept")
    if p["checkpointed"] is False:
        line += "; the WAL checkpoint could not finish (the ledger was busy): SQLite completes it later"
    return line


def migrate_lines(m: Dict[str, Any]) -> List[str]:
    """The human ``ledger migrate``, from ``migrate``'s object."""
    o, h = m["objects"], m["history"]
    return [
        f"migrate{' --merge' if m['merge'] else ''} {shown(m['from'])} -> {shown(m['to'])}:",
        f"  objects: {o['copied']} copied, {o['merged']} merged (took the less clear bit), {o['kept']} kept",
        f"  history rows: {h['copied']} copied, {h['skipped']} skipped (already there)",
        f"  last sweep: {m['last_sweep']}; leases: not copied (each operation and sweep takes its own)",
        f"  {m['not_clear']} object(s) not clear in {shown(m['to'])} now"
        + (": sweeps on that ledger settle them" if m["not_clear"] else ""),
    ]


def config_json(path: str, found: bool, settings: Iterable[Dict[str, Any]]) -> Dict[str, Any]:
    """``slurm-dsl config --json``'s one object: the file, whether one was read, and every setting with its source."""
    from ..ledger.choose import is_url
    from ..ledger.mariadb_config import shown_url

    rows = []
    for s in settings:
        # A URL's password as ***, wherever it was put: it is never shown (opening such a ledger is
        # refused anyway: credentials belong in its option file), and a screen of settings gets shared.
        value = s["value"]
        rows.append({**s, "value": shown_url(value, query=True) if value is not None and is_url(value) else value})
    return {"kind": "config", "file": path, "read": found, "settings": rows}


def config_text(report: Dict[str, Any], as_json: bool) -> str:
    if as_json:
        return json_line(report)
    rows = [(s["key"], "unset" if s["value"] is None else shown(s["value"], None), shown(s["origin"], None))
            for s in report["settings"]]
    key_width = max(len(key) for key, _, _ in rows)
    value_width = max(len(value) for _, value, _ in rows)
    lines = [f"{key:<{key_width}}  {value:<{value_width}}  {origin}" for key, value, origin in rows]
    file = shown(report["file"], None)
    lines.append(f"config file: {file}" if report["read"] else f"config file: none ({file} does not exist)")
    return as_lines(lines)
