"""The package is layered (issue 47): a module imports only from its own layer or the layers below
it, never from a higher one, so the bottom (the data contract) can be read and tested without the
top (the commands). Every ``import`` — at the top of a file or inside a function — counts
(:func:`test_import_cycles.import_graph`); a module in no layer fails the test, and a planted upward
import is found, so the check itself is tested. Every import of a ``pipeline`` or ``tests`` module, in
``pipeline/``, ``tests/`` and ``scripts/``, names a module of this checkout (an installed copy of the
package elsewhere would otherwise answer an import of a module that was moved)."""

import ast
from pathlib import Path

from tests.helpers.paths import REPO
from tests.system.test_import_cycles import import_graph

# bottom to top; a module's layer is that of the longest prefix that names it
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # the data and config contract, and the OmegaConf resolvers the package root installs
    ("contract", ("pipeline.contract", "pipeline.resolvers")),
    # what every layer shares: device backend, memo keys, the stage interface and contexts
    ("core", ("pipeline.core",)),
    # array primitives every system shares, and ST-BME's own rules at the array level
    ("ops", ("pipeline.ops", "pipeline.bme")),
    # the array code behind channels; datasets into the contract and back to the stores; synthetic
    # data; the text encoders; the metrics
    (
        "sources",
        (
            "pipeline.channels",
            "pipeline.adapters",
            "pipeline.writeback",
            "pipeline.synth",
            "pipeline.encoders",
            "pipeline.metrics",
        ),
    ),
    ("stages", ("pipeline.stages",)),
    # the injection text each system would hand its LLM, rendered from a run's rows
    ("inject", ("pipeline.inject",)),
    # reports read run directories and metrics; a run writes its report through them
    ("report", ("pipeline.report",)),
    # the recall cache's on-disk format: keys, recipe, generations, partitions, the reader
    ("recallcache", ("pipeline.recallcache",)),
    ("run", ("pipeline.run",)),
    # the systems' hooks: they read the cache or a serve endpoint
    ("hooks", ("pipeline.hooks",)),
    # serving the cache (the service, its HTTP app, which answers ReMe's hook protocol, and MCP)
    ("serve", ("pipeline.serve",)),
    # the commands
    ("cli", ("pipeline.cli", "pipeline.__main__")),
    # the public Python API: the package root serves its names (``pipeline.recall`` composes and
    # runs as ``recall run``, reusing the cli's checks) from every layer below
    ("api", ("pipeline", "pipeline.api")),
]


def layer_of(module: str, layers=LAYERS) -> int | None:
    """Index of ``module``'s layer (longest matching prefix), or None when no layer names it. The
    package root ``pipeline`` names itself only: a new top-level module must be given a layer."""
    best, depth = None, -1
    for i, (_, prefixes) in enumerate(layers):
        for p in prefixes:
            inside = module.startswith(p + ".") and p != "pipeline"
            if (module == p or inside) and len(p) > depth:
                best, depth = i, len(p)
    return best


