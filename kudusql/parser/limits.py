"""How deep a statement may nest, the stack its parsing and planning get, and their
cancellation.

This module owns three guards of the SQL front end against a statement that is too
large or too deep:

- **Nesting limit.** Parsing, planning and SQL generation recurse once or more per
  level of nesting (parentheses, subqueries, brackets, CASE ... END), so a statement
  nests at most ``MAX_NESTING`` levels; ``check_nesting`` measures it on the tokens,
  before any recursion, and refuses a deeper one with a ProgrammingError pointing at
  the place. Long flat lists (``a AND b AND ...``, ``IN (...)``, CASE branches) are not
  nesting: the parser regroups AND/OR chains into balanced trees
  (``convert.balance_connectors``).
- **Stack headroom.** Python limits recursion by frame count (``sys.getrecursionlimit``,
  1000 by default), whatever the caller already uses. ``headroom(levels)`` makes sure
  the running thread has room for ``levels`` of nesting above its current depth,
  raising the interpreter's limit for as long as any statement needs it (and putting
  it back after), so every statement within the limit runs from any caller. A
  ``RecursionError`` that still happens (a construct that recurses without nesting,
  such as ``NOT NOT ... NOT x`` thousands deep) becomes ``too_deep()``, a
  ProgrammingError, never a raw ``RecursionError``.
- **Cancellation.** ``check_cancelled(event)`` raises OperationalError("statement
  cancelled") once ``Session.interrupt`` has set the statement's event; the parser
  checks it as it reads tokens and the planner in its loops, so planning a huge
  statement stops on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator, Sequence

from sqlglot.tokenizer_core import Token, TokenType

from kudusql.common.errors import OperationalError, ProgrammingError

#: Deepest nesting of parentheses, subqueries, brackets and CASE a statement may have.
MAX_NESTING = 100
#: Python frames one level of nesting may take in the parser, planner or generator (the
#: parser takes about 25 for a parenthesis; subqueries and sqlglot's optimizer more).
FRAMES_PER_LEVEL = 60
#: Frames kept free below the statement's own (calls between the levels, DuckDB, ...).
BASE_FRAMES = 400

_OPEN = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE})
_CLOSE = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END})


class NestingError(ProgrammingError):
    """A statement nests deeper than ``MAX_NESTING``; ``offset`` is where it does."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


def check_nesting(tokens: Sequence[Token]) -> int:
    """The deepest nesting of ``tokens``; NestingError past ``MAX_NESTING``."""
    depth = deepest = 0
    for tok in tokens:
        kind = tok.token_type
        if kind in _OPEN:
            depth += 1
            if depth > deepest:
                deepest = depth
                if depth > MAX_NESTING:
                    raise NestingError(
                        f"the statement nests more than {MAX_NESTING} levels deep "
                        "(parentheses, subqueries, brackets and CASE count); write it "
                        "with less nesting",
                        tok.start,
                    )
        elif kind in _CLOSE and depth:
            depth -= 1
    return deepest


def nesting_bound(sql: str) -> int:
    """A cheap upper bound of the nesting of ``sql`` (every opening character and every
    ``case`` counted as a level), capped at ``MAX_NESTING``: what ``headroom`` needs
    before the statement is tokenized."""
    if len(sql) < 64 and "(" not in sql:
        return 0
    bound = sql.count("(") + sql.count("[") + sql.count("{") + sql.lower().count("case")
    return min(bound, MAX_NESTING)


def too_deep() -> ProgrammingError:
    """The error for a statement whose processing overflowed the stack anyway."""
    return ProgrammingError(
        f"the statement is nested too deeply to process (at most {MAX_NESTING} levels of "
        "parentheses, subqueries, brackets and CASE; long chains of NOT or unary "
        "operators also count), or the calling program left too little stack: write it "
        "with less nesting"
    )


# The interpreter's recursion limit is one per process: statements that need more raise
# it together and the last one to finish puts the caller's limit back.
_lock = threading.Lock()
_active = 0
_saved: int | None = None
_raised_to: int | None = None
#: Nesting below which the default limit always suffices (no frame counting at all).
_SMALL = 8


def _frames() -> int:
    n = 0
    f = sys._getframe(1)
    while f is not None:
        n += 1
        f = f.f_back  # type: ignore[assignment]
    return n


@contextlib.contextmanager
def headroom(levels: int) -> Iterator[None]:
    """Room on the stack for a statement that nests ``levels`` deep (see the module
    docstring); a RecursionError inside becomes ``too_deep()``."""
    global _active, _saved, _raised_to
    if levels <= _SMALL:
        try:
            yield
        except RecursionError:
            raise too_deep() from None
        return
    need = _frames() + BASE_FRAMES + levels * FRAMES_PER_LEVEL
    with _lock:
        if _active == 0:
            _saved = sys.getrecursionlimit()
        _active += 1
        if need > sys.getrecursionlimit():
            sys.setrecursionlimit(need)
            _raised_to = need
    try:
        yield
    except RecursionError:
        raise too_deep() from None
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                # Put the caller's limit back, unless someone changed it meanwhile.
                if _saved is not None and _raised_to == sys.getrecursionlimit():
                    with contextlib.suppress(RecursionError):
                        sys.setrecursionlimit(_saved)
                _saved = _raised_to = None


def check_cancelled(cancelled: threading.Event | None) -> None:
    """Raise if the statement was cancelled (``Session.interrupt``)."""
    if cancelled is not None and cancelled.is_set():
        raise OperationalError("statement cancelled")
