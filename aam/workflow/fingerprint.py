"""Code fingerprints: what each rule's `params: code=` holds.

``code_fingerprint(module)`` hashes the parsed code (AST: comments, docstrings, formatting and
mtimes do not count) that `python -m aam <command>` can run, where ``module`` is the command's
module. The workflow puts it in each rule's params, so a rule reruns when code it can run has
changed, and only then. What counts, found statically from ``aam.__main__`` and the command
module's ``add_arguments`` and ``run``:

* the import-time code of every ``aam`` module that gets imported (module-level statements,
  class bodies, decorators and defaults; function bodies excluded), parent packages included;
  module-level imports and the imports of reachable code are followed;
* every top-level function or class reachable from there: names are resolved through imports
  and re-exports (``from aam.x import f`` where ``aam/x/__init__.py`` imports ``f``) and
  ``module.attr`` chains; a class counts whole (every method, its aam bases, decorators); the
  names import-time code uses are reachable; annotations that only name types reach nothing
  (naming a class runs none of its code; the annotation itself is hashed where it stands);
* an ``if TYPE_CHECKING:`` block never runs: its imports are not followed;
* a branch ``if p is not None:`` (or ``if p:``) of a function is skipped when every call of
  that function leaves ``p`` at its default None (an undecorated function, only ever called,
  without ``*``/``**`` unpacking, ``p`` never reassigned), so `aam pretrain` does not reach the
  metadata reader through ``load_study(labels=None)``.

Where static resolution is unsure it counts more, never less: an aam module used as a value
(``getattr(module, name)``, ``vars(module)``) or an attribute it does not define counts whole;
``importlib.import_module("aam.x")`` (a literal) counts ``aam.x`` whole; a computed import,
``eval`` or ``exec`` counts the whole package, except the command dispatch in ``aam.cli.main``,
which imports the command module (an entry already). Not seen: code reached only through
objects unpickled from files (checkpoints are read with ``weights_only=True``).

Standard-library only (the workflow imports this module on a login node without torch).
Parsing and resolution are cached per process; the fingerprints themselves are cached on disk
beside Python's bytecode (``aam/__pycache__/fingerprints.json``, keyed by the bytes of every
module and the Python version), so a Snakemake parse (~19 fingerprints, ~2 s of CPU) and a
job's provenance record (~1 s) skip the parsing while the package is unchanged.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import os
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

PACKAGE = "aam"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
COMMAND_ENTRIES = ("add_arguments", "run")  # what `aam.cli.main` calls on the command module
DISPATCHER = ("cli", "main")  # aam.cli.main: its computed import is the command module
CACHE = Path("__pycache__", "fingerprints.json")  # under PACKAGE_DIR
DYNAMIC_IMPORTS = {"importlib.import_module", "__import__", "runpy.run_module"}
OPAQUE = {"eval", "exec", "runpy.run_path"}


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_DEFINITIONS = (*_FUNCTIONS, ast.ClassDef)
_SCOPES = (*_DEFINITIONS, ast.Lambda)
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and every statement nested in it (definitions live in statements only)."""
    yield node
    for block in _BLOCKS:
        for child in getattr(node, block, None) or ():
            yield from _statements(child)


