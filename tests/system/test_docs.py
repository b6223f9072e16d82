"""The docs stay true to the code and followable:

- docs/configuration.md lists every setting crawlproject/settings.py reads from the environment, with
  the default the code has, and no setting the code no longer reads;
- the commands of docs/getting-started.md marked `<!-- tested ... -->` run as written, on the embedded
  default, and print what the page shows;
- docs/commands.md names every option of every crawlhub management command;
- every link of the docs leads to a file (and heading) of the repository, and no page names what a
  reader cannot open (design notes, issue numbers, folders outside the repository).
"""

import ast
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.truth import ground_truth
from tests.conftest import BASE_DIR, generated_site
from tests.helpers import wait_until
from tests.servers import SiteServer

DOCS = BASE_DIR / "docs"
SETTINGS = BASE_DIR / "crawlproject" / "settings.py"
CONFIGURATION = DOCS / "configuration.md"
GETTING_STARTED = DOCS / "getting-started.md"

# The URL getting-started.md crawls; the test serves a local site and puts its URL in this one's place.
EXAMPLE_URL = "https://example.com/"
NO_DEFAULT = object()  # env.str("NAME") without default=
COMPUTED = object()  # a default that depends on other settings (paths, other variables)


# --- What settings.py reads ------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvRead:
    name: str
    default: object  # a literal value, NO_DEFAULT or COMPUTED
    line: int


def env_reads(source: str) -> list[EnvRead]:
    """Every environment variable the module reads: env.<cast>("NAME", default=...), env("NAME"),
    os.environ.get("NAME"), os.environ["NAME"] and "NAME" in os.environ."""
    reads = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _is_env_call(node.func):
            reads.append(EnvRead(_name(node.args[0] if node.args else None, node), _call_default(node), node.lineno))
        elif isinstance(node, ast.Subscript) and _is_os_environ(node.value):
            reads.append(EnvRead(_name(node.slice, node), NO_DEFAULT, node.lineno))
        elif isinstance(node, ast.Compare) and _is_os_environ(node.comparators[0]):
            reads.append(EnvRead(_name(node.left, node), NO_DEFAULT, node.lineno))  # "NAME" in os.environ
    return reads


def _is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and _is_name(node.value, "os")


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _is_env_call(func: ast.AST) -> bool:
    if _is_name(func, "env"):
        return True
    if not isinstance(func, ast.Attribute):
        return False
    if _is_name(func.value, "env"):
        return func.attr != "read_env"
    return _is_os_environ(func.value) and func.attr == "get"


