"""House rules of the code base, checked on the source files alone (ast: no Spark, no JVM).

1. No import cycle among the modules of accelerator/, indexes/ and rules/. Every import counts:
   top level, inside a function, under ``if TYPE_CHECKING:``. ``from pkg import name`` imports
   the module ``pkg.name`` when there is one, else ``pkg`` (its ``__init__.py``); relative
   imports alike. A package's ``__init__`` is a module of its own (importing ``pkg.sub`` is no
   import of ``pkg``).
2. No upward import between the layers of :data:`LAYERS`, and none of the packages
   :data:`FORBIDDEN` keeps from a folder (``indexes`` and ``rules`` never import ``accelerator``;
   ``rules`` decides from plain rows: no pyspark, no py4j). Every module must be in the table.
3. No reach into another module's private members: ``from ours import _name``, ``ours._name``
   on one of our modules, and ``obj._name`` (obj not self, cls or super()) where ``_name`` is
   defined by our code (module level, class body, ``self._name =``) but not by the accessing
   module. Third-party private names (pyspark's ``_jvm``, ``_jdf``, py4j's ``_gateway_client``:
   names our code does not define, and :data:`FOREIGN_PRIVATE`) are allowed; justified
   exceptions go to :data:`ALLOWED_PRIVATE`. The package and tests/ are checked apart.
4. Size: no module over :data:`MAX_LINES` lines; the classes of :data:`MAX_CLASS_LINES` under them.
5. Every module has a docstring (an empty ``__init__.py`` aside).

The detectors take a {path: source text} mapping (paths relative to the repository, '/'-separated)
and are tried on tiny synthetic packages at the end of this file.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

# The layers, lowest first: a module may import its own layer and the layers below. An entry is a
# module's path ("accelerator/context.py") or a folder ending in "/" (every module under it); the
# most specific entry wins. When modules move, replace their paths here (a new sub-package: one folder
# entry in the layer of what it does); a module no entry matches fails test_layers.
LAYERS = [
    ("ground", ["indexes/", "rules/"]),
    ("runtime", ["accelerator/runtime/"]),
    ("cache", ["accelerator/cache/"]),   # the cache's pure-Python core, the rewrite serves from it
    ("query", ["accelerator/query/"]),
    ("operations", ["accelerator/operations/", "accelerator/cache/warmup.py"]),
    ("context", ["accelerator/context.py"]),   # the composition root
    ("engine", ["accelerator/engine/", "accelerator/scheduler/"]),
    ("api", ["accelerator/__init__.py", "accelerator/api/"]),
    ("commands", ["accelerator/commands/"]),
]
# Packages a folder never imports, whatever the layers say.
FORBIDDEN = {"indexes/": ("accelerator",), "rules/": ("accelerator", "pyspark", "py4j")}
# Justified reaches into our private members: (accessing file, name): reason.
ALLOWED_PRIVATE: dict[tuple[str, str], str] = {
    (path, "_options"): "pyspark's SparkSession.Builder keeps its settings in _options and has "
                        "no getter; table formats are added to the packages and extensions set"
    for path in ("accelerator/runtime/table_formats.py", "tests/conftest.py",
                 "tests/test_table_formats.py")}
# Private names of pyspark and py4j, never ours even where a class of ours keeps one of the same
# name (HadoopFs: ``self._jvm = spark.sparkContext._jvm``): ``x._jvm`` is taken to be pyspark's.
FOREIGN_PRIVATE = {"_jvm", "_gateway", "_gateway_client", "_jdf", "_jsparkSession", "_sc", "_jsc"}
MAX_LINES = 650
MAX_CLASS_LINES = {"Rewriter": 150}   # a class of that name, wherever it is defined: < limit

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("accelerator", "indexes", "rules")
parse = functools.lru_cache(maxsize=None)(ast.parse)


@functools.lru_cache(maxsize=None)
def nodes(source: str) -> list[ast.AST]:
    """Every node of a module's tree (walked once per source text)."""
    return list(ast.walk(parse(source)))


def read_sources(*folders: str) -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
            for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))}


