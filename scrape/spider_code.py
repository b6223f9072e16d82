"""Spider code as data: compile a stored version's source into its Spider class, or say which line
is wrong.

Pure: no Django. The source runs as a fresh module of its own (named after its hash, so the loggers
its handlers use are its own), registered in sys.modules only while it is imported, and its @register
decorators record into a registry of its own: a version may share its name with a built-in spider or
with any other version. A worker compiles a version once (`spider_class_for`, cached by hash).
"""

import ast
import hashlib
import linecache
import sys
import traceback
import types

from .spiders import Spider, SpiderError, registry_scope

_CLASSES: dict[str, type[Spider]] = {}  # sha256 -> class, per process (a version never changes)
_REQUEST_NAMES = ("Request", "Follow")


class SpiderCodeError(SpiderError):
    """Spider code that cannot be used: it does not compile, fails when imported, defines no spider
    (or several), or names a route that is not a handler. `line` is where, when known."""

    def __init__(self, message: str, *, line: int | None = None):
        self.line = line
        self.reason = message
        super().__init__(f"line {line}: {message}" if line else message)


def source_sha256(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def compile_spider(source: str, *, filename: str = "<spider>") -> type[Spider]:
    """The one Spider subclass the source defines, its module imported afresh; SpiderCodeError if
    it cannot be (with the line: a syntax error's, the failing statement's, the bad route's)."""
    tree = _parse(source, filename)
    module, registered = _import(tree, source, filename)
    spider_cls = _spider_class(module, registered)
    _check_routes(tree, module, spider_cls)
    return spider_cls


def spider_class_for(sha256: str, source: str) -> type[Spider]:
    """The class of the version whose source hashes to sha256, compiled the first time this process
    needs it and kept (versions are immutable, so the hash names one class for ever)."""
    cached = _CLASSES.get(sha256)
    if cached is None:
        if source_sha256(source) != sha256:
            raise SpiderCodeError(f"the source does not match its sha256 {sha256[:12]}")
        cached = _CLASSES[sha256] = compile_spider(source, filename=f"<spider {sha256[:12]}>")
    return cached


def _parse(source: str, filename: str) -> ast.Module:
    try:
        return ast.parse(source, filename=filename)
    except SyntaxError as exc:  # IndentationError too
        raise SpiderCodeError(f"syntax error: {exc.msg}", line=exc.lineno) from None
    except ValueError as exc:  # a NUL byte
        raise SpiderCodeError(f"cannot be compiled: {exc}") from None


def _import(tree: ast.Module, source: str, filename: str) -> tuple[types.ModuleType, list[type[Spider]]]:
    """Run the module body once, as an import would; its lines are kept for tracebacks. Also
    returns the classes it marked with @register."""
    name = f"spider_{source_sha256(source)[:16]}"
    module = types.ModuleType(name)
    module.__file__ = filename
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    sys.modules[name] = module  # dataclasses and typing look a class's module up while it is made
    try:
        with registry_scope() as registered:
            exec(compile(tree, filename, "exec"), module.__dict__)  # running spider code is the point
    except BaseException as exc:
        if not isinstance(exc, Exception):
            raise  # KeyboardInterrupt, SystemExit: not the code's verdict to give
        line = _line_in(exc.__traceback__, filename)
        raise SpiderCodeError(f"{_type_name(exc)} while importing: {exc}", line=line) from None
    finally:
        sys.modules.pop(name, None)
    return module, list(registered.values())


def _type_name(exc: Exception) -> str:
    kind = type(exc)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _line_in(tb: types.TracebackType | None, filename: str) -> int | None:
    """The last line of the source that the traceback passes through."""
    lines = [lineno for frame, lineno in traceback.walk_tb(tb) if frame.f_code.co_filename == filename]
    return lines[-1] if lines else None


def _spider_class(module: types.ModuleType, registered: list[type[Spider]]) -> type[Spider]:
    """The Spider subclass defined in the module: the only one, or the only one marked @register."""
    defined = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Spider) and value.__module__ == module.__name__
    ]
    if not defined:
        raise SpiderCodeError("defines no spider: a class that subclasses scrape.spiders.Spider")
    if len(defined) == 1:
        return defined[0]
    marked = [cls for cls in defined if cls in registered]
    if len(marked) == 1:
        return marked[0]
    names = ", ".join(cls.__qualname__ for cls in defined)
    raise SpiderCodeError(f"defines {len(defined)} spiders ({names}): mark the one to run with @register")


def _check_routes(tree: ast.Module, module: types.ModuleType, spider_cls: type[Spider]) -> None:
    """Each Request(..., route="name") or route=self.name in the code must name a handler: of the
    spider class whose body it is in, else of the spider that runs."""
    for node in tree.body:
        owner = getattr(module, node.name, None) if isinstance(node, ast.ClassDef) else None
        if isinstance(owner, type) and issubclass(owner, Spider):
            _check_calls(node, owner)
        else:
            _check_calls(node, spider_cls)


def _check_calls(tree: ast.AST, spider_cls: type[Spider]) -> None:
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _called_name(node.func) in _REQUEST_NAMES):
            continue
        for keyword in node.keywords:
            name = _route_name(keyword) if keyword.arg == "route" else None
            if name is not None and not _is_handler(spider_cls, name):
                raise SpiderCodeError(
                    f"route {name!r} is not a handler method of {spider_cls.__qualname__}", line=keyword.value.lineno
                )


def _called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def _route_name(keyword: ast.keyword) -> str | None:
    value = keyword.value
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "self":
        return value.attr
    return None


def _is_handler(spider_cls: type[Spider], name: str) -> bool:
    """As Spider.handler_named decides: a public method the class has (and Spider does not)."""
    return not name.startswith("_") and callable(getattr(spider_cls, name, None)) and name not in vars(Spider)
