"""Where a MariaDB ledger is (docs/contract.md §9.1.1): its ``mariadb://`` URL (``parse_url``) and its option file
(``read_option_file``), checked before any connection is made.  No I/O but reading the option file; no pymysql.
Every URL a message shows goes through ``shown_url``.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import stat
from dataclasses import dataclass, field
from typing import Dict, Optional
from urllib.parse import parse_qsl, urlsplit

from ..core.model import ConfigError

DEFAULT_OPTION_FILE = "/etc/slurm-dsl/ledger.cnf"
SCHEMES = ("mariadb", "mysql")
OPTION_FILE_MAX = 64 * 1024


@dataclass(frozen=True)
class Location:
    """What a ``mariadb://`` URL names: ``url`` is it without its query (the ledger's ``path``)."""

    url: str
    host: Optional[str]
    port: Optional[int]
    database: str
    option_file: str


@dataclass(frozen=True)
class ClientOptions:
    """The ``[client]`` group of an option file (the password is never shown)."""

    user: str
    password: Optional[bytes] = field(repr=False)
    host: Optional[str] = None
    port: Optional[int] = None
    socket: Optional[str] = None


_DATABASE = re.compile(r"[A-Za-z0-9_]{1,64}\Z")
_HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?\Z|\[[0-9A-Fa-f:.]+\]\Z")


def shown_url(url: str, *, query: bool = False) -> str:
    """``url`` as a message or ``slurm-dsl config`` may show it, never a password (docs/contract.md §9.1.1);
    with ``query``, a query that names ``option_file`` alone is kept (any other shows as ``?***``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "***"
    at = rest.rfind("@")
    if at >= 0:
        if "?" in rest[:at] or "#" in rest[:at]:
            return f"{scheme}://***"
        rest = "***@" + rest[at + 1:]
    base, mark, tail = rest.split("#", 1)[0].partition("?")
    if not (query and mark):
        return f"{scheme}://{base}"
    keys = {key for key, _ in parse_qsl(tail, keep_blank_values=True)}
    return f"{scheme}://{base}?{tail if keys == {'option_file'} else '***'}"


def parse_url(url: str) -> Location:
    """``mariadb://[HOST[:PORT]]/DATABASE[?option_file=PATH]`` as a ``Location``, or ConfigError saying what is
    wrong, never quoting a password: any ``@`` is refused before anything else is read (docs/contract.md §9.1.1)."""
    shown = shown_url(url)
    if "@" in url:
        raise ConfigError(
            f"ledger URL {shown}: no user or password in the URL (they would show in ps, logs and shell"
            " history): put user= and password= in the [client] group of the option file"
            f" (default {DEFAULT_OPTION_FILE}, mode 0600)"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"ledger URL {shown}: {exc}") from None
    if parts.scheme not in SCHEMES:
        raise ConfigError(f"ledger URL {shown}: the scheme must be mariadb:// or mysql://")
    host = parts.netloc.rsplit(":", 1)[0] if port is not None else parts.netloc
    if host and not _HOSTNAME.match(host):
        raise ConfigError(f"ledger URL {shown}: {host!r} is not a host name or address")
    if port is not None and not 0 < port < 65536:
        raise ConfigError(f"ledger URL {shown}: port {port} is out of range")
    database = parts.path[1:] if parts.path.startswith("/") else ""
    if not _DATABASE.match(database):
        raise ConfigError(
            f"ledger URL {shown}: name one database after the host, of letters, digits and _"
            " (mariadb://HOST[:PORT]/DATABASE)"
        )
    if parts.fragment or url.endswith("#"):
        raise ConfigError(f"ledger URL {shown}: no #fragment")
    option_file = DEFAULT_OPTION_FILE
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ConfigError(f"ledger URL {shown}: its query is not KEY=VALUE&...") from None
    keys = [key for key, _ in pairs]
    unknown = sorted({key for key in keys if key != "option_file"})
    if unknown:
        raise ConfigError(
            f"ledger URL {shown}: unknown query key(s) {', '.join(map(repr, unknown))}: the only one is"
            " option_file=PATH (connection settings and credentials go in that file's [client] group)"
        )
    if keys.count("option_file") > 1:
        raise ConfigError(f"ledger URL {shown}: option_file given more than once")
    for _, value in pairs:
        if not value.startswith("/") or "\0" in value:
            raise ConfigError(f"ledger URL {shown}: option_file must be an absolute path")
        option_file = value
    return Location(
        url=f"{parts.scheme}://{parts.netloc}/{database}",
        host=host.strip("[]") or None,
        port=port,
        database=database,
        option_file=option_file,
    )


def _group_name(gid: int) -> str:
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:  # a gid with no group entry: its number names it
        return str(gid)


def _layout(path: str, group: int) -> str:
    """The fix that serves root's commands and the units' account alike (contrib/README.md §5)."""
    quoted = shlex.quote(path)
    return (f"chown root:{_group_name(group)} {quoted} && chmod 640 {quoted} (root's, and readable by the units'"
            " group: contrib/README.md §5)")


def read_option_file(path: str) -> ClientOptions:
    """The ``[client]`` group of the option file at ``path``, its owner and mode checked first (ConfigError;
    docs/contract.md §9.1.1).  ``!include`` is refused; keys are read as the MariaDB client reads them (``-`` or ``_``,
    comments, quotes, ``\\`` escapes), and any but user, password, host, port and socket ignored."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    quoted = shlex.quote(path)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(
                f"option file {path} is a symbolic link: refusing to follow it; point option_file= at the"
                " real file"
            ) from None
        if exc.errno == errno.ENOENT:
            raise ConfigError(
                f"no option file at {path}: create it (mode 0600) with a [client] group holding user= and"
                " password= of the ledger's account, or name another with ?option_file=PATH"
            ) from None
        if exc.errno == errno.EACCES:
            # Typically the units' account on a file of root's 0600 (issue 31, item 8).
            raise ConfigError(
                f"cannot open option file {path}: {exc.strerror} (uid {os.geteuid()} runs slurm-dsl): make it"
                f" readable by this account and root alike: {_layout(path, os.getegid())}"
            ) from None
        raise ConfigError(f"cannot open option file {path}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        euid = os.geteuid()
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"option file {path} is not a regular file")
        if st.st_uid not in (euid, 0):
            # chown to the caller would lock the other side out (root's commands, or the units):
            # root's, readable by the group of the file's account (or of this one, not root).
            raise ConfigError(
                f"option file {path} is owned by uid {st.st_uid}, not by uid {euid} that runs slurm-dsl nor"
                f" by root, so that account could change the ledger's account:"
                f" {_layout(path, st.st_gid if euid == 0 else os.getegid())}"
            )
        shared = stat.S_IRGRP if st.st_uid == 0 else 0
        if st.st_mode & 0o077 & ~shared:
            fix = f"chmod 600 {quoted}"
            if shared:
                fix = f"chmod 640 {quoted} (readable by its group, {_group_name(st.st_gid)}, alone) or {fix}"
            raise ConfigError(
                f"option file {path} has mode {stat.S_IMODE(st.st_mode):04o}: other accounts may read or change"
                f" the ledger's password: {fix}"
            )
        data = os.read(fd, OPTION_FILE_MAX + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read option file {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > OPTION_FILE_MAX:
        raise ConfigError(f"option file {path} is larger than {OPTION_FILE_MAX} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"option file {path} is not UTF-8") from None
    return _client_group(text, path)


_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "r": "\r", "s": " ", "\\": "\\"}


def _option_value(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] in "'\"" and raw.endswith(raw[0]):
        raw = raw[1:-1]
    else:
        raw = raw.split("#", 1)[0].rstrip()
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), raw)


