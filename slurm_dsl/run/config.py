"""The configuration: the config file, the environment, and where each effective setting comes from
(docs/contract.md §8, §10.2).  One reading for the command line and the library: ``configure``.

``parse`` is pure (text in, values or ``ConfigFileError`` out); ``read`` is the edge, opening the
file as the ledger is opened; ``resolve`` puts flag, environment, file and default in that order.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from ..core.jobinfo import LOOKUP_KINDS
from ..core.model import ConfigError
from ..core.numbers import seconds
from ..core.plain import not_empty
from ..core.settle import DEFAULT_SETTLE_DELAY, MIN_SETTLE_DELAY
from ..core.shown import shown
from ..ledger.base import DEFAULT_PATH
from .deadlines import DEFAULT_TIMEOUT, MAX_TIMEOUT, MIN_TIMEOUT, timeout_of
from .pace import DEFAULT_RATE, rate_of

DEFAULT_CONFIG = "/etc/slurm-dsl/slurm-dsl.conf"
SECTION = "slurm-dsl"
MAX_CONFIG = 64 * 1024  # bytes: a config file is a few lines; anything longer is not one
LOG_LEVELS = ("error", "warning", "info", "debug")


class ConfigFileError(ConfigError):
    """A config file that cannot be used; ``unreadable``: not read at all (exit 1), else a bad line (exit 2)."""

    def __init__(self, message: str, *, unreadable: bool = False) -> None:
        super().__init__(message)
        self.unreadable = unreadable


def _q(text: str) -> str:
    """``text`` from a config file, quoted and escaped for a message (docs/contract.md §10.1)."""
    return f"'{shown(text, 80)}'"


def _masked(value: str) -> str:
    """A refused value as a message may quote it: never a URL's password, even under a mistyped scheme."""
    if "@" not in value:
        return value
    from ..ledger.mariadb_config import shown_url

    return shown_url(value)


def _path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError("an absolute path")
    return value


def _location(value: str) -> str:
    if not (value.startswith("/") or value.startswith(("sqlite:/", "mariadb://", "mysql://"))):
        raise ValueError("an absolute path, sqlite:/PATH or a mariadb:// URL")
    return value


def _seconds(low: float, high: float) -> Callable[[str], str]:
    def check(value: str) -> str:
        if seconds(value, low, high) is None:  # core.numbers' ASCII rule: no 1_0, no ٥, no nan
            raise ValueError(f"a number of seconds from {low:g} to {high:g}, in ASCII digits")
        return value

    return check


def _timeout(value: str) -> str:
    if timeout_of(value) is None:  # the one timeout rule, the command line's and the library's
        raise ValueError(f"a number of seconds from {MIN_TIMEOUT:g} to {MAX_TIMEOUT:g}, in ASCII digits")
    return value


def _rate(value: str) -> str:
    rate_of(value)  # InvalidInput, a ValueError, says what a rate is
    return value


def _account(value: str) -> str:
    if not _ACCOUNT.fullmatch(value):
        raise ValueError("an account name (letters, digits, _ . -)")
    return value


_ACCOUNT = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}", re.ASCII)


