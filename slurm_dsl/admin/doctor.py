"""``slurm-dsl doctor``: is this controller ready for slurm-dsl? (docs/contract.md §10, its checks listed there).

One line an admin can act on per check: ``ok``, ``warn`` or ``fail``.  Doctor only looks: it creates,
migrates and writes nothing.  The checks marked pure take what was read; the rest run through
``host.process`` and the ledger."""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass
from typing import Dict, List, Mapping, NamedTuple, Optional, Tuple

from ..core.jobid import MAX_JOB_ID
from ..core.model import ConfigError, DSLError, LookupFailed
from ..core.script import PROBE_STATUS, PROBE_STDERR, render_probe
from ..host import process
from ..host.binaries import find_scontrol, find_squeue, where_looked
from ..ledger.choose import is_url, sqlite_path
from ..lookups import sight
from ..lookups.choose import make_lookup
from ..lookups.saves import (
    Controllers,
    conf_path,
    hand_back_possible,
    read_controllers,
    slurm_conf,
    state_save_location,
)
from ..lookups.squeue import JOBINFO, JOBINFO_ENV, SqueueLookup, find_jobinfo, first_line, slurm_version

OK, WARN, FAIL = "ok", "warn", "fail"
# How the jobinfo check's detail begins without a helper, and says one that cannot start: the
# sweep check reads them (a sweep falls back to squeue then, and only then).
NO_HELPER, CANNOT_RUN = "none (", "cannot be run"
CHECK_TIMEOUT = 20.0  # seconds each check may take
PROBE_DEADLINE = 0.5  # seconds: the wrapper probe's call 1 is long done by then, its call 2 still asleep
CLOCK_WARN = 60.0  # seconds between this host's clock and a MariaDB ledger server's worth a warning
DB_BUSY_TIMEOUT = 1.0  # the probe's lock wait, so its read timeout is this + ledger.mariadb.READ_SLACK


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str  # render.check_json is its --json object


class Units(NamedTuple):
    """The account the units run as, which must own the ledger directory, and how it was told."""

    name: str
    uid: int
    told: str


def run_checks(
    scontrol: Optional[str], squeue: Optional[str], ledger_path: str, lookup_kind: str = "auto", *,
    became_owner_of: Optional[str] = None, service_account: Optional[str] = None, config_file: str = "",
) -> List[Check]:
    """Every check, in order.  ``became_owner_of``: the ledger directory whose owner root's command became."""
    checks: List[Check] = []
    path = find_scontrol(scontrol)
    squeue = find_squeue(squeue, path)
    looked = where_looked("scontrol", scontrol, path)
    if os.access(path, os.X_OK):
        checks.append(Check("scontrol", OK, f"{path} ({looked})"))
    else:
        checks.append(Check("scontrol", FAIL, f"{path} is missing or not executable ({looked}; --scontrol PATH)"))
    checks.append(_wrapper_check())
    ping = process.run_argv((path, "ping"), timeout=CHECK_TIMEOUT)
    up = ping.returncode == 0 and b" is UP" in ping.stdout and not ping.pipes_held
    text = (ping.stdout or ping.stderr).decode("utf-8", "replace").strip().splitlines()
    said = text[0] if text else f"scontrol ping exited {ping.returncode}"
    if ping.pipes_held:
        said = f"scontrol ping's output was still held open after it exited (a process that left its session?): {said}"
    checks.append(Check("slurmctld", OK if up else FAIL, said))
    try:
        checks.append(slurm_check(slurm_version(squeue), squeue))
    except LookupFailed as exc:
        checks.append(Check("slurm", FAIL, f"cannot tell the Slurm version: {exc.reason}"))
    asks: Optional[str] = None
    try:
        lookup = make_lookup(lookup_kind, squeue)
        asks = lookup.name
        how = f"{squeue} -r -O" if isinstance(lookup, SqueueLookup) else f"{type(lookup).__name__}"
        checks.append(Check("lookup", OK, f"--lookup {lookup_kind}: sweeps look jobs up with {lookup.name} ({how})"))
    except ConfigError as exc:
        checks.append(Check("lookup", FAIL, str(exc)))
    helper = jobinfo_check()
    checks += [helper, sweep_check(asks, helper)]
    conf = slurm_conf()
    hand_back = hand_back_possible(conf=conf)
    location = state_save_location(conf=conf)
    where = f"{conf_path()}, {os.path.join(location, 'heartbeat') if location else 'StateSaveLocation'}"
    if conf.unreadable is not None:
        where += f" (slurm.conf: {conf.unreadable})"
    control = read_controllers(location=location, conf=conf) if hand_back else NOTHING_READ
    checks.append(hand_back_check(hand_back, control, where))
    config = _show_config(path) if up else None
    checks += [] if not up else _config_checks(config)
    checks += _ledger_checks(ledger_path, units_account(service_account, config, config_file))
    euid = os.geteuid()
    checks.append(caller_check(euid, _account_name(euid), config, became_owner_of))
    return checks


