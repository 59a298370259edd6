"""A chaos run's history: one JSON object per line, numbered (docs/testing.md §6).

Contract: ``History`` appends lines from any thread, each with ``n`` (its 1-based line number,
which the checker cites) and ``type``; ``read`` gives them back as dicts, checking the numbers.
Times are wall-clock epoch seconds (``time.time()``), the clock the scontrol wrapper's ``date``
reads too.  Nothing here knows slurm-dsl: the checker reads this module and nothing of the
product.

Line types (the fields each carries are documented where the runner writes them):
``run``, ``job``, ``invoke``, ``end``, ``call``, ``fault``, ``fault_end``, ``observe``, ``env``,
``phase``, ``ledger_dump``, ``ledger_object``, ``ledger_operation``, ``note``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Dict, List, Mapping


class History:
    """An append-only JSON-lines file, shared by the runner's threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._n = 0
        self._file = open(path, "w", encoding="utf-8")  # closed by close()

    def write(self, line_type: str, /, **fields: Any) -> int:
        """Append one line of type ``line_type``; its line number."""
        with self._lock:
            self._n += 1
            line = {"n": self._n, "type": line_type, **fields}
            self._file.write(json.dumps(line, sort_keys=True) + "\n")
            self._file.flush()
            return self._n

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read(path: Path) -> List[Dict[str, Any]]:
    """Every line of a history, in order; a line that is not a numbered JSON object is an error."""
    lines: List[Dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            line = json.loads(text)
            if not isinstance(line, dict) or line.get("n") != number or not isinstance(line.get("type"), str):
                raise ValueError(f"{path}:{number}: not a history line: {text[:200]!r}")
            lines.append(line)
    return lines


def shown(line: Mapping[str, Any], limit: int = 400) -> str:
    """One line of a history as the checker's report quotes it."""
    text = json.dumps({k: v for k, v in line.items() if k != "n"}, sort_keys=True)
    return f"{line.get('n')}: {text if len(text) <= limit else text[:limit] + ' ...'}"
