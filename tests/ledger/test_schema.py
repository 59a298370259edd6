"""The ledger's tables stated once (``ledger.schema``): a new ledger created from them at once has
exactly the schema an old one reaches through every migration from version 0, in both dialects
(docs/contract.md §9.1), and the statements that name columns name the table's."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, List, Set, Tuple

import pytest

import slurm_dsl.ledger.mariadb as mariadb_module
import slurm_dsl.ledger.sqlite as sqlite_module
from slurm_dsl.core.jobinfo import JobInfo
from slurm_dsl.core.model import Op, Outcome, RequeueBit, Result
from slurm_dsl.core.settle import Recorded, Unsettled
from slurm_dsl.ledger import rows as ledger_rows
from slurm_dsl.ledger import schema
from slurm_dsl.ledger.choose import open_ledger
from slurm_dsl.ledger.records import JobObject
from tests.ledger_backends import MariaDbServer, Raw
from tests.ledger_ops import begin_operation, finish_operation

BASELINE = JobInfo(job_id="7", state="PENDING", requeue=True, restarts=0, priority=1, reason="None",
                   array_job_id=None, array_tasks=0)


def normal(sql: str) -> str:
    """``sql`` with its layout gone: whitespace collapsed, none around ``,``, ``(`` and ``)``
    (SQLite keeps a table's text as written, and ALTER TABLE ADD COLUMN splices into it)."""
    return re.sub(r"\s*([,()])\s*", r"\1", re.sub(r"\s+", " ", sql)).strip()


def sqlite_schema(path: Path) -> Set[Tuple[str, str, str, str]]:
    with Raw(str(path)) as conn:
        rows = conn.execute("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master")
        version = conn.execute("PRAGMA user_version")
    assert version == [(schema.CURRENT["sqlite"],)]
    return {(t, n, tb, normal(s)) for t, n, tb, s in rows}


def _migrations_only(monkeypatch: pytest.MonkeyPatch, cls: Any) -> None:
    """A new ledger of ``cls`` made the old way: every migration from version 0."""
    monkeypatch.setattr(cls, "_schema", lambda self: ((), 0))


def test_the_table_describes_the_version_the_migrations_reach() -> None:
    assert schema.CURRENT == {"sqlite": len(sqlite_module.MIGRATIONS), "mariadb": len(mariadb_module.MIGRATIONS)}


def test_a_new_sqlite_ledger_has_the_schema_every_migration_from_zero_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_ledger(str(tmp_path / "new.sqlite3")):
        pass
    with monkeypatch.context() as patch:
        _migrations_only(patch, sqlite_module.SqliteLedger)
        with open_ledger(str(tmp_path / "old.sqlite3")):
            pass
    new, old = sqlite_schema(tmp_path / "new.sqlite3"), sqlite_schema(tmp_path / "old.sqlite3")
    assert new == old
    # Every table, index and trigger is there, and each table's columns are the table's.
    names = {n for _, n, _, _ in new}
    assert {"objects_pending", "history_job", "history_unsettled", "history_key", "history_no_delete",
            "history_finish_once", "settlements_no_update", "settlements_no_delete"} <= names
    with Raw(str(tmp_path / "new.sqlite3")) as conn:
        for table in schema.TABLES:
            columns = tuple(r[1] for r in conn.execute(f"PRAGMA table_info({table.name})"))
            assert columns == table.names("sqlite")


def mariadb_schema(url: str) -> List[Tuple[str, ...]]:
    with Raw(url) as conn:
        tables = sorted(r[0] for r in conn.execute("SHOW TABLES"))
        created = [(t, re.sub(r" AUTO_INCREMENT=\d+", "", conn.execute(f"SHOW CREATE TABLE {t}")[0][1]))
                   for t in tables]
        triggers = [(*(str(v) for v in r[:3]), normal(str(r[3]))) for r in conn.execute(
            "SELECT trigger_name, event_manipulation, action_timing, action_statement"
            " FROM information_schema.triggers WHERE trigger_schema = DATABASE() ORDER BY trigger_name")]
        rows = conn.execute("SELECT one FROM write_lock") + conn.execute("SELECT version FROM schema_version")
    return created + triggers + [tuple(str(r[0]) for r in rows)]


def test_a_new_mariadb_ledger_has_the_schema_every_migration_from_zero_gives(
    mariadb_server: MariaDbServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with mariadb_server.database() as new_url, mariadb_server.database() as old_url:
        with open_ledger(new_url):
            pass
        with monkeypatch.context() as patch:
            _migrations_only(patch, mariadb_module.MariaDbLedger)
            with open_ledger(old_url):
                pass
        new, old = mariadb_schema(new_url), mariadb_schema(old_url)
        assert new == old
        assert new[-1] == ("1", str(schema.CURRENT["mariadb"]))


def test_a_mariadb_database_a_crash_left_half_made_is_migrated_from_zero(mariadb_location: str) -> None:
    # Tables of the ledger there but no version: the migrations (each safe to run again) carry on.
    with Raw(mariadb_location) as conn:
        conn.execute(mariadb_module.MIGRATIONS[0][0])  # objects, as schema 2 made it
    with open_ledger(mariadb_location) as ledger:
        assert ledger.schema_version() == schema.CURRENT["mariadb"]
    with Raw(mariadb_location) as conn:
        columns = tuple(r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE()"
            " AND table_name = 'objects' ORDER BY ordinal_position"))
    assert columns == schema.OBJECTS.names("mariadb")


def test_the_start_and_finish_columns_are_the_historys_but_its_id() -> None:
    assert set(schema.START) | set(schema.FINISH) | {"id"} == set(schema.HISTORY.names("sqlite"))
    assert not set(schema.START) & set(schema.FINISH)
    assert schema.START[:4] == ("job_id", "op", "nonce", "started_at")


def test_what_settling_reads_of_a_row_is_the_fields_of_the_values_it_builds() -> None:
    assert ledger_rows.TO_SETTLE_COLUMNS == tuple(f.name for f in dataclasses.fields(Recorded))
    assert ledger_rows.UNSETTLED_COLUMNS == Unsettled._fields
    assert ledger_rows.OBJECT_COLUMNS == tuple(f.name for f in dataclasses.fields(JobObject))


@pytest.mark.parametrize(("columns", "table"), [
    (ledger_rows.OBJECT_COLUMNS, schema.OBJECTS),
    (ledger_rows.HISTORY_COLUMNS, schema.HISTORY),
    (ledger_rows.TO_SETTLE_COLUMNS, schema.HISTORY),
    (ledger_rows.IMPORT_COLUMNS, schema.HISTORY),
    (ledger_rows.APPENDED, schema.HISTORY),
    (ledger_rows.SAME_ROW, schema.HISTORY),
    (ledger_rows.SETTLEMENT_COLUMNS, schema.SETTLEMENTS),
    (ledger_rows.SETTLE_COLUMNS, schema.SETTLEMENTS),
])
def test_every_column_a_statement_lists_is_one_of_its_tables_in_both_dialects(
    columns: Tuple[str, ...], table: schema.Table
) -> None:
    assert columns and len(set(columns)) == len(columns)
    assert set(columns) <= set(table.names("sqlite")) & set(table.names("mariadb"))


def test_a_history_row_read_by_name_comes_back_as_written(tmp_path: Path) -> None:
    # Every column of a row, each a distinct value, read back through the statements built from
    # the table: a column out of place would put a value in the wrong field.
    with open_ledger(str(tmp_path / "ledger.sqlite3")) as ledger:
        op_id = begin_operation(ledger, "7", Op.HOLD, "n1", 10.0, actor="alice", baseline_at=9.0, key="k1",
                                       retry_of=3, ends_by=20.0, baseline=BASELINE)
        held = Outcome(op=Op.HOLD, job_id="7", result=Result.OK, requeue_bit=None, detail="held")
        finish_operation(ledger, op_id, held, b"err", 11.0)
        [e] = ledger.history("7")
        assert (e.id, e.job_id, e.op, e.nonce, e.started_at, e.prior_bit) == (op_id, "7", Op.HOLD, "n1", 10.0,
                                                                            RequeueBit.CLEAR)
        assert (e.finished_at, e.result, e.detail, e.stderr, e.stderr_len) == (11.0, Result.OK, "held", b"err", 3)
        assert (e.actor, e.baseline, e.baseline_at, e.key, e.retry_of, e.ends_by) == ("alice", BASELINE, 9.0, "k1",
                                                                                      3, 20.0)
        [r] = ledger.recorded([op_id]).values()
        assert (r.id, r.job_id, r.op, r.result, r.started_at, r.finished_at, r.ends_by, r.baseline_at) == (
            op_id, "7", Op.HOLD, Result.OK, 10.0, 11.0, 20.0, 9.0)