NOTHING_READ = Controllers(None, None)  # one controller: nothing to read


# The Slurm majors slurm-dsl is tested on (README.md's support table, docs/testing.md §2).
SUPPORTED = ((22, 5), (24, 11), (26, 5))


def slurm_check(version: Tuple[int, int], squeue: str) -> Check:
    """The Slurm major, warned on when it is not one slurm-dsl is tested on (docs/contract.md §5)."""
    said = f"Slurm {version[0]}.{version[1]:02d} ({squeue} --version)"
    if tuple(version[:2]) in SUPPORTED:
        return Check("slurm", OK, said)
    tested = ", ".join(f"{a}.{b:02d}" for a, b in SUPPORTED)
    return Check("slurm", WARN, f"{said}: not a major slurm-dsl is tested on ({tested}); a refusal whose text"
                                " changed reads as unknown (README.md, supported versions)")


def hand_back_check(hand_back: bool, control: Controllers, where: str = "") -> Check:
    """Whether ``absent`` can be read where a backup may hand back (docs/contract.md §13.6).  Pure."""
    if not hand_back:
        return Check("hand-back", OK, "slurm.conf names one controller: no hand-back can hold a request back")
    if control.beat is None or control.writer is None:
        return Check("hand-back", WARN, "slurm.conf may name a backup controller, but the heartbeat in"
                     f" StateSaveLocation or slurm.conf's controllers cannot be read ({where}): no unknown operation"
                     " will be read absent (it stays unknown, and a keyed --retry runs nothing again); run slurm-dsl"
                     " as root or the SlurmUser")
    held = "" if not control.listening else (
        ", and a controller before it still listens: a hand-back in progress" if control.listening[-1] is not False
        else ", every controller before it refused a connection")
    return Check("hand-back", OK, f"the heartbeat is controller {control.writer}'s{held} (looked at before each"
                 f" lookup that may say absent, which waits until two heartbeats are seen written after the end and"
                 f" their writer has been in control for {control.held_for:.0f} s since, on this host's boot clock)")


