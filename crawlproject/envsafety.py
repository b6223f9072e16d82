"""Secrets read from the environment (settings.py): the embedded default's secret key, made once and
kept on disk, and the refusal to run with DEBUG off on a placeholder secret copied from .env.example."""

import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

MIN_TOKEN_LENGTH = 16  # a bearer token that guards every project's numbers: guessable when short
MIN_SECRET_KEY_LENGTH = 32
# Words of the values people leave in place (lower case, "-", "_", "." and spaces dropped): .env.example's
# change-me-..., "example", "insecure-..." as Django's startproject writes it.
PLACEHOLDER_WORDS = ("changeme", "replaceme", "example", "placeholder", "insecure", "yoursecret", "yourpassword")
# Whole values as well known as placeholders (MinIO's own default is minioadmin).
WEAK_VALUES = frozenset({"password", "secret", "admin", "minioadmin", "postgres", "root", "test"})
GENERATE_HINT = 'python -c "import secrets; print(secrets.token_urlsafe(50))"'


def kept_secret_key(var_dir: Path) -> str:
    """The secret key kept in var_dir/secret-key (mode 0600), made on first use, for when
    DJANGO_SECRET_KEY is unset: `make crawl`, `make serve` and the tests need no configuration.
    Processes starting together agree: the file appears whole, once, or not at all."""
    path = var_dir / "secret-key"
    if not path.exists():
        _create_once(path, secrets.token_urlsafe(50) + "\n")
    key = path.read_text().strip()
    if len(key) < MIN_SECRET_KEY_LENGTH:
        raise ImproperlyConfigured(f"{path} holds no usable secret key: delete it and a new one is made")
    return key


def private_file(path: Path) -> Path:
    """Make path (created empty if missing) readable by this user only: the embedded SQLite database
    holds every project's pages and secrets, and SQLite gives its -wal and -shm files the mode of
    the database file; the log files hold what the workers and the web server met (URLs, errors)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    if path.stat().st_uid == os.getuid() and path.stat().st_mode & 0o077:
        path.chmod(0o600)
    return path


def _create_once(path: Path, text: str) -> None:
    """Write a private temporary file, then link it to path: linking fails when path exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")  # created with mode 0600
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: its key is the one
        except OSError:  # a file system without hard links
            if not path.exists():
                os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def refuse_placeholder_secrets(environ: Mapping[str, str]) -> None:
    """Raise ImproperlyConfigured, naming each variable, when a secret in the environment is a
    placeholder (or the secret key is empty or short). Called with DEBUG off only."""
    problems = placeholder_problems(environ)
    if problems:
        raise ImproperlyConfigured(
            "Refusing to start with DEBUG off on insecure secrets: " + "; ".join(problems) + ". Set each to "
            f"a long random value, e.g. from {GENERATE_HINT} (or DJANGO_DEBUG=True for local development)."
        )


def placeholder_problems(environ: Mapping[str, str]) -> list[str]:
    """One sentence per insecure secret, naming its variable, never its value."""
    found = []
    if "DJANGO_SECRET_KEY" in environ:
        found += _secret_key_problems(environ["DJANGO_SECRET_KEY"])
    found.append(("the password in DATABASE_URL", _placeholder(_url_password(environ.get("DATABASE_URL", "")))))
    for name in ("AWS_SECRET_ACCESS_KEY", "CRAWLHUB_METRICS_TOKEN"):
        found.append((name, _placeholder(environ.get(name, ""))))
    token = environ.get("CRAWLHUB_METRICS_TOKEN", "")
    short = f"is shorter than {MIN_TOKEN_LENGTH} characters" if 0 < len(token) < MIN_TOKEN_LENGTH else None
    found.append(("CRAWLHUB_METRICS_TOKEN", short))
    for pair in filter(None, environ.get("FLOWER_BASIC_AUTH", "").split(",")):
        password = pair.partition(":")[2]
        found.append(("a password in FLOWER_BASIC_AUTH", _placeholder(password) or _empty(password)))
    return [f"{subject} {why}" for subject, why in found if why]


def _empty(password: str) -> str | None:
    return "is empty" if not password else None


def _secret_key_problems(key: str) -> list[tuple[str, str | None]]:
    if not key.strip():
        return [("DJANGO_SECRET_KEY", "is set but empty (unset, a generated key is kept in var/secret-key)")]
    short = f"is shorter than {MIN_SECRET_KEY_LENGTH} characters" if len(key) < MIN_SECRET_KEY_LENGTH else None
    return [("DJANGO_SECRET_KEY", _placeholder(key)), ("DJANGO_SECRET_KEY", short)]


def _placeholder(value: str) -> str | None:
    """Why a value is a placeholder, or None (also for an empty value: not every secret is needed)."""
    squeezed = "".join(ch for ch in value.lower() if ch not in "-_. ")
    word = next((w for w in PLACEHOLDER_WORDS if w in squeezed), None)
    if word:
        return f"looks like a placeholder (it contains {word!r})"
    return "is a well-known default value" if squeezed in WEAK_VALUES else None


def _url_password(url: str) -> str:
    try:
        return unquote(urlsplit(url).password or "")
    except ValueError:
        return ""
