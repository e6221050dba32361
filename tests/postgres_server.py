"""A real PostgreSQL server for the results store's tests, started on a temporary data folder
and a free port on 127.0.0.1, and stopped after (as tests/slurm_cluster starts Slurm).

Debian's postgresql package (`make postgres-deps`, as root: mk/postgres.mk) gives initdb and
postgres under /usr/lib/postgresql/<version>/bin. PostgreSQL refuses to run as root: as root
the server runs as the package's `postgres` user (Popen's user=), its data folder owned by it.

    python -m tests.postgres_server      starts one, prints its URL, stops it on Enter
"""
import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

DATABASE = "dlbench"
PASSWORD_ROLE = "bench"   # a role the server asks a password of (scram-sha-256): password_role()


def binaries():
    """The folder of initdb and postgres (the newest version installed), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    postgres = shutil.which("postgres")
    return os.path.dirname(os.path.realpath(postgres)) if postgres else None


def skip_reason():
    """Why no server can be started here, or None."""
    if binaries() is None:
        return "PostgreSQL is not installed (make postgres-deps, as root: Debian's postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and no `postgres` user to run the server as"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (requirements.txt)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user() -> dict:
    """Popen's arguments that run a command as the postgres user, when root."""
    return {"user": "postgres", "group": "postgres", "extra_groups": []} if os.geteuid() == 0 else {}


@contextlib.contextmanager
def server():
    """Yields the URL (postgresql+psycopg://...) of a fresh server's empty database."""
    bindir, folder = binaries(), tempfile.mkdtemp(prefix="dlbench-pg-")
    data, port = os.path.join(folder, "data"), _free_port()
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
    proc = None
    try:
        subprocess.run([os.path.join(bindir, "initdb"), "-D", data, "-U", "postgres",
                        "--auth=trust", "-E", "UTF8", "--no-sync"], cwd=folder,
                       check=True, capture_output=True, timeout=120, **_as_server_user())
        hba = os.path.join(data, "pg_hba.conf")   # its first line: PASSWORD_ROLE gives a password
        with open(hba) as f:
            rules = f.read()
        with open(hba, "w") as f:
            f.write(f"host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n{rules}")
        proc = subprocess.Popen([os.path.join(bindir, "postgres"), "-D", data, "-p", str(port),
                                 "-h", "127.0.0.1", "-k", folder, "-c", "fsync=off"], cwd=folder,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **_as_server_user())
        import psycopg
        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres",
                                     autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE {DATABASE}")
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("PostgreSQL did not start: "
                                       + proc.stderr.read().decode(errors="replace")[-500:])
                time.sleep(0.2)
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/{DATABASE}"
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)   # PostgreSQL's fast shutdown: clients cut off
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


def password_role(url: str, password: str) -> str:
    """PASSWORD_ROLE made (once) with `password` and the right to make the store's tables in the
    server of `url`; returns its URL without the password (libpq finds it elsewhere)."""
    import sqlalchemy as sa
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        exists = conn.exec_driver_sql(
            f"SELECT 1 FROM pg_roles WHERE rolname = '{PASSWORD_ROLE}'").first()
        verb = "ALTER" if exists else "CREATE"
        quoted = password.replace("'", "''")   # DDL takes no bound parameter
        conn.exec_driver_sql(f"{verb} ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{quoted}'")
        conn.exec_driver_sql(f"GRANT ALL ON SCHEMA public TO {PASSWORD_ROLE}")
    engine.dispose()
    return sa.engine.make_url(url).set(username=PASSWORD_ROLE).render_as_string(hide_password=False)


def dump(url: str) -> str:
    """The whole database of `url` as pg_dump writes it (every table's every row, as text)."""
    import sqlalchemy as sa
    u = sa.engine.make_url(url)
    out = subprocess.run([os.path.join(binaries(), "pg_dump"), "-h", u.host, "-p", str(u.port),
                          "-U", "postgres", u.database], capture_output=True, text=True,
                         timeout=120, check=True)
    return out.stdout


if __name__ == "__main__":
    reason = skip_reason()
    if reason:
        raise SystemExit(reason)
    with server() as url:
        input(f"{url}\n(Enter stops it) ")