def _account_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid with no passwd entry (a container's): its number names it
        return str(uid)


def _run_as(slurm_user: str, name: str, became_owner_of: Optional[str]) -> str:
    if became_owner_of is not None:
        # Root asked, and runs as the ledger directory's owner: "run as root" would not help.
        where = shlex.quote(became_owner_of)
        return (f"root's commands run as {name} because the ledger directory {became_owner_of} is its; to act as"
                f" root, make it root's (chown -R root:root {where}, while no sweep runs) and run the units as root"
                " (a systemd drop-in with User=root and Group=root: README.Debian)")
    who = "root" if slurm_user == "root" else f"root or {slurm_user}"
    return f"run slurm-dsl as {who} (the systemd units' User=)"


def caller_check(
    euid: int, name: str, config: Optional[Mapping[str, str]], became_owner_of: Optional[str] = None
) -> Check:
    """Whether the account running slurm-dsl may act on other users' jobs.  Pure.

    ``config`` is None when ``show config`` could not be read; ``became_owner_of`` makes the fix say how
    to act as root."""
    who = f"uid {euid} ({name})"
    if euid == 0:
        return Check("caller", OK, "root: may act on every user's job")
    if config is None:
        return Check("caller", WARN, f"{who}: cannot tell whether it may act on other users' jobs (scontrol show config"
                     f" could not be read); {_run_as('the SlurmUser of slurm.conf', name, became_owner_of)}")
    slurm_user = config.get("SlurmUser", "")
    found = sight.slurm_user(config)
    if found and found[1] == euid:
        return Check("caller", OK, f"{who} is slurm.conf's SlurmUser ({slurm_user}): may act on every user's job")
    fix = _run_as(found[0] if found else "the SlurmUser of slurm.conf", name, became_owner_of)
    accounting = config.get("AccountingStorageType", "")
    if sight.accounting_on(config):
        return Check("caller", WARN, f"{who} is neither root nor the SlurmUser ({slurm_user or '?'}): it may act on"
                     f" other users' jobs only with an Operator or Administrator AdminLevel in slurmdbd"
                     f" ({accounting}), which doctor cannot see (sacctmgr show user {shlex.quote(name)}); if it has"
                     f" none: sacctmgr modify user {shlex.quote(name)} set adminlevel=Operator, or {fix}")
    return Check("caller", FAIL, f"{who} is neither root nor the SlurmUser ({slurm_user or '?'}), and there is no"
                 " accounting (no AdminLevel): its holds and restores of other users' jobs are refused and lookups"
                 f" may not see every job; {fix}")


def jobinfo_check(environ: Optional[Mapping[str, str]] = None) -> Check:
    """slurm-dsl-jobinfo, as every lookup finds it, asked for ``MAX_JOB_ID``, an id no job has."""
    environ = os.environ if environ is None else environ
    try:
        helper = find_jobinfo(dict(environ))
    except DSLError as exc:
        return Check("jobinfo", FAIL, str(exc))
    if helper is None:
        why = f"${JOBINFO_ENV} is empty" if environ.get(JOBINFO_ENV) == "" else f"not installed at {JOBINFO}"
        return Check("jobinfo", OK, f"{NO_HELPER}{why}): lookups of a few jobs among many ask squeue, a process per job"
                     " (contrib/README.md says how to build slurm-dsl-jobinfo)")
    done = process.run_argv((helper, os.urandom(16).hex(), str(MAX_JOB_ID)), timeout=CHECK_TIMEOUT)
    said = first_line(done.stderr) or "no message"
    if done.timed_out:
        return Check("jobinfo", WARN, f"{helper} did not answer within {CHECK_TIMEOUT:g} s")
    if done.returncode in (126, 127):
        return Check("jobinfo", WARN, f"{helper} {CANNOT_RUN} (status {done.returncode}: {said}): every lookup asks"
                     " squeue instead, with a warning; install the slurm-dsl-jobinfo built for this Slurm (the"
                     " package of this release, or contrib/jobinfo/build)")
    if done.returncode != 0 or done.pipes_held:
        return Check("jobinfo", WARN, f"{helper} could not ask slurmctld (exit {done.returncode}: {said})")
    return Check("jobinfo", OK, f"{helper}: asks slurmctld for jobs one by one in one process")


def sweep_check(lookup: Optional[str], helper: Check) -> Check:
    """What a sweep asks slurmctld through: slurm-dsl-jobinfo, else squeue.  Pure.

    ``lookup`` None: the lookup cannot be made.  A helper that starts but cannot ask makes lookups fail,
    not fall back."""
    if lookup is None:
        return Check("sweep", FAIL, "sweeps cannot look jobs up: see the lookup check")
    if lookup != "squeue":
        return Check("sweep", OK, f"sweeps look jobs up with {lookup}; slurm-dsl-jobinfo is not used")
    build = f"contrib/jobinfo/build {JOBINFO} (from the sdist or a checkout: docs/packaging.md)"
    if helper.status == OK and not helper.detail.startswith(NO_HELPER):
        return Check("sweep", OK, "sweeps ask slurmctld for a few jobs through slurm-dsl-jobinfo")
    if helper.status == OK or CANNOT_RUN in helper.detail:
        return Check("sweep", helper.status, "sweeps fall back to squeue, a process per job looked up; build"
                     f" slurm-dsl-jobinfo for this Slurm with {build}")
    if helper.status == FAIL:
        return Check("sweep", FAIL, "sweeps cannot choose how to look jobs up: see the jobinfo check")
    return Check("sweep", WARN, "sweeps' lookups fail while slurm-dsl-jobinfo starts but cannot ask slurmctld (see"
                 f" the jobinfo check), and do not fall back to squeue: build it for this Slurm with {build}")


def _wrapper_check() -> Check:
    """Run the wrapper's own ``call`` on a probe (``script.render_probe``) to a short deadline."""
    probe = process.run_script(render_probe(), timeout=PROBE_DEADLINE)
    if (probe.stderr, probe.returncode, probe.timed_out, probe.pipes_held) == (PROBE_STDERR, PROBE_STATUS, True, False):
        return Check("wrapper", OK, "/bin/sh traps the deadline's TERM: calls 1 3, 2 124 (stopped), 3 75 (not started)")
    got = probe.stderr.replace(b"\x1e", b"<RS>").decode("utf-8", "replace").strip().replace("\n", " | ")
    return Check("wrapper", FAIL, f"the deadline wrapper does not work under /bin/sh: exit {probe.returncode},"
                 f" stderr {got[:300]!r}; want calls 1 3, 2 124, 3 75")


def _show_config(scontrol: str) -> Optional[Dict[str, str]]:
    """``scontrol show config`` read (``sight.parse_config``), or None if it failed."""
    done = process.run_argv((scontrol, "show", "config"), timeout=CHECK_TIMEOUT)
    if done.returncode != 0 or done.pipes_held:
        return None
    return sight.parse_config(done.stdout.decode("utf-8", "replace"))


def _config_checks(config: Optional[Mapping[str, str]]) -> List[Check]:
    if config is None:
        return [Check("config", WARN, "scontrol show config failed")]
    checks = []
    if config.get("JobRequeue") == "0":
        checks.append(Check("JobRequeue", OK, "0: jobs default to Requeue=0"))
    else:
        value = config.get("JobRequeue", "?")
        checks.append(Check("JobRequeue", WARN, f"{value}: jobs default to Requeue=1, so a job at Requeue=1 is not"
                            " necessarily one a requeue left set (sweep --orphans is not meaningful)"))
    plugins = config.get("JobSubmitPlugins", "")
    if "lua" in plugins.split(","):
        checks.append(Check("job_submit", OK, "lua (is it contrib/slurm/job_submit.lua? see contrib/README.md)"))
    else:
        checks.append(Check("job_submit", WARN, f"JobSubmitPlugins={plugins or '(null)'}: users can set Requeue=1;"
                            " install contrib/slurm/job_submit.lua"))
    return checks


def units_account(
    service_account: Optional[str], config: Optional[Mapping[str, str]], config_file: str
) -> Optional[Units]:
    """The config file's ``service_account``, else slurm.conf's SlurmUser; None when neither tells."""
    import pwd

    if service_account is not None:
        try:
            uid = pwd.getpwnam(service_account).pw_uid
        except KeyError:
            return None
        return Units(service_account, uid, f"service_account in {config_file}")
    found = None if config is None else sight.slurm_user(config)
    return None if found is None else Units(found[0], found[1], "slurm.conf's SlurmUser")


def _ledger_checks(location: str, units: Optional[Units]) -> List[Check]:
    return _mariadb_checks(location) if is_url(location) else [_sqlite_check(location, units)]


def _schema_check(where: str, dialect: str, schema: int, not_clear: Optional[int], none_yet: str) -> Check:
    """The ledger line from its schema version (0: none yet) against the ``dialect``'s; either backend."""
    from ..ledger.schema import CURRENT

    current = CURRENT[dialect]
    detail = f"{where} (schema {schema}"
    if schema == 0:
        return Check("ledger", WARN, f"{detail}): {none_yet}: the first slurm-dsl to open it creates the ledger's"
                     " tables")
    if schema < current:
        return Check("ledger", WARN, f"{detail}, older than this slurm-dsl's {current}): the next slurm-dsl to open"
                     " it migrates it")
    if schema > current or not_clear is None:
        return Check("ledger", FAIL, f"{detail}, newer than this slurm-dsl's {current}): upgrade slurm-dsl on this"
                     " host")
    return Check("ledger", OK if not not_clear else WARN, f"{detail}, {not_clear} object(s) not clear)"
                 + ("" if not not_clear else ": run slurm-dsl sweep"))


def _sqlite_check(location: str, units: Optional[Units]) -> Check:
    from ..ledger.sqlite import look

    path = sqlite_path(location)
    try:
        found = look(path, busy_timeout=DB_BUSY_TIMEOUT)
    except DSLError as exc:
        # A ledger or directory another account could write or own (a symlink, a foreign owner,
        # group/world-writable), or a file that is no ledger: the message says the fix.
        return Check("ledger", FAIL, str(exc))
    return sqlite_check(path, found.directory_uid, found.mode, found.schema, found.not_clear, units)


def sqlite_check(
    path: str, directory_uid: Optional[int], mode: Optional[int], schema: int, not_clear: Optional[int],
    units: Optional[Units],
) -> Check:
    """The ledger line of an SQLite ledger as ``ledger.sqlite.look`` found it.  Pure.

    ``directory_uid`` None: no directory; ``mode`` None: no file; ``units`` None: not known."""
    directory = os.path.dirname(path) or "."
    quoted = shlex.quote(directory)
    who = "" if units is None else f"{units.name} (uid {units.uid}, {units.told})"
    if directory_uid is None:
        made = f"no ledger yet: the first operation or sweep creates {directory} (0700) and {path}, as its account"
        if units is None or units.uid == 0:
            return Check("ledger", OK, made)
        return Check("ledger", WARN, f"{made}; made by root, {directory} would be root's, which the units' account,"
                     f" {who}, cannot write: make it that account's first (install -d -m 0700 {quoted} &&"
                     f" chown {shlex.quote(units.name)}: {quoted})")
    if units is not None and units.uid not in (0, directory_uid):
        return Check("ledger", FAIL, f"ledger directory {directory} is not writable by uid {units.uid}, the units'"
                     f" account, {who}: it is uid {directory_uid}'s; chown -R {shlex.quote(units.name)}: {quoted}"
                     " (while no sweep runs)")
    if mode is None:
        return Check("ledger", OK, f"no ledger yet: the first operation or sweep creates {path}")
    found = _schema_check(path, "sqlite", schema, not_clear, "it holds no slurm-dsl schema")
    # What the ledger's rules let through: a file others may read (the history shows every job's operations).
    if found.status != FAIL and mode & 0o077:
        return Check("ledger", WARN, f"{found.detail}: mode {mode:04o}, should be 0600 (chmod 600 {shlex.quote(path)})")
    return found


def _mariadb_checks(url: str) -> List[Check]:
    """The option file, the server, its clock and the schema, each a line; the first failure ends them."""
    from ..ledger import mariadb, mariadb_config

    try:
        where = mariadb_config.parse_url(url)
    except ConfigError as exc:
        return [Check("ledger", FAIL, str(exc))]
    cnf = where.option_file
    try:
        mariadb_config.read_option_file(cnf)  # its checks: a regular file of ours or root's, 0600 (root's: 0640)
        st = os.stat(cnf)
    except ConfigError as exc:
        return [Check("ledger-cnf", FAIL, str(exc))]
    except OSError as exc:
        return [Check("ledger-cnf", FAIL, f"option file {cnf}: {exc.strerror}")]
    checks = [Check("ledger-cnf", OK, f"{cnf}: a regular file of uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}")]
    try:
        found = mariadb.probe(url, busy_timeout=DB_BUSY_TIMEOUT)
    except DSLError as exc:  # unreachable, refused, no such database; or no PyMySQL
        return [*checks, Check("ledger-db", FAIL, str(exc))]
    rtt = (found.after - found.before) * 1000
    checks.append(Check("ledger-db", OK, f"{where.url}: server {found.version} (answered in {rtt:.1f} ms)"))
    offset = found.clock_offset
    how = (f"{abs(offset):.2f} s {'ahead of' if offset >= 0 else 'behind'} this host's"
           f" (give or take {rtt / 2:.1f} ms)")
    if abs(offset) > CLOCK_WARN:
        checks.append(Check("ledger-time", WARN, f"the server's clock is {how}: leases and back-offs use the"
                            " server's and no rule compares it with another clock, so they still agree,"
                            " but times in logs and history will not match"
                            " this host's; check NTP on both"))
    else:
        checks.append(Check("ledger-time", OK, f"the server's clock is {how} (leases and back-offs use the server's)"))
    checks.append(_schema_check(where.url, "mariadb", found.schema, found.not_clear,
                                f"database {where.database} is empty"))
    return checks