def _one_of(words: Tuple[str, ...]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in words:
            raise ValueError("one of " + ", ".join(words))
        return value

    return check


# The classes below are plain ones with __slots__, not dataclasses nor NamedTuples: every command
# imports this module before its first Slurm call, and those compile code at import (a dataclass
# its methods, a NamedTuple each string annotation).  Measured on the lab, with bytecode cached:
# the module's code ran in 2.9 ms with three dataclasses, 0.23 ms as it is.


class Setting:
    """One setting, declared once, from which every reading and listing of it comes.  ``default`` None:
    unset, the command decides; ``check`` raises ValueError saying what a value must be."""

    __slots__ = ("check", "default", "env", "env_help", "example", "flag", "help", "key", "note", "number")

    def __init__(
        self, key: str, env: Optional[str], default: Optional[str], check: Callable[[str], str], help: str, *,
        flag: Optional[str] = None, number: bool = False, env_help: str = "", example: str = "", note: str = "",
    ) -> None:
        self.key, self.env, self.default, self.check, self.help = key, env, default, check, help
        self.flag, self.number, self.env_help, self.example, self.note = flag, number, env_help, example, note

    def __repr__(self) -> str:
        return f"Setting({self.key!r})"


SETTINGS: Tuple[Setting, ...] = (
    Setting("ledger", "SLURM_DSL_LEDGER", DEFAULT_PATH, _location,
            "the ledger: an SQLite file (absolute path or sqlite:/PATH) or a mariadb:// URL",
            flag="--ledger", env_help="the ledger, when --ledger is not given (it beats the config file)",
            example=DEFAULT_PATH, note="an SQLite file, or mariadb://HOST[:PORT]/DATABASE"),
    Setting("scontrol", "SLURM_DSL_SCONTROL", None, _path,
            "the scontrol to run (unset: the first on PATH, else /usr/bin/scontrol)",
            flag="--scontrol", env_help="the scontrol to run, when --scontrol is not given",
            example="/usr/bin/scontrol"),
    Setting("squeue", "SLURM_DSL_SQUEUE", None, _path,
            "the squeue to run (unset: the one beside the scontrol in use, else the first on PATH)",
            flag="--squeue", env_help="the squeue to run, when --squeue is not given", example="/usr/bin/squeue"),
    Setting("lookup", "SLURM_DSL_LOOKUP", "auto", _one_of(LOOKUP_KINDS),
            "how sweeps and settling look jobs up: auto, squeue or pyslurm",
            flag="--lookup", env_help="how sweeps look jobs up (auto, squeue, pyslurm), when --lookup is not given",
            example="auto", note="auto, squeue or pyslurm"),
    Setting("timeout", None, f"{DEFAULT_TIMEOUT:g}", _timeout,
            "the whole command's deadline in seconds, for commands given no --timeout",
            flag="--timeout", number=True, example=f"{DEFAULT_TIMEOUT:g}",
            note="the deadline of commands given no --timeout"),
    Setting("settle_delay", None, f"{DEFAULT_SETTLE_DELAY:g}", _seconds(MIN_SETTLE_DELAY, MAX_TIMEOUT),
            "seconds after an operation's end before its effect may be judged absent (at least 2)",
            flag="--settle-delay", number=True, example="10"),
    Setting("rate", None, f"{DEFAULT_RATE:g}", _rate,
            "calls a second to slurmctld at most, on every path (0: unpaced); a call whose turn comes after"
            " the deadline is expired, nothing done",
            flag="--rate", number=True, example=f"{DEFAULT_RATE:g}",
            note="calls a second to slurmctld at most (root is exempt from its own rate limiting)"),
    Setting("redo_lost", None, "no", _one_of(("yes", "no")),
            "whether a sweep runs the key of each keyed operation it finds lost in a crash or takeover again"
            " (yes or no)",
            flag="--redo-lost", example="no", note="yes: a lost keyed change is done again by the sweep that finds it"),
    Setting("metrics_file", None, None, _path,
            "the sweep's Prometheus textfile (unset: none written)",
            flag="--metrics-file", example="/var/lib/prometheus/node-exporter/slurm_dsl.prom"),
    # -v raises it (one level per v): cli._apply_config, which shows it as the flag's then.
    Setting("log_level", None, "warning", _one_of(LOG_LEVELS),
            "what is logged to stderr (the journal under systemd): error, warning, info or debug",
            example="warning", note="error, warning, info or debug"),
    Setting("service_account", None, None, _account,
            "the account root's commands run as on an SQLite ledger in its directory (unset: slurm.conf's"
            " SlurmUser, asked of scontrol show config only then); another account's directory is refused",
            example="slurm",
            note="root's commands on a ledger in its directory run as it (unset: slurm.conf's SlurmUser)"),
)
BY_KEY: Dict[str, Setting] = {s.key: s for s in SETTINGS}


def parse(text: bytes, path: str) -> Dict[str, Tuple[str, int]]:
    """The settings a config file's bytes give: key -> (value, line number); else ``ConfigFileError``."""
    def fail(number: int, why: str) -> ConfigFileError:
        return ConfigFileError(f"{shown(path, 200)}, line {number}: {why}")

    if len(text) > MAX_CONFIG:
        raise ConfigFileError(f"{shown(path, 200)}: longer than {MAX_CONFIG} bytes: not a config file")
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(text[: exc.start].count(b"\n") + 1, "not UTF-8 text") from None
    found: Dict[str, Tuple[str, int]] = {}
    section: Optional[str] = None
    for number, raw in enumerate(decoded.split("\n"), 1):
        line = raw.strip(" \t\r")
        if "\x00" in line:
            raise fail(number, "a NUL byte")
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise fail(number, f"a section header must be [{SECTION}], not {_q(line)}")
            name = line[1:-1].strip()
            if name != SECTION:
                raise fail(number, f"unknown section [{shown(name, 80)}]: the only one is [{SECTION}]")
            if section is not None:
                raise fail(number, f"[{SECTION}] given twice")
            section = name
            continue
        key, equals, value = line.partition("=")
        key, value = key.strip(" \t"), value.strip(" \t")
        if not equals or not key:
            raise fail(number, f"expected key = value, not {_q(line)}")
        if section is None:
            raise fail(number, f"{_q(key)} comes before the [{SECTION}] section")
        setting = BY_KEY.get(key)
        if setting is None:
            raise fail(number, f"unknown key {_q(key)}: the keys are {', '.join(BY_KEY)}")
        if key in found:
            raise fail(number, f"{key} given twice (first on line {found[key][1]})")
        try:
            found[key] = (setting.check(value), number)
        except ValueError as exc:
            raise fail(number, f"{key} must be {exc}, not {_q(_masked(value))}") from None
    return found


def read(path: str, *, required: bool) -> Dict[str, Tuple[str, int]]:
    """The settings of the config file at ``path``, opened as the ledger is (docs/contract.md §10.2).
    A missing file gives no settings unless ``required``."""
    found = _read(path, required=required)
    return {} if found is None else found


def _read(path: str, *, required: bool) -> Optional[Dict[str, Tuple[str, int]]]:
    """``read``, with None for a missing file that is not ``required`` (one failed open())."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        if required:
            raise ConfigFileError(f"no config file at {shown(path, 200)}", unreadable=True) from None
        return None
    except OSError as exc:
        why = "a symlink: refused (a config file is never read through one)" if os.path.islink(path) else (
            exc.strerror or str(exc))
        raise ConfigFileError(f"cannot read config file {shown(path, 200)}: {why}", unreadable=True) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigFileError(f"config file {shown(path, 200)} is not a regular file", unreadable=True)
        if st.st_uid not in (0, os.geteuid()):
            raise ConfigFileError(
                f"config file {shown(path, 200)} belongs to uid {st.st_uid}, neither root nor this account"
                f" (uid {os.geteuid()}): refused; chown root {shown(path, 200)}", unreadable=True,
            )
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ConfigFileError(
                f"config file {shown(path, 200)} is writable by group or others"
                f" (mode {stat.S_IMODE(st.st_mode):04o}): refused; chmod go-w {shown(path, 200)}", unreadable=True,
            )
        chunks: List[bytes] = []
        while sum(map(len, chunks)) <= MAX_CONFIG:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise ConfigFileError(f"cannot read config file {shown(path, 200)}: {why}", unreadable=True) from None
    finally:
        os.close(fd)
    return parse(b"".join(chunks), path)


def config_path(explicit: Optional[str], env: Mapping[str, str]) -> Tuple[str, bool]:
    """The config file to read, and whether it must exist (not the default one)."""
    if explicit:
        return explicit, True
    if env.get("SLURM_DSL_CONFIG"):
        return env["SLURM_DSL_CONFIG"], True
    return DEFAULT_CONFIG, False


class Loaded:
    """The config file a command uses: its path, whether there was one to read, and its settings."""

    __slots__ = ("found", "path", "settings")

    def __init__(self, path: str, found: bool, settings: Dict[str, Tuple[str, int]]) -> None:
        self.path, self.found, self.settings = path, found, settings


def load(explicit: Optional[str], env: Mapping[str, str]) -> Loaded:
    """The config file (``explicit``: ``--config``), read; ``ConfigFileError`` as ``read`` raises it."""
    path, required = config_path(explicit, env)
    found = _read(path, required=required)
    return Loaded(path, found is not None, {} if found is None else found)


class Effective:
    """One setting's effective value (None: unset) and its ``source``: ``flag``, ``env``, ``file`` or ``default``."""

    __slots__ = ("key", "origin", "source", "value")

    def __init__(self, key: str, value: Optional[str], source: str, origin: str) -> None:
        self.key, self.value, self.source, self.origin = key, value, source, origin

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Effective) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]  # equal by value, and not frozen

    def __repr__(self) -> str:
        return f"Effective({self.key!r}, {self.value!r}, {self.source!r}, {self.origin!r})"

    def to_json(self) -> Dict[str, Optional[str]]:
        return {"key": self.key, "value": self.value, "source": self.source, "origin": self.origin}