def _without_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` with the docstring of the module and of every class and function removed."""
    for node in _statements(tree):
        body = getattr(node, "body", None) if isinstance(node, _DOCUMENTED) else None
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            if isinstance(body[0].value.value, str):
                del body[0]
    return tree


def _import_time(node: ast.AST) -> ast.AST:
    """A copy of statement ``node`` without function bodies (methods' too): what runs when
    it runs at import."""
    reduced = copy.copy(node)
    for block in _BLOCKS:
        statements = getattr(node, block, None)
        if isinstance(statements, list):
            kept = [] if isinstance(node, _FUNCTIONS) else [_import_time(s) for s in statements]
            setattr(reduced, block, kept)
    return reduced


class Binding(NamedTuple):
    """A name bound by an import: module ``module``, or its attribute ``attr``."""

    module: str
    attr: str | None


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module a (possibly relative) ``from ... import`` names."""
    if not node.level:
        return node.module or ""
    anchor = module.split(".") if is_package else module.split(".")[:-1]
    anchor = anchor[: len(anchor) - node.level + 1]
    return ".".join([*anchor, node.module] if node.module else anchor)


def _bindings(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> Iterator:
    """(name, Binding) for each name an import statement binds ("*" for a star import)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                yield alias.asname, Binding(alias.name, None)
            else:
                yield alias.name.partition(".")[0], Binding(alias.name.partition(".")[0], None)
        return
    base = _absolute(node, module, is_package)
    for alias in node.names:
        yield alias.asname or alias.name, Binding(base, None if alias.name == "*" else alias.name)


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """Modules an import statement imports (a ``from`` import's names may be submodules)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = _absolute(node, module, is_package)
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at module level: into if/try/with/for blocks, not into definitions."""
    for node in body:
        yield node
        if not isinstance(node, _DEFINITIONS):
            for name in ("body", "orelse", "finalbody", "handlers"):
                yield from _module_level(getattr(node, name, []))


class Code(NamedTuple):
    """What a piece of code does with names: modules it imports, name chains it uses (with
    the call each is the callee of, if any), and the names its own imports bind."""

    imported: list[str]
    uses: set[tuple[tuple[str, ...], ast.Call | None]]
    local: dict[str, list[Binding]]


@dataclass(eq=False)  # hashed by identity: _parse returns one object per source text
class Source:
    """One parsed module: its definitions, module-level names and import-time code."""

    name: str
    is_package: bool
    definitions: dict[str, list[ast.AST]] = field(default_factory=lambda: defaultdict(list))
    bindings: dict[str, list[Binding]] = field(default_factory=lambda: defaultdict(list))
    assigned: set[str] = field(default_factory=set)
    import_time: ast.AST | None = None
    cache: dict = field(default_factory=dict)

    def nodes(self, name: str | None) -> list[ast.AST]:
        """Every definition called ``name``, or the import-time code for None."""
        return [self.import_time] if name is None else self.definitions[name]

    def dump(self, name: str | None) -> str:
        """AST dump of ``nodes(name)`` (cached)."""
        if ("dump", name) not in self.cache:
            self.cache["dump", name] = "".join(ast.dump(node) for node in self.nodes(name))
        return self.cache["dump", name]

    def code(self, name: str | None, unset: frozenset[str] = frozenset()) -> Code:
        """The Code of ``nodes(name)`` when parameters ``unset`` stay None (cached)."""
        if ("code", name, unset) not in self.cache:
            code = Code([], set(), defaultdict(list))
            for node in self.nodes(name):
                for event in _events(node, unset):
                    if isinstance(event, tuple):
                        code.uses.add((tuple(event[0]), event[1]))
                        continue
                    code.imported.extend(_imported(event, self.name, self.is_package))
                    if name is not None:  # the import-time code's imports are module bindings
                        for bound, binding in _bindings(event, self.name, self.is_package):
                            code.local[bound].append(binding)
            self.cache["code", name, unset] = code
        return self.cache["code", name, unset]


@lru_cache(maxsize=512)
def _parse(name: str, is_package: bool, text: str) -> Source:
    """The Source of module ``name`` with source ``text`` (cached per process)."""
    source = Source(name, is_package)
    tree = _without_docstrings(ast.parse(text))
    source.import_time = _import_time(tree)
    for node in _module_level(tree.body):
        if isinstance(node, _DEFINITIONS):
            source.definitions[node.name].append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for bound, binding in _bindings(node, name, is_package):
                source.bindings[bound].append(binding)
        else:  # the blocks of a compound statement come next from _module_level
            source.assigned.update(
                n.id
                for part in _header(node)
                for n in ast.walk(part)
                if isinstance(n, ast.Name) and not _loads(n)
            )
    return source


def _header(node: ast.stmt) -> Iterator[ast.AST]:
    """The parts of statement ``node`` outside its nested blocks (all of a simple one)."""
    for name, value in ast.iter_fields(node):
        if name not in _BLOCKS:
            parts = value if isinstance(value, list) else [value]
            yield from (part for part in parts if isinstance(part, ast.AST))


def _loads(node: ast.Name) -> bool:
    return isinstance(node.ctx, ast.Load)


def read_package() -> Package:
    """The modules of the package under ``PACKAGE_DIR`` as they are now (an unchanged package
    gives the same Package object, so resolutions are reused within a process)."""
    sources = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        sources[name] = _parse(name, is_package, path.read_text())
    return _package(tuple(sources.items()))


@lru_cache(maxsize=8)
def _package(sources: tuple[tuple[str, Source], ...]) -> Package:
    return Package(dict(sources))


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None unless the expression is a name or attribute chain."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return [node.id, *reversed(attrs)] if isinstance(node, ast.Name) else None


def _truth(test: ast.expr, unset: frozenset[str]) -> bool | None:
    """The value of ``test`` when the parameters ``unset`` are None, or None if unknown.
    ``TYPE_CHECKING`` is False: what it guards (imports for annotations) never runs."""
    if _chain(test) in (["TYPE_CHECKING"], ["typing", "TYPE_CHECKING"]):
        return False
    if isinstance(test, ast.Name):
        return False if test.id in unset else None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        value = _truth(test.operand, unset)
        return None if value is None else not value
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right, op = test.left, test.comparators[0], test.ops[0]
        if isinstance(left, ast.Name) and left.id in unset and isinstance(right, ast.Constant):
            if right.value is None and isinstance(op, (ast.Is, ast.IsNot)):
                return isinstance(op, ast.Is)
    if isinstance(test, ast.BoolOp):
        values = [_truth(value, unset) for value in test.values]
        decisive = isinstance(test.op, ast.Or)  # one True decides an `or`, one False an `and`
        if decisive in values:
            return decisive
        if all(value is (not decisive) for value in values):
            return not decisive
    return None


Event = ast.Import | ast.ImportFrom | tuple[list[str], ast.Call | None]


def _events(root: ast.AST, unset: frozenset[str] = frozenset()) -> Iterator[Event]:
    """Import statements and name uses (chain, and the call it is the callee of) in ``root``,
    skipping the branches that parameters ``unset`` (None) make dead."""
    stack = [(root, unset)]
    while stack:
        node, unset = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        children = [c for c in ast.iter_child_nodes(node) if not _names_types(node, c)]
        if isinstance(node, ast.If) and _truth(node.test, unset) is not None:
            children = [node.test, *(node.body if _truth(node.test, unset) else node.orelse)]
        elif isinstance(node, ast.Call) and _chain(node.func):
            yield _chain(node.func), node
            children = [*node.args, *node.keywords]
        elif isinstance(node, (ast.Name, ast.Attribute)) and _chain(node):
            if not isinstance(node, ast.Name) or _loads(node):
                yield _chain(node), None
            children = []
        inner = frozenset() if node is not root and isinstance(node, _SCOPES) else unset
        stack.extend((child, inner) for child in children)


def _names_types(parent: ast.AST, child: ast.AST) -> bool:
    """Whether ``child`` is an annotation of ``parent`` that only names types (no call): the
    classes it names are not reached through it (they run only where code uses them)."""
    if child is not getattr(parent, "annotation", None) and child is not getattr(
        parent, "returns", None
    ):
        return False
    return not any(isinstance(node, ast.Call) for node in ast.walk(child))


def _unset_parameters(node: ast.AST, calls: list[ast.Call | None]) -> frozenset[str]:
    """Parameters of function ``node`` that default to None and that no call in ``calls``
    passes (none if the function is decorated, used other than called, or a call unpacks)."""
    if not isinstance(node, _FUNCTIONS) or node.decorator_list or None in calls:
        return frozenset()
    if any(isinstance(a, ast.Starred) for c in calls for a in c.args):
        return frozenset()
    if any(k.arg is None for c in calls for k in c.keywords):
        return frozenset()
    arguments = node.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + arguments.defaults
    candidates = [
        (a.arg, i) for i, (a, d) in enumerate(zip(positional, defaults, strict=True)) if _is_none(d)
    ]
    candidates += [
        (a.arg, None)
        for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
        if _is_none(d)
    ]
    unset = {name for name, index in candidates if all(_omits(c, name, index) for c in calls)}
    if unset:  # a parameter the function reassigns is no longer its default
        unset -= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not _loads(n)}
    return frozenset(unset)


def _is_none(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _omits(call: ast.Call, name: str, index: int | None) -> bool:
    """Whether ``call`` leaves parameter ``name`` (at position ``index``) at its default."""
    passed_by_position = index is not None and index < len(call.args)
    return not passed_by_position and all(k.arg != name for k in call.keywords)


class Target(NamedTuple):
    """What a name can be: an aam ``definition`` (top-level function or class), an aam
    ``module``, a module-level ``value`` (counted with the import-time code), an ``external``
    name (a builtin, a local, another package's: qualified name in ``module``), or unknown:
    an attribute an aam module does not define statically, which counts that module ``whole``."""

    kind: str
    module: str
    name: str = ""


class Reachable(NamedTuple):
    """The imported aam modules and the reachable (module, definition name) pairs."""

    modules: frozenset[str]
    definitions: frozenset[tuple[str, str]]


class Package:
    """The parsed modules of the package at one moment, with name resolution memoized."""

    def __init__(self, sources: dict[str, Source]) -> None:
        self.sources = sources
        self.attributes: dict[tuple[str, str], frozenset[Target]] = {}
        self.uses: dict[tuple, tuple[frozenset[Target], frozenset[Target]]] = {}
        self.reached: dict[str, Reachable] = {}

    def attribute(self, module: str, name: str, seen: frozenset = frozenset()) -> frozenset:
        """What ``module.name`` (or a global ``name`` in ``module``) can be, through imports
        and re-exports; empty when ``module`` does not define it statically."""
        if (module, name) in self.attributes or (module, name) in seen:
            return self.attributes.get((module, name), frozenset())
        src = self.sources[module]
        found = {Target("definition", module, name)} if name in src.definitions else set()
        for binding in src.bindings.get(name, []):
            found |= self.bound(binding, seen | {(module, name)})
        if name in src.assigned or (name.startswith("__") and name.endswith("__")):
            found.add(Target("value", module, name))
        if f"{module}.{name}" in self.sources:
            found.add(Target("module", f"{module}.{name}"))
        for star in src.bindings.get("*", []):
            if star.module in self.sources:
                found |= self.attribute(star.module, name, seen | {(module, name)})
        if not seen:
            self.attributes[module, name] = frozenset(found)
        return frozenset(found)

    def bound(self, binding: Binding, seen: frozenset = frozenset()) -> frozenset[Target]:
        """What an import binding denotes."""
        if binding.module not in self.sources:
            dotted = binding.module if binding.attr is None else f"{binding.module}.{binding.attr}"
            return frozenset({Target("external", dotted)})
        if binding.attr is None:
            return frozenset({Target("module", binding.module)})
        found = self.attribute(binding.module, binding.attr, seen)
        return found or frozenset({Target("whole", binding.module)})

    def use(
        self, module: str, owner: str | None, chain: tuple[str, ...]
    ) -> tuple[frozenset[Target], frozenset[Target]]:
        """What the name chain ``a.b.c`` in code ``owner`` of ``module`` passes through (aam
        modules to import, definitions whose attribute it takes) and what it can denote."""
        key = (module, owner, chain)
        if key not in self.uses:
            local = self.sources[module].code(owner).local if owner else {}
            targets = {t for b in local.get(chain[0], []) for t in self.bound(b)}
            targets |= self.attribute(module, chain[0]) or {Target("external", chain[0])}
            passed: set[Target] = set()
            for attr in chain[1:]:
                following: set[Target] = set()
                for target in targets:
                    if target.kind == "module":
                        passed.add(target._replace(kind="import"))
                        found = self.attribute(target.module, attr)
                        following |= found or {target._replace(kind="whole")}
                    elif target.kind == "external":
                        following.add(Target("external", f"{target.module}.{attr}"))
                    else:  # an attribute of a class, function or value: that counts whole
                        passed.add(target)
                targets = following
            self.uses[key] = (frozenset(passed), frozenset(targets))
        return self.uses[key]


class _Resolver:
    """One reachability pass; ``unset`` maps functions to parameters known to stay None."""

    def __init__(self, package: Package, unset: dict[tuple[str, str], frozenset[str]]) -> None:
        self.package = package
        self.unset = unset
        self.modules: set[str] = set()
        self.definitions: set[tuple[str, str]] = set()
        self.whole: set[str] = set()
        self.calls: dict[tuple[str, str], list[ast.Call | None]] = defaultdict(list)
        self.todo: list[tuple[str, str | None]] = []

    def run(self, entries: list[tuple[str, tuple[str, ...]]]) -> Reachable:
        """Reach everything from ``entries``: (module, names of it that get called)."""
        for module, names in entries:
            self._import(module)
            for name in names:
                found = self.package.attribute(module, name) or {Target("whole", module)}
                for target in found:
                    self._reach(target, None, None)
        while self.todo:
            module, name = self.todo.pop()
            unset = self.unset.get((module, name), frozenset())
            code = self.package.sources[module].code(name, unset)
            for imported in code.imported:
                self._import(imported)
            owner = None if name is None else (module, name)
            for chain, call in code.uses:
                passed, targets = self.package.use(module, name, chain)
                for target in passed:
                    self._reach(target, None, owner)
                for target in targets:
                    self._reach(target, call, owner)
        return Reachable(frozenset(self.modules), frozenset(self.definitions))

    def _import(self, name: str) -> None:
        """Module ``name`` and its parent packages get imported (if they are aam modules)."""
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            module = ".".join(parts[:end])
            if module not in self.modules and module in self.package.sources:
                self.modules.add(module)
                self.todo.append((module, None))

    def _reach(self, target: Target, call: ast.Call | None, owner: tuple[str, str] | None) -> None:
        """``target`` is used (called by ``call``, if any) by code of ``owner``."""
        if target.kind == "definition":
            key = (target.module, target.name)
            self.calls[key].append(call)
            if key not in self.definitions:
                self.definitions.add(key)
                self._import(target.module)
                self.todo.append(key)
        elif target.kind == "import":
            self._import(target.module)
        elif target.kind in ("module", "whole"):  # a module as a value: getattr(module, name)
            self._whole(target.module)
        elif target.kind == "external":
            if target.module in OPAQUE or (target.module in DYNAMIC_IMPORTS and call is None):
                self._everything()
            elif target.module in DYNAMIC_IMPORTS:
                self._dynamic_import(call, owner)

    def _dynamic_import(self, call: ast.Call, owner: tuple[str, str] | None) -> None:
        """A literal aam module name counts that module whole; a computed one everything,
        except in the command dispatch (it imports the command module, an entry)."""
        arg = call.args[0] if call.args else None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if arg.value in self.package.sources:
                self._whole(arg.value)
            elif arg.value.split(".")[0] in (PACKAGE, ""):
                self._everything()
        elif owner != (f"{PACKAGE}.{DISPATCHER[0]}", DISPATCHER[1]):
            self._everything()

    def _whole(self, module: str) -> None:
        """Count ``module`` whole: imported, every name it defines or imports reachable."""
        if module in self.whole:
            return
        self.whole.add(module)
        self._import(module)
        src = self.package.sources[module]
        for name in [*src.definitions, *src.bindings]:
            for target in self.package.attribute(module, name):
                self._reach(target, None, None)
        for star in src.bindings.get("*", []):
            if star.module in self.package.sources:
                self._whole(star.module)

    def _everything(self) -> None:
        """Count every module of the package whole."""
        for name in self.package.sources:
            self._whole(name)


def reachable(command_module: str, package: Package | None = None) -> Reachable:
    """What `python -m aam <command>` can run (``command_module`` is the command's module):
    from ``aam.__main__`` and the command module's entries. A first pass finds every call of
    each function; the second skips the branches that parameters no call passes make dead."""
    package = read_package() if package is None else package
    if command_module not in package.reached:
        entries = [(f"{PACKAGE}.__main__", ()), (command_module, COMMAND_ENTRIES)]
        first = _Resolver(package, {})
        first.run(entries)
        unset = {}
        for (module, name), calls in first.calls.items():
            src = package.sources[module]
            if len(src.definitions[name]) == 1:
                node = src.definitions[name][0]
                unset[module, name] = _unset_parameters(node, calls)
        package.reached[command_module] = _Resolver(package, unset).run(entries)
    return package.reached[command_module]


def code_fingerprint(command_module: str) -> str:
    """16-hex-digit hash of the parsed code that `python -m aam <command>` can run (see the
    module docstring); ``command_module`` is the command's module. Comments, formatting and
    docstrings do not count. Read from the on-disk cache when the package is unchanged."""
    key = _sources_key()
    cached = _read_cache(key)
    if command_module not in cached:
        cached[command_module] = _fingerprint(command_module)
        _write_cache(key, cached)
    return cached[command_module]


def _sources_key() -> str:
    """Hash of every module's path and bytes under PACKAGE_DIR and of the Python version (its
    ``ast`` dumps differ): what a fingerprint is computed from."""
    digest = hashlib.sha256(sys.version.encode())
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        digest.update(f"\0{path.relative_to(PACKAGE_DIR)}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _read_cache(key: str) -> dict[str, str]:
    """The cached fingerprints of the sources ``key``; none if the cache is absent, unreadable
    or of other sources."""
    try:
        cache = json.loads((PACKAGE_DIR / CACHE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(cache, dict) or cache.get("sources") != key:
        return {}
    fingerprints = cache.get("fingerprints")
    return dict(fingerprints) if isinstance(fingerprints, dict) else {}


def _write_cache(key: str, fingerprints: dict[str, str]) -> None:
    """Replace the cache (a temporary file, then a rename: a concurrent reader sees the old or
    the new cache whole); skipped where the package is read-only (an installed image)."""
    path = PACKAGE_DIR / CACHE
    text = json.dumps({"sources": key, "fingerprints": fingerprints}, sort_keys=True)
    try:
        path.parent.mkdir(exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError:
        return
    try:
        os.fchmod(fd, 0o644)  # like the bytecode beside it: readable by whoever runs the code
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(temp, path)
    except OSError:
        Path(temp).unlink(missing_ok=True)


def _fingerprint(command_module: str) -> str:
    """The fingerprint of ``command_module``, computed from the parsed package."""
    package = read_package()
    found = reachable(command_module, package)
    digest = hashlib.sha256()
    for module in sorted(found.modules):
        digest.update(f"{module}\n{package.sources[module].dump(None)}\n".encode())
    for module, name in sorted(found.definitions):
        digest.update(f"{module}:{name}\n{package.sources[module].dump(name)}\n".encode())
    return digest.hexdigest()[:16]
