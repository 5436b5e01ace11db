"""Spark reads and writes a cluster through its servers, with data it cannot read.

A cluster (a master, three tablet servers) runs as root with its directories mode 0700;
a Spark driver (``cluster_driver.py``) runs as the unprivileged user ``nobody`` with a
``local-cluster[2,1,1024]`` master, so its two executors are JVM processes of their own,
each with its own Python workers. The driver and every executor find the cluster's
directory unreadable, and yet read the table and write to it: the rows went through
the master and the tablet servers. Slow (a local-cluster session starts in ~30 s).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import kudusql
from tests.cluster.mini_cluster import mini_cluster_at
from tests.support.targets import cluster_url
from tests.support.timing import scaled

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(scaled(900))]

USER = "nobody"
REPO = Path(__file__).resolve().parents[2]


def _as_user(*command: str, env: dict[str, str]) -> list[str]:
    return [
        "runuser",
        "-u",
        USER,
        "--",
        "env",
        "-i",
        *(f"{k}={v}" for k, v in env.items()),
        *command,
    ]


def _spark_home(home: Path) -> Path:
    """A SPARK_HOME for ``USER``: pyspark's own entries (linked), and a ``work``
    directory of its own, where a local-cluster's worker keeps its executors' files
    (Spark puts it in SPARK_HOME, here the venv, which that user cannot write)."""
    import pyspark

    spark_home = home / "spark-home"
    spark_home.mkdir()
    package = Path(pyspark.__file__).parent
    for entry in package.iterdir():
        if entry.name != "work":
            (spark_home / entry.name).symlink_to(entry)
    (spark_home / "work").mkdir()
    return spark_home


def _python_for_user(home: Path) -> tuple[str, dict[str, str]]:
    """An interpreter ``USER`` can run that imports kudusql, pyspark and pyarrow from
    this environment, and the environment to run it with; skips when there is none."""
    paths = [str(REPO), *site.getsitepackages()]
    env = {
        "HOME": str(home),
        "SPARK_HOME": str(home / "spark-home"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join(paths),
        "SPARK_LOCAL_IP": "127.0.0.1",
        **({"JAVA_HOME": os.environ["JAVA_HOME"]} if "JAVA_HOME" in os.environ else {}),
    }
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    tried = []
    # The venv's interpreter may live where the user cannot go (under /root); the
    # system's of the same version runs the same wheels.
    for python in (sys.executable, f"/usr/bin/python{version}"):
        probe = subprocess.run(
            _as_user(python, "-c", "import kudusql, pyspark, pyarrow.flight", env=env),
            capture_output=True,
            text=True,
            cwd=str(home),
        )
        if probe.returncode == 0:
            return python, {**env, "PYSPARK_PYTHON": python}
        tried.append(f"{python}: {probe.stderr.strip()[-200:]}")
    pytest.skip(f"user {USER} cannot run Python with kudusql and pyspark: {'; '.join(tried)}")


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[Path, Path]]:
    """A directory every user can enter, with a home for the Spark user inside."""
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root and runuser, to run Spark as another user")
    try:
        user = pwd.getpwnam(USER)
    except KeyError:
        pytest.skip(f"no user {USER!r} to run Spark as")
    top = Path(tempfile.mkdtemp(prefix="kudusql-spark-cluster-"))
    top.chmod(0o755)
    home = top / "spark-user"
    home.mkdir()
    _spark_home(home)
    for root, dirs, files in os.walk(home):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), user.pw_uid, user.pw_gid)
    os.chown(home, user.pw_uid, user.pw_gid)
    try:
        yield top, home
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_spark_on_separate_executors_reads_and_writes_through_the_servers(
    world: tuple[Path, Path],
) -> None:
    top, home = world
    python, env = _python_for_user(home)
    data = top / "cluster"
    with mini_cluster_at(data) as cluster:
        data.chmod(0o700)  # root's, and closed to every other user
        url = cluster_url(cluster)
        with kudusql.connect(url) as conn:
            cur = conn.cursor()
            cur.execute(
                "CREATE TABLE kv (id BIGINT PRIMARY KEY, s STRING, x INT) "
                "PARTITION BY HASH (id) PARTITIONS 3"
            )
            cur.executemany("INSERT INTO kv VALUES (?, ?, ?)", [(i, f"s{i}", i) for i in range(50)])
        secret = home / "secret"
        shutil.copyfile(cluster.secret_file, secret)
        user = pwd.getpwnam(USER)
        os.chown(secret, user.pw_uid, user.pw_gid)
        secret.chmod(0o400)
        command = _as_user(
            python,
            "-m",
            "tests.spark.cluster_driver",
            "--master",
            cluster.master_address,
            "--secret-file",
            str(secret),
            "--data",
            str(data),
            env=env,
        )
        run = subprocess.run(
            command, capture_output=True, text=True, cwd=str(REPO), timeout=scaled(600)
        )
        lines = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")]
        assert run.returncode == 0 and lines, run.stderr[-4000:]
        out = json.loads(lines[-1][len("RESULT ") :])

        uid = pwd.getpwnam(USER).pw_uid
        assert out["driver_uid"] == uid
        # Neither the driver nor any executor can read the cluster's files...
        assert out["driver_data"] == "denied"
        assert "ermission" in out["driver_connect"], out["driver_connect"]
        executors = out["executors"]
        jvms = {jvm for jvm, _, _ in executors}  # the executors' JVMs, not the driver's
        assert len(jvms) == 2 and out["driver_jvm"] not in jvms and 0 not in jvms, out
        assert all(u == uid and seen == "denied" for _, u, seen in executors), executors
        # ...and yet they read every row and wrote through the tablet servers.
        assert [r[0] for r in out["read"]] == list(range(50))
        assert out["read"][7] == [7, "s7", 7]
        assert out["count_after"] == 149
        with kudusql.connect(url) as conn:
            cur = conn.cursor()
            cur.execute("SELECT id, s FROM kv WHERE id >= 100 ORDER BY id")
            assert cur.fetchall() == [(i, f"spark-{i}") for i in range(100, 200)]
            cur.execute("SELECT count(*) FROM kv WHERE id = 0")
            assert cur.fetchone() == (0,)