def module_name(path: str) -> str:
    parts = path[:-len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def from_base(path: str, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` names, relative ones resolved against ``path``."""
    if not node.level:
        return node.module or ""
    package = module_name(path).split(".")
    if not path.endswith("__init__.py"):
        package = package[:-1]
    package = package[:len(package) - node.level + 1]
    return ".".join(package + ([node.module] if node.module else []))


def imports(path: str, source: str, modules) -> list[tuple[str, int, str, str]]:
    """(module imported, line, local name, module bound to it) of every import of a module:
    ``import a.b`` imports ``a.b`` and binds ``a``; the last two are "" where no module is bound."""
    found = []
    for node in nodes(source):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.partition(".")[0]
                found.append((a.name, node.lineno, a.asname or top, a.name if a.asname else top))
        elif isinstance(node, ast.ImportFrom):
            base = from_base(path, node)
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append((sub, node.lineno, a.asname or a.name, sub) if sub in modules
                             else (base, node.lineno, "", ""))
    return sorted(set(found), key=lambda f: (f[1], f[0]))


def import_graph(sources: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """module -> {module it imports: ["file:line", ...]} over our modules."""
    modules = {module_name(p) for p in sources}
    graph = {m: {} for m in sorted(modules)}
    for path, source in sources.items():
        me = module_name(path)
        for target, line, *_ in imports(path, source, modules):
            if target in modules and target != me:
                where = graph[me].setdefault(target, [])
                if f"{path}:{line}" not in where:
                    where.append(f"{path}:{line}")
    return graph


def find_cycles(graph) -> list[list[str]]:
    """A shortest cycle through every import that is on one, each cycle once ([a, b, ..., a])."""
    def path_between(start, goal):
        previous, queue = {start: None}, [start]
        for node in queue:
            if node == goal:
                path = []
                while node is not None:
                    path, node = [node] + path, previous[node]
                return path
            for after in graph[node]:
                if after not in previous:
                    previous[after] = node
                    queue.append(after)
        return None

    cycles = {}
    for a in graph:
        for b in graph[a]:
            back = path_between(b, a)
            if back:
                body = [a] + back[:-1]
                i = body.index(min(body))
                cycles.setdefault(tuple(body[i:] + body[:i]), None)
    return [list(c) + [c[0]] for c in sorted(cycles, key=lambda c: (len(c), c))]


def layer_of(path: str, layers) -> tuple[int, str] | None:
    """(rank, name) of the layer of a module's path, by its most specific entry; None if none."""
    best = None
    for rank, (name, entries) in enumerate(layers):
        for entry in entries:
            if path == entry or (entry.endswith("/") and path.startswith(entry)):
                if best is None or len(entry) > best[0]:
                    best = (len(entry), rank, name)
    return best and best[1:]


def layer_violations(sources: dict[str, str], layers, forbidden) -> list[str]:
    paths = {module_name(p): p for p in sources}
    problems = [f"{p}: in no layer: add it (or its folder) to the layer of what it does in LAYERS "
                f"at the top of tests/test_house.py"
                for p in sorted(sources) if not layer_of(p, layers)]
    for path, source in sorted(sources.items()):
        mine = layer_of(path, layers)
        for target, line, *_ in imports(path, source, paths):
            banned = [b for folder, bs in forbidden.items() if path.startswith(folder) for b in bs
                      if target == b or target.startswith(b + ".")]
            theirs = layer_of(paths.get(target, ""), layers)
            if banned:
                problems.append(f"{path}:{line}: imports {target}; {path.split('/')[0]}/ must "
                                f"never import {banned[0]}")
            elif mine and theirs and theirs[0] > mine[0]:
                problems.append(f"{path}:{line}: {module_name(path)} ({mine[1]}) imports {target} "
                                f"({theirs[1]}), a higher layer: move what it needs down, or pass "
                                f"it in")
    return problems


def is_private(name: str) -> bool:
    return name.startswith("_") and name.strip("_") != "" and not name.endswith("__")


def private_definitions(source: str) -> set[str]:
    """The private names a module defines: at module level, in class bodies, as self./cls.
    attributes."""
    names = set()

    def body_names(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))

    body_names(parse(source).body)
    for node in nodes(source):
        if isinstance(node, ast.ClassDef):
            body_names(node.body)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)
    return {n for n in names if is_private(n)}


def is_own(expr: ast.AST) -> bool:
    return ast.unparse(expr) in ("self", "cls", "super()", "type(self)", "self.__class__")


def private_reaches(sources: dict[str, str], package: dict[str, str]) -> list[tuple]:
    """(file, line, private name, what) of every reach from `sources` into the private members
    of `package`'s modules."""
    modules = {module_name(p) for p in package}
    roots = {m.partition(".")[0] for m in modules}
    defined: dict[str, set[str]] = {}
    for path, source in package.items():
        for name in private_definitions(source):
            defined.setdefault(name, set()).add(path)
    found = []
    for path, source in sorted(sources.items()):
        own = private_definitions(source)
        aliases = {local: bound for *_, local, bound in imports(path, source, modules) if local}
        for node in nodes(source):
            base = isinstance(node, ast.ImportFrom) and from_base(path, node)
            if base and base.partition(".")[0] in roots:
                found += [(path, node.lineno, a.name, f"from {base} import {a.name}: a private "
                           f"name of our module") for a in node.names if is_private(a.name)]
            if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
                continue
            parts, base = [], node.value
            while isinstance(base, ast.Attribute):
                parts, base = [base.attr] + parts, base.value
            target = isinstance(base, ast.Name) and ".".join([aliases.get(base.id, "?")] + parts)
            if target in modules:
                found.append((path, node.lineno, node.attr,
                              f"{ast.unparse(node)}: private to module {target}"))
            elif node.attr in defined.keys() - own - FOREIGN_PRIVATE and not is_own(node.value):
                found.append((path, node.lineno, node.attr, f"{ast.unparse(node)}: {node.attr} is "
                              f"private to {', '.join(sorted(defined[node.attr]))}"))
    return sorted(found)


def report(title: str, problems: list[str]) -> str:
    return f"{title} ({len(problems)}):\n  " + "\n  ".join(problems)


def package_sources() -> dict[str, str]:
    return read_sources(*PACKAGES)


def test_no_import_cycle():
    graph = import_graph(package_sources())
    cycles = ["\n      ".join([" → ".join(cycle)] + [f"  {a} → {b}: {', '.join(graph[a][b])}"
                                                      for a, b in zip(cycle, cycle[1:])])
              for cycle in find_cycles(graph)]
    assert not cycles, report("import cycles: break each by moving the shared code down a layer, "
                              "or by passing the object in", cycles)


def test_layers():
    problems = layer_violations(package_sources(), LAYERS, FORBIDDEN)
    assert not problems, report("upward or forbidden imports, modules outside LAYERS", problems)


def reach_problems(sources: dict[str, str]) -> list[str]:
    return [f"{path}:{line}: {what}: use (or add) a public member; or list it in ALLOWED_PRIVATE "
            f"with its reason"
            for path, line, name, what in private_reaches(sources, package_sources())
            if (path, name) not in ALLOWED_PRIVATE]


def test_no_private_reach_in_package():
    problems = reach_problems(package_sources())
    assert not problems, report("reaches into another module's private members", problems)


def test_no_private_reach_in_tests():
    problems = reach_problems(read_sources("tests"))
    assert not problems, report("tests reaching into the package's private members", problems)


def test_sizes():
    problems = []
    for path, source in sorted(package_sources().items()):
        lines = len(source.splitlines())
        if lines > MAX_LINES:
            problems.append(f"{path}: {lines} lines, over {MAX_LINES}: split it")
        for node in nodes(source):
            limit = isinstance(node, ast.ClassDef) and MAX_CLASS_LINES.get(node.name)
            length = limit and node.end_lineno - node.lineno + 1
            if limit and length >= limit:
                problems.append(f"{path}:{node.lineno}: class {node.name} has {length} lines, "
                                f"not under {limit}: split it")
    assert not problems, report("modules or classes too large", problems)


def test_docstrings():
    problems = [f"{path}: no module docstring: say what the module is for in one at its top"
                for path, source in sorted(package_sources().items())
                if source.strip() and not ast.get_docstring(parse(source))]
    assert not problems, report("modules without a docstring", problems)


# --- the detectors on synthetic packages ---------------------------------------------------------

def test_detectors_on_synthetic_sources():
    doc = '"""doc"""\n'
    # a -> b at the top, b -> a in a function; c -> d under TYPE_CHECKING, d -> c; e -> p's __init__
    cyclic = {"p/__init__.py": "", "p/a.py": doc + "from p import b\n",
              "p/b.py": doc + "def f():\n    from .a import x\n",
              "p/c.py": doc + "import typing\nif typing.TYPE_CHECKING:\n    import p.d\n",
              "p/d.py": doc + "from p.c import y\n", "p/e.py": doc + "import p\n"}
    graph = import_graph(cyclic)
    assert find_cycles(graph) == [["p.a", "p.b", "p.a"], ["p.c", "p.d", "p.c"]]
    assert graph["p.b"] == {"p.a": ["p/b.py:3"]} and graph["p.e"] == {"p": ["p/e.py:2"]}
    assert graph["p.c"] == {"p.d": ["p/c.py:4"]}   # `import p.d` imports p.d, not the package p

    # low/ must not import pyspark, nor top/ (a higher layer); top/new.py is in no layer
    layered = {"low/x.py": "import pyspark.sql\nfrom top import y\n", "top/y.py": "import low.x\n",
               "top/new.py": ""}
    layers = [("low", ["low/"]), ("top", ["top/y.py"])]
    problems = layer_violations(layered, layers, {"low/": ("pyspark",)})
    assert [p.partition(",")[0] for p in problems] == [
        "top/new.py: in no layer: add it (or its folder) to the layer of what it does in LAYERS at "
        "the top of tests/test_house.py",
        "low/x.py:1: imports pyspark.sql; low/ must never import pyspark",
        "low/x.py:2: low.x (low) imports top.y (top)"]

    # reaches: a private import, c._run, a module's private, c._state; not reaches: pyspark's _jvm
    # (though q keeps one: FOREIGN_PRIVATE) and _collect_as_arrow (q has none), super(), dunders
    package = {"q/m.py": "_CACHE = {}\nclass C:\n    _slot = 1\n    def _run(self):\n"
                         "        self._state = self._slot\n        self._jvm = None\n"}
    user = {"q/u.py": "from q.m import _CACHE\nimport q.m as m\n"
                      "def f(c, spark):\n    c._run()\n    m._CACHE.clear()\n    spark._jvm.x()\n"
                      "    spark.df._collect_as_arrow()\n"
                      "    return c._state, super()._run(), c.__dict__\n"}
    assert [(line, name) for _, line, name, _ in private_reaches(user, package)] == [
        (1, "_CACHE"), (4, "_run"), (5, "_CACHE"), (8, "_state")]
    # a module's own private names are no reach, whoever else defines them too
    assert private_reaches({"q/v.py": "class D:\n    def _run(self, o):\n        o._run()\n"},
                           package) == []