def resolve(
    flags: Mapping[str, Optional[str]], env: Mapping[str, str], file: Mapping[str, Tuple[str, int]], path: str
) -> Dict[str, Effective]:
    """Every setting's effective value: flag, then environment, then file, then built-in default.
    An environment value is not checked here: the command checks it where it uses it."""
    out: Dict[str, Effective] = {}
    for s in SETTINGS:
        given = flags.get(s.key)
        if given is not None:
            out[s.key] = Effective(s.key, given, "flag", "--" + s.key.replace("_", "-"))
        elif s.env is not None and env.get(s.env):
            out[s.key] = Effective(s.key, env[s.env], "env", "$" + s.env)
        elif s.key in file:
            value, line = file[s.key]
            out[s.key] = Effective(s.key, value, "file", f"{path}:{line}")
        else:
            out[s.key] = Effective(s.key, s.default, "default", "built in")
    return out


class Configuration:
    """What one command or library call uses: every setting's ``Effective``, by key, and the config file."""

    __slots__ = ("file", "found", "settings")

    def __init__(self, file: str, found: bool, settings: Dict[str, Effective]) -> None:
        self.file, self.found, self.settings = file, found, settings

    def __repr__(self) -> str:
        # No values: a ledger URL may hold a password, and a plugin may log what it was given.
        return f"Configuration(file={self.file!r}, found={self.found!r})"

    def value(self, key: str) -> Optional[str]:
        return self.settings[key].value

    @property
    def ledger(self) -> str:
        return self.value("ledger") or DEFAULT_PATH  # it has a default, so it is never unset

    @property
    def scontrol(self) -> Optional[str]:
        return self.value("scontrol")

    @property
    def squeue(self) -> Optional[str]:
        return self.value("squeue")

    @property
    def rate(self) -> Optional[float]:
        """Calls a second to slurmctld at most (None: unpaced)."""
        return rate_of(self.value("rate") or "0")

    @property
    def timeout(self) -> float:
        return float(self.value("timeout") or DEFAULT_TIMEOUT)  # it has a default, so it is never unset

    @property
    def settle_delay(self) -> float:
        return float(self.value("settle_delay") or DEFAULT_SETTLE_DELAY)

    @property
    def redo_lost(self) -> bool:
        return self.value("redo_lost") == "yes"

    @property
    def log_level(self) -> str:
        return self.value("log_level") or "warning"

    @property
    def scontrol_path(self) -> str:
        """The scontrol an operation runs, as an absolute path (``binaries.find_scontrol``)."""
        from ..host.binaries import find_scontrol

        return find_scontrol(self.scontrol)

    @property
    def squeue_path(self) -> str:
        """The squeue a lookup runs, as an absolute path (``binaries.find_squeue``)."""
        from ..host.binaries import find_squeue

        return find_squeue(self.squeue, self.scontrol_path)


def configure(
    flags: Optional[Mapping[str, Optional[str]]] = None,
    *,
    config: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
) -> Configuration:
    """The settings, read as every command reads them (``load``, then ``resolve``).  ``flags``: the caller's
    values by key (None: not given).  ``ConfigFileError``; ``InvalidInput`` for an empty flag or ``config``."""
    environ: Mapping[str, str] = os.environ if env is None else env
    given = dict(flags or {})
    for key, value in given.items():
        if value is not None:
            not_empty(value, f"{key}=")
    loaded = load(None if config is None else not_empty(config, "config="), environ)
    return Configuration(loaded.path, loaded.found, resolve(given, environ, loaded.settings, loaded.path))