def upward_imports(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every import of a module in a higher layer, as ``a (layer) -> b (layer)``."""
    out = []
    for mod in sorted(graph):
        for dep in sorted(graph[mod]):
            lm, ld = layer_of(mod, layers), layer_of(dep, layers)
            if lm is not None and ld is not None and ld > lm:
                out.append(f"{mod} ({layers[lm][0]}) -> {dep} ({layers[ld][0]})")
    return out


def test_every_module_has_a_layer():
    graph = import_graph(REPO)
    assert [m for m in sorted(graph) if layer_of(m) is None] == []


def test_no_module_imports_from_a_higher_layer():
    assert upward_imports(import_graph(REPO)) == []


def _write(root: Path, rel: str, text: str = "") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_planted_upward_import_is_found(tmp_path):
    for pkg in (
        "pipeline",
        "pipeline/contract",
        "pipeline/recallcache",
        "pipeline/run",
        "pipeline/serve",
    ):
        _write(tmp_path, f"{pkg}/__init__.py")
    _write(tmp_path, "pipeline/run/runner.py", "from pipeline.contract import io\n")
    _write(tmp_path, "pipeline/contract/io.py", "def f():\n    from pipeline.run import runner\n")
    _write(tmp_path, "pipeline/serve/service.py", "from pipeline.run import runner\n")
    _write(tmp_path, "pipeline/recallcache/keys.py", "from pipeline.serve import service\n")
    _write(tmp_path, "pipeline/run/precompute.py", "from pipeline.recallcache import keys\n")
    assert upward_imports(import_graph(tmp_path)) == [
        "pipeline.contract.io (contract) -> pipeline.run.runner (run)",
        "pipeline.recallcache.keys (recallcache) -> pipeline.serve.service (serve)",
    ]


def test_layer_of_takes_the_longest_prefix():
    assert LAYERS[layer_of("pipeline.recallcache.keys")][0] == "recallcache"
    assert LAYERS[layer_of("pipeline.bme.scene")][0] == "ops"
    assert LAYERS[layer_of("pipeline.serve.service")][0] == "serve"
    assert LAYERS[layer_of("pipeline.cli.serve")][0] == "cli"
    assert LAYERS[layer_of("pipeline")][0] == "api"
    assert LAYERS[layer_of("pipeline.resolvers")][0] == "contract"
    assert layer_of("pipelines.x") is None
    assert layer_of("pipeline.newthing") is None  # the root is no catch-all prefix


def _bound_names(init: Path) -> set[str]:
    """Names a package's ``__init__.py`` binds at its top level (defs, classes, assignments,
    imports, the names of its ``__all__``)."""
    out = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                out |= set(ast.literal_eval(node.value))  # served by a module __getattr__
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return out


def stale_imports(
    root: Path, dirs=("pipeline", "tests", "scripts"), packages=("pipeline", "tests")
) -> list[str]:
    """Absolute imports of ``<package>.*`` (each of ``packages``) under ``root``'s ``dirs`` that
    name no module of ``root/<package>`` (``from <package> import x``: x is a submodule or a name
    the package binds)."""
    files = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for pkg in packages
        for p in (root / pkg).rglob("*.py")
    }
    out = []
    for d in dirs:
        for path in sorted((root / d).rglob("*.py")) if (root / d).is_dir() else []:
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    init = files.get(node.module)
                    names = [node.module] + [
                        f"{node.module}.{a.name}"
                        for a in node.names
                        if init is not None
                        and init.name == "__init__.py"
                        and a.name not in _bound_names(init)
                    ]
                else:
                    continue
                rel = path.relative_to(root).as_posix()
                out += [
                    f"{rel}:{node.lineno} {n}"
                    for n in names
                    if n.split(".")[0] in packages and n not in files
                ]
    return sorted(out)


def test_every_pipeline_import_names_a_module_of_this_checkout():
    assert stale_imports(REPO) == []


def test_a_stale_import_is_found(tmp_path):
    for rel in ("pipeline/__init__.py", "pipeline/run/__init__.py"):
        _write(tmp_path, rel, "__version__ = '0'\n")
    _write(tmp_path, "pipeline/run/runner.py")
    _write(
        tmp_path,
        "tests/test_x.py",
        "from pipeline import __version__, runner\n"
        "from pipeline.run import runner as r\n"
        "def f():\n    from pipeline.precompute import precompute\n"
        "import pipeline.run.runner\nimport pipeline.cli\n"
        "from tests.helpers.paths import REPO\nfrom tests.reference import fold_dot\n",
    )
    _write(tmp_path, "tests/__init__.py")
    _write(tmp_path, "tests/helpers/__init__.py")
    _write(tmp_path, "tests/helpers/paths.py", "REPO = None\n")
    assert stale_imports(tmp_path) == [
        "tests/test_x.py:1 pipeline.runner",
        "tests/test_x.py:4 pipeline.precompute",
        "tests/test_x.py:6 pipeline.cli",
        "tests/test_x.py:8 tests.reference",
    ]