def _name(node: ast.AST | None, call: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    raise AssertionError(f"line {call.lineno}: a variable name that is not a literal: {ast.unparse(call)}")


def _call_default(call: ast.Call) -> object:
    default = next((k.value for k in call.keywords if k.arg == "default"), None)
    if default is None:
        default = call.args[1] if len(call.args) > 1 else None
    if default is None:
        return NO_DEFAULT
    try:
        return _literal(default)
    except ValueError:
        return COMPUTED


def _literal(node: ast.AST) -> object:
    """A constant, a list of constants, or arithmetic on constants (10 * 1024 * 1024)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        if isinstance(left, int | float) and isinstance(right, int | float):
            return left * right if isinstance(node.op, ast.Mult) else left + right
        raise ValueError("not arithmetic")
    return ast.literal_eval(node)


def shown_default(value: object) -> str:
    """How configuration.md writes a literal default, inside backticks."""
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or '""'
    if isinstance(value, str):
        return value or '""'
    return repr(value)


# --- What configuration.md documents ---------------------------------------------------------------


@dataclass(frozen=True)
class DocRow:
    name: str
    cells: tuple[str, ...]  # the row's other cells
    read_by: tuple[str, ...]  # repository files named in backticks in the row's "read by" cell

    @property
    def default(self) -> str:
        return self.cells[1] if self.read_by else self.cells[0]


def documented(markdown: str) -> dict[str, DocRow]:
    """Rows of the page's tables whose first cell is a `VARIABLE`; a table with a "read by" column
    documents variables other programs read."""
    rows, read_by_column = {}, False
    for line in markdown.splitlines():
        if not line.startswith("|"):
            read_by_column = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "variable":
            read_by_column = len(cells) > 1 and cells[1] == "read by"
            continue
        name = re.fullmatch(r"`([A-Z][A-Z0-9_]*)`", cells[0])
        if name:
            read_by = tuple(re.findall(r"`([\w./-]+)`", cells[1])) if read_by_column else ()
            rows[name.group(1)] = DocRow(name.group(1), tuple(cells[1:]), read_by)
    return rows


@pytest.fixture(scope="module")
def settings_reads() -> dict[str, list[EnvRead]]:
    reads: dict[str, list[EnvRead]] = {}
    for read in env_reads(SETTINGS.read_text()):
        reads.setdefault(read.name, []).append(read)
    return reads


@pytest.fixture(scope="module")
def reference() -> dict[str, DocRow]:
    return documented(CONFIGURATION.read_text())


def test_it_finds_every_kind_of_environment_read():
    source = (
        'X = env.str("A", default="a")\nY = env.int("B", default=10 * 1024)\nZ = env.db("C")\n'
        'W = env("D")\nV = os.environ.get("E", "e")\nU = os.environ["F"]\nT = "G" in os.environ\n'
        'S = env.list("H", default=["x", "y"])\nR = env.bool("I", default=OTHER)\nenviron.Env.read_env(".env")\n'
    )
    reads = {r.name: r.default for r in env_reads(source)}
    assert reads == {
        "A": "a",
        "B": 10240,
        "C": NO_DEFAULT,
        "D": NO_DEFAULT,
        "E": "e",
        "F": NO_DEFAULT,
        "G": NO_DEFAULT,
        "H": ["x", "y"],
        "I": COMPUTED,
    }


def test_it_documents_every_setting_settings_py_reads(settings_reads, reference):
    missing = sorted(name for name in settings_reads if name not in reference)
    assert missing == [], f"add these settings to docs/configuration.md (name, default, meaning): {missing}"


def test_it_documents_no_setting_that_no_longer_exists(settings_reads, reference):
    stale = sorted(name for name, row in reference.items() if not row.read_by and name not in settings_reads)
    assert stale == [], f"docs/configuration.md documents settings that settings.py no longer reads: {stale}"
    for name, row in reference.items():
        if row.read_by:
            named = [BASE_DIR / path for path in row.read_by]
            assert all(p.is_file() for p in named), f"{name}: 'read by' names a missing file: {row.read_by}"
            assert any(re.search(rf"\b{name}\b", p.read_text()) for p in named), f"{name} is not in {row.read_by}"


def test_it_documents_the_default_the_code_has(settings_reads, reference):
    wrong = []
    for name, reads in settings_reads.items():
        for read in reads:
            if read.default in (NO_DEFAULT, COMPUTED) or name not in reference:
                continue
            expected = f"`{shown_default(read.default)}`"
            if expected not in reference[name].default:
                wrong.append(f"{name}: the code's default is {expected}, the page says {reference[name].default!r}")
    assert wrong == [], "\n".join(wrong)


# --- getting-started.md, run as written ------------------------------------------------------------


@dataclass(frozen=True)
class DocBlock:
    script: str
    expected: tuple[str, ...]  # lines of the ```text block right after it, if any
    background: bool = False  # "<!-- tested: each line runs on, in the background -->": servers


def marked_blocks(markdown: str) -> list[DocBlock]:
    """Each ```sh block right after a `<!-- tested ... -->` line, with its sample output: the first
    ```text block after it, before the next heading, marker or ```sh block."""
    lines, blocks = markdown.splitlines(), []
    for i, line in enumerate(lines[:-1]):
        if line.startswith("<!-- tested") and lines[i + 1] == "```sh":
            script, after = _fenced(lines, i + 1)
            background = "in the background" in line
            blocks.append(DocBlock("".join(f"{s}\n" for s in script), _sample_after(lines, after), background))
    return blocks


def _fenced(lines: list[str], opening: int) -> tuple[list[str], int]:
    """The lines inside the fence that opens at `opening`, and the index after its closing fence."""
    closing = lines.index("```", opening + 1)
    return lines[opening + 1 : closing], closing + 1


def _sample_after(lines: list[str], start: int) -> tuple[str, ...]:
    for i in range(start, len(lines)):
        if lines[i] == "```text":
            return tuple(line for line in _fenced(lines, i)[0] if line.strip())
        if lines[i].startswith(("#", "<!--", "```")):
            break
    return ()


def line_pattern(sample: str) -> re.Pattern:
    """A sample output line as a pattern: its numbers stand for any number, its runs of spaces for any.
    Digits inside a word (http_404) stay as they are."""
    parts = re.split(r"((?<![\w.])\d+(?:\.\d+)?(?!\w)|\s+)", sample.strip())
    regex = "".join(
        r"\d+(?:\.\d+)?" if re.fullmatch(r"\d+(?:\.\d+)?", p) else r"\s+" if p.isspace() else re.escape(p)
        for p in parts
        if p
    )
    return re.compile(rf"^\s*{regex}\s*$")


def test_it_reads_the_tested_blocks_and_their_sample_output():
    page = (
        "Intro\n<!-- tested -->\n```sh\nmake crawl URL=x\necho hi\n```\nIt prints:\n\n"
        "```text\nt job 1: 44 done\n   2 x\n```\n"
        "<!-- not tested -->\n```sh\nmake serve\n```\n"
        "<!-- tested: note -->\n```sh\nls\n```\nthe end\n"
    )
    assert marked_blocks(page) == [
        DocBlock("make crawl URL=x\necho hi\n", ("t job 1: 44 done", "   2 x")),
        DocBlock("ls\n", ()),
    ]
    assert line_pattern("t job 1 in 3.7 s").match("t job 12 in 0.25 s")
    assert line_pattern("       2 http_404").match("    10 http_404")
    assert not line_pattern("2 http_404").match("2 http_500")


def checkout_copy(where: Path) -> Path:
    """The repository as symlinks, so that files the commands write land in `where`, not in the
    checkout. .venv is linked entry by entry with fresh install stamps: `make` finds the
    environment installed and does not run pip (make test installed it)."""
    where.mkdir()
    for entry in BASE_DIR.iterdir():
        if entry.name not in ("var", ".venv", ".git") and not entry.name.endswith("_cache"):
            (where / entry.name).symlink_to(entry)
    _link_venv(where)
    return where


def source_copy(where: Path) -> Path:
    """The repository's files copied (settings.py then finds its .env beside this manage.py, not
    the checkout's), with .venv linked as checkout_copy links it."""
    skipped = shutil.ignore_patterns(".venv", "var", ".git", ".hypothesis", ".schemathesis", "*_cache", "__pycache__")
    shutil.copytree(BASE_DIR, where, ignore=skipped, symlinks=True)
    _link_venv(where)
    return where


def _link_venv(where: Path) -> None:
    venv = where / ".venv"
    venv.mkdir()
    for entry in (BASE_DIR / ".venv").iterdir():
        if not entry.name.startswith(".installed"):
            (venv / entry.name).symlink_to(entry)
    for stamp in (".installed-base", ".installed-web", ".installed-dev"):
        (venv / stamp).touch()


def new_user_env(var_dir: Path, settings_names: set[str]) -> dict[str, str]:
    """A shell that has set nothing for crawlhub (no DATABASE_URL, no broker: the embedded default),
    except where var/ is and, for the local site that stands in for example.com, private addresses."""
    cleared = settings_names | {"DJANGO_SETTINGS_MODULE"}
    env = {k: v for k, v in os.environ.items() if k not in cleared and not k.startswith(("CRAWL", "DJANGO_"))}
    return env | {"CRAWLHUB_VAR_DIR": str(var_dir), "CRAWL_ALLOW_PRIVATE": "True"}


def run_block(script: str, cwd: Path, env: dict) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{script}exited {done.returncode}:\n{output[-4000:]}"
    return output


SUMMARY = re.compile(r"^(?P<project>\S+) job \d+ succeeded: (?P<done>\d+) pages done, (?P<failed>\d+) failed", re.M)
EXPORTED = re.compile(r"^(?P<project>\S+): exported (?P<n>\d+) pages as jsonl to (?P<file>\S+)$", re.M)


@pytest.mark.integration
def test_getting_started_runs_as_written(settings_reads, tmp_path):
    blocks = marked_blocks(GETTING_STARTED.read_text())
    assert blocks and EXAMPLE_URL in blocks[0].script, f"the first tested block crawls {EXAMPLE_URL}"
    site = generated_site(40)
    checkout = checkout_copy(tmp_path / "crawlhub")
    env = new_user_env(checkout / "var", set(settings_reads))
    outputs = []
    with SiteServer.generated(site) as server:
        for block in blocks:
            script = block.script.replace(EXAMPLE_URL, f"{server.url}/")
            others = set(re.findall(r"https?://[^\s\"']+", script)) - {f"{server.url}/"}
            assert others == set(), f"a tested block would reach another host: {others}"
            output = run_block(script, checkout, env)
            lines = output.splitlines()
            for sample in block.expected:
                assert any(line_pattern(sample).match(line) for line in lines), (
                    f"the page shows {sample!r} after:\n{block.script}but the commands printed:\n{output[-3000:]}"
                )
            outputs.append(output)
        requested = server.paths()
    everything = "\n".join(outputs)

    summary = SUMMARY.search(everything)
    assert summary, everything[-3000:]
    truth = ground_truth(site)
    assert int(summary["done"]) >= truth["n_pages"], "every reachable page of the site was crawled"
    failed = len(truth["broken_urls"]) + len(truth["disallowed_urls_linked"])
    assert int(summary["failed"]) == failed, "404s and robots.txt refusals"
    assert not [p for p in requested if p.startswith("/private/")], "robots.txt was obeyed"

    exported = EXPORTED.search(everything)
    assert exported, everything[-3000:]
    rows = (checkout / exported["file"]).read_text().splitlines()
    assert len(rows) == int(exported["n"]) == int(summary["done"]) + int(summary["failed"])
    assert not (BASE_DIR / exported["file"]).exists(), "the commands wrote into the scratch copy only"


# --- distributed.md, run as written against the test PostgreSQL and Redis --------------------------

DISTRIBUTED = DOCS / "distributed.md"


def walkthrough_script(script: str, *, name: str, db: dict, broker: str, url: str) -> str:
    """A block of distributed.md with this machine's servers in place of the page's: db-host, the
    Redis URL, example.com, and a database and role of the test's own in place of `crawlhub`."""
    script = re.sub(r"\bcrawlhub\b", name, script).replace("db-host:5432", f"{db['HOST']}:{db['PORT'] or 5432}")
    return script.replace("redis://:PASSWORD@redis-host:6379/0", broker).replace(EXAMPLE_URL, url)


def start_background(line: str, cwd: Path, env: dict, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            ["bash", "-c", f"exec {line}"],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_background(processes: list[subprocess.Popen]) -> None:
    for proc in processes:
        os.killpg(proc.pid, signal.SIGTERM)
    for proc in processes:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def drop_database(name: str, db: dict) -> None:
    admin = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/postgres"
    for sql in (f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"DROP ROLE IF EXISTS {name}"):
        subprocess.run(["psql", admin, "-v", "ON_ERROR_STOP=1", "-c", sql], capture_output=True, timeout=60)


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed (postgresql-client)")
def test_the_distributed_walkthrough_runs_as_written(settings_reads, broker, tmp_path):
    from django.conf import settings

    db, name = settings.DATABASES["default"], f"crawlhub_doc_{os.getpid()}"
    blocks = marked_blocks(DISTRIBUTED.read_text())
    steps = [False, False, False, True, True, True, False]  # ... the workers, one without control, beat, crawl
    assert [b.background for b in blocks] == steps, "the walkthrough's steps"
    assert "sudo" not in blocks[0].script, "a machine without sudo can run it"
    assert "control" not in blocks[4].script, "a worker started without the control queue"
    checkout = source_copy(tmp_path / "crawlhub")
    env = new_user_env(checkout / "var", set(settings_reads))
    site, outputs, processes, logged = generated_site(30), [], [], tmp_path / "processes.log"
    try:
        with SiteServer.generated(site) as server:
            for block in blocks:
                script = walkthrough_script(block.script, name=name, db=db, broker=broker, url=f"{server.url}/")
                if not block.background:
                    outputs.append(run_block(script, checkout, env))
                    assert_shown(block, outputs[-1])
                    continue
                for line in script.splitlines():
                    if line.strip() and "only for" not in line:  # the render worker: for render_js projects
                        processes.append(start_background(line, checkout, env, logged))
        for block in blocks:  # what the servers print, as the page shows it
            if block.background and block.expected:
                wait_until(lambda b=block: shown(b, logged.read_text()), timeout=60, what=lambda: logged.read_text())
    finally:
        stop_background(processes)
        drop_database(name, db)
    summary = SUMMARY.search(outputs[-1])
    assert summary, outputs[-1][-3000:] + (tmp_path / "processes.log").read_text()[-3000:]
    assert int(summary["done"]) >= ground_truth(site)["n_pages"], "every reachable page, by the workers"
    written = sorted(line.split("=")[0] for line in (checkout / ".env").read_text().splitlines())
    assert written == ["CELERY_BROKER_URL", "DATABASE_URL", "DJANGO_SECRET_KEY"]
    assert "Operations to perform" in outputs[2] and len(processes) == 5, "migrated; four workers and beat"


def shown(block: DocBlock, output: str) -> bool:
    """Whether the output has a line like each line of the block's sample output."""
    lines = output.splitlines()
    return all(any(line_pattern(sample).match(line) for line in lines) for sample in block.expected)


def assert_shown(block: DocBlock, output: str) -> None:
    assert shown(block, output), f"the page shows {block.expected} after:\n{block.script}but got:\n{output[-3000:]}"


def compose_queues() -> dict[str, str]:
    """The -Q list of each worker service of docker-compose.yml."""
    import yaml

    services = yaml.safe_load((BASE_DIR / "docker-compose.yml").read_text())["services"]
    commands = {name: service.get("command") or [] for name, service in services.items()}
    return {name: c[c.index("-Q") + 1] for name, c in commands.items() if isinstance(c, list) and "-Q" in c}


def test_11_the_compose_table_lists_the_queues_each_worker_consumes():
    """Issue 48, 11: the table listed the workers' queues without control."""
    table = {}
    for line in DISTRIBUTED.read_text().split("## docker-compose", 1)[1].splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| `worker-") and len(cells) == 2:
            table[cells[0].strip("`")] = set(re.findall(r"`(\w+)`", cells[1].split(", `-c")[0]))
    queues = {name: set(q.split(",")) for name, q in compose_queues().items()}
    assert queues and table == queues


# --- commands.md names every option of every command ------------------------------------------------

DJANGO_OPTIONS = {"-h", "--help", "--version", "-v", "--verbosity", "--settings", "--pythonpath", "--traceback"}
DJANGO_OPTIONS |= {"--no-color", "--force-color", "--skip-checks"}


def crawlhub_commands() -> list[str]:
    folder = BASE_DIR / "console" / "management" / "commands"
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def test_it_documents_every_option_of_every_command():
    from django.core.management import get_commands, load_command_class

    page = (DOCS / "commands.md").read_text()
    missing = []
    for name in crawlhub_commands():
        if f"### {name}" not in page and not re.search(rf"^### .*\b{name}\b", page, re.M):
            missing.append(f"the command {name}")
        parser = load_command_class(get_commands()[name], name).create_parser("manage.py", name)
        for action in parser._actions:
            options = [opt for opt in action.option_strings if opt not in DJANGO_OPTIONS]
            missing += [f"{name} {opt}" for opt in options if not re.search(rf"(?<![\w-]){opt}(?![\w-])", page)]
    assert missing == [], f"docs/commands.md does not mention: {missing}"


# --- every reference in the docs can be followed ----------------------------------------------------

# docs/README.draft.md becomes README.md at the top of the repository: its links are relative to there.
PAGES = {path: (BASE_DIR if path.name == "README.draft.md" else DOCS) for path in sorted(DOCS.glob("*.md"))}
if not (DOCS / "README.draft.md").exists():
    PAGES[BASE_DIR / "README.md"] = BASE_DIR
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
UNFOLLOWABLE = re.compile(r"DESIGN\.md|\.\./shared|\bissues? #?\d+", re.IGNORECASE)


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", list(PAGES), ids=lambda p: p.name)
def test_every_link_of_the_docs_leads_inside_the_repository(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            broken.append(f"{target} (outside the repository)")
            continue
        path, _, anchor = target.partition("#")
        linked = (PAGES[page] / path).resolve() if path else page
        if not linked.is_relative_to(BASE_DIR) or not linked.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text()):
            broken.append(f"{target} (no such heading)")
    assert broken == [], f"{page.name}: {broken}"


@pytest.mark.parametrize("page", list(PAGES), ids=lambda p: p.name)
def test_the_docs_name_nothing_a_reader_cannot_open(page):
    found = sorted({m.group() for m in UNFOLLOWABLE.finditer(page.read_text())})
    assert found == [], f"{page.name} refers to {found}"
