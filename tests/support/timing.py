"""How long a test waits before it calls something hung: one scale for every timeout.

A test asserts behaviour, never speed. Its timeouts only bound a hang: a subprocess, a
pseudo-terminal, a thread or a Spark job that never finishes. Each call site names the
wait as ``scaled(seconds)``, where ``seconds`` is already generous on an idle 2-core
machine (several times what the wait takes there), and this module multiplies it by
``KUDUSQL_TEST_TIMEOUT_SCALE``. The default, ``DEFAULT_SCALE``, lets the suite pass on a
2-core machine shared with other work at a load average of about 30 (each process then
gets about a fifteenth of a core); set a larger factor on a slower or busier machine,
or 1 to see hangs sooner.

Short waits a test expects to run out (a thread that must still be blocked after
0.3 s) are not timeouts and stay as they are: a busy machine can only make them pass
more easily, never fail.
"""

from __future__ import annotations

import os

#: The factor when ``KUDUSQL_TEST_TIMEOUT_SCALE`` is unset.
DEFAULT_SCALE = 5.0
ENV = "KUDUSQL_TEST_TIMEOUT_SCALE"


def _scale() -> float:
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_SCALE
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{ENV} must be a positive number, got {raw!r}") from None
    if not value > 0:
        raise ValueError(f"{ENV} must be a positive number, got {raw!r}")
    return value


#: The factor every test timeout is multiplied by.
SCALE = _scale()


def scaled(seconds: float) -> float:
    """``seconds`` (a generous bound on an idle machine) times the suite's scale."""
    return seconds * SCALE


#: How long a test waits for a thread or process of its own to reach a point or to end
#: (milliseconds on an idle machine).
WAIT = scaled(10)

#: How long any test of the default suite may take, fixtures included, before it is
#: failed as hung (``tests/conftest.py``; the longest take about a minute on an idle
#: machine).
TEST_BOUND = scaled(600)
