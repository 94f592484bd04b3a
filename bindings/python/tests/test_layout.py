"""The package's shape (issue 38): its private modules import each other without a cycle,
and none grows past MAX_LINES, so each stays a file you can name from what you want to
change. Read from the source next to these tests with ast; nothing is imported."""
import ast
import pathlib

MAX_LINES = 450
PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "pixload"


def imported_modules(tree, package="pixload"):
    """The pixload._* modules a module's source imports, wherever the import statement is
    (late imports inside functions count: they are how cycles used to hide)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:  # from ._x import ..., from . import _x
                base = node.module
            elif node.level == 0 and (node.module or "").startswith(package + "."):
                base = node.module[len(package) + 1:]  # from pixload._x import ...
            else:
                continue
            if base:
                found.add(base.split(".")[0])
            else:
                found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(package + "."):
                    found.add(alias.name.split(".")[1])
    return {name for name in found if name.startswith("_") and not name.startswith("__")}


def import_graph(sources):
    """{module: set of pixload._* modules it imports} from {module: source text}."""
    return {name: imported_modules(ast.parse(text)) & (set(sources) - {name}) for name, text in sources.items()}


def find_cycle(graph):
    """One import cycle as a list of modules ([a, b, a]), or None."""
    state = {}  # module -> "open" while on the path, "done" after
    path = []

    def visit(module):
        state[module] = "open"
        path.append(module)
        for dep in sorted(graph.get(module, ())):
            if state.get(dep) == "open":
                return path[path.index(dep):] + [dep]
            if dep not in state:
                cycle = visit(dep)
                if cycle:
                    return cycle
        path.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


def package_sources():
    return {path.stem: path.read_text() for path in sorted(PACKAGE.glob("_*.py")) if path.stem != "__init__"}


def test_the_private_modules_import_each_other_without_a_cycle():
    graph = import_graph(package_sources())
    # The graph is really read: every module that talks to C imports _ffi.
    assert "_ffi" in graph["_loader"] and "_errors" in graph["_loader"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_module_of_the_package_is_longer_than_the_limit():
    lengths = {path.name: len(path.read_text().splitlines()) for path in PACKAGE.glob("*.py")}
    assert "_loader.py" in lengths
    too_long = {name: n for name, n in lengths.items() if n > MAX_LINES}
    assert not too_long, f"over {MAX_LINES} lines (split by job): {too_long}"


def test_the_cycle_check_finds_cycles_and_late_imports():
    sources = {
        "_a": "from ._b import x\n",
        "_b": "import ctypes\nfrom . import _ffi\n\ndef f():\n    from ._a import y  # late\n",
        "_ffi": "import ctypes\n",
        "_c": "from pixload._ffi import lib\nimport pixload._a\n",
    }
    graph = import_graph(sources)
    assert graph == {"_a": {"_b"}, "_b": {"_a", "_ffi"}, "_ffi": set(), "_c": {"_ffi", "_a"}}
    assert find_cycle(graph) in (["_a", "_b", "_a"], ["_b", "_a", "_b"])
    del sources["_b"]
    assert find_cycle(import_graph(sources)) is None