def _client_group(text: str, path: str) -> ClientOptions:
    group = ""
    found: Dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("!"):
            raise ConfigError(
                f"option file {path}, line {number}: {line.split()[0]} is not supported (an included file"
                " would escape the file's permission checks): put the settings in this file"
            )
        if line.startswith("["):
            if not line.endswith("]"):
                raise ConfigError(f"option file {path}, line {number}: a group header must end with ]")
            group = line[1:-1].strip().lower()
            continue
        if group != "client":
            continue
        key, sep, value = line.partition("=")
        key = key.strip().lower().replace("-", "_")
        if key in ("user", "password", "host", "port", "socket"):
            if not sep:
                raise ConfigError(f"option file {path}, line {number}: {key} needs a value ({key}=...)")
            found[key] = _option_value(value)
    if not found.get("user"):
        raise ConfigError(f"option file {path} names no user= in its [client] group")
    port: Optional[int] = None
    if found.get("port"):
        if not found["port"].isdigit() or not 0 < int(found["port"]) < 65536:
            raise ConfigError(f"option file {path}: port={found['port']!r} is not a port number")
        port = int(found["port"])
    password = found.get("password")
    return ClientOptions(
        user=found["user"],
        password=None if password is None else password.encode("utf-8"),
        host=found.get("host") or None,
        port=port,
        socket=found.get("socket") or None,
    )

