"""The rules of the catalogue of known mistakes and correct idioms (tests/buggy/, tests/correct/), checked
without grading anything (tests/test_catalogue.py grades them).

Most wrong answers are graded on their own item's test cells only. That checks nothing less than grading
them whole, because two rules make it impossible for a wrong answer to cost points in another item:

- **a wrong answer changes only its own item's cell**, and that cell's top level holds only definitions and
  imports (and the constants the notebook gives, unchanged), binding no name that another cell binds: it
  changes nothing that another item's test cells run but its own item's code;
- **every item declares every graded item its reference code refers to** (``Item(..., uses=...)``): while
  another item is graded, this one is the grader's stand-in, answered with the reference's values, never the
  student's code.

Each rule is shown to fail on a planted violation.

Every known mistake that a notebook's test cells declare (``mistakes``) can be built: a broken one would
never be named in a hint, and the grader leaves it out without a word (:class:`~autograder.api.items.KnownMistakes`).
"""

from __future__ import annotations

import ast
import copy
import functools
import symtable

import pytest

import autograder
from attention_course.solutions import register_source
from attention_course.tooling import notebooks
from autograder.api import items
from autograder.api.items import CheckFailed
from autograder.grading.classroom import fill, solution_bodies
from autograder.grading.source import Source
from autograder.release import course, reference
from tests.test_catalogue import ASSIGNMENTS, BUG_MODULES, CORRECT

DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)


def _code(source: str) -> str:
    """A cell's code as Python: its nbgrader markers are comments, its magics (none in graded cells) left out."""
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))


def _bound(tree: ast.Module) -> set[str]:
    """The names that a cell's top level binds."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


@functools.cache
def _reference(assignment: str) -> tuple[dict[str, ast.Module], dict[str, set[str]]]:
    """Of the released notebook answered with the reference: each solution cell's syntax tree, and for each
    the names that the notebook's other code cells bind (the setup cells, the other answers, the rest)."""
    cells = [c for c in fill(assignment).cells if c.get("cell_type") == "code"]
    trees = {}
    for cell in cells:
        try:
            trees[notebooks.cell_id(cell) or id(cell)] = ast.parse(_code(cell.source))
        except SyntaxError:  # a cell of IPython only: it binds nothing a wrong answer could rebind
            continue
    own = {gid: ast.parse(_code(code)) for gid, code in solution_bodies(assignment).items()}
    elsewhere = {gid: set().union(*(_bound(t) for key, t in trees.items() if key != gid)) for gid in own}
    return own, elsewhere


def cross_item_problems(assignment: str, answers: dict[str, str], item: str) -> list[str]:
    """What lets the wrong answer to ``item`` given as ``answers`` (grade id -> code, what
    :func:`autograder.grading.classroom.fill` puts into the released notebook) change anything but its own item's
    code."""
    own, elsewhere = _reference(assignment)
    problems = []
    if set(answers) != {item}:
        problems.append(f"it changes the cells {sorted(answers)}, not {item!r}'s alone")
    if item not in own:
        return [*problems, f"{item!r} is not an answer cell of {assignment}"]
    given = {ast.dump(node) for node in own[item].body}
    tree = ast.parse(_code(answers.get(item, "")))
    for node in tree.body:
        if not isinstance(node, DEFINITIONS) and ast.dump(node) not in given:
            problems.append(f"its top level runs line {node.lineno} ({ast.unparse(node)[:60]!r}), not a definition")
    rebound = sorted((_bound(tree) - _bound(own[item])) & elsewhere[item])
    if rebound:
        problems.append(f"it binds {rebound}, which other cells bind")
    if item not in _bound(tree):
        problems.append(f"it does not define {item}")
    return problems


def _globals_read(code: str) -> set[str]:
    """The global names that ``code`` reads, in any of its scopes (a parameter or local of the same name is not
    one: ``mfu(tokens_per_second, flops_per_token, peak_flops)`` does not call the item ``flops_per_token``)."""

    def walk(table: symtable.SymbolTable) -> set[str]:
        found = {s.get_name() for s in table.get_symbols() if s.is_referenced() and s.is_global()}
        for child in table.get_children():
            found |= walk(child)
        return found

    return walk(symtable.symtable(code, "<cell>", "exec"))


def undeclared_uses(assignment: str, nb=None) -> list[str]:
    """Each ``Item(ASSIGNMENT, "X", ..., uses=...)`` in the test cells of ``nb`` (default: the instructor
    notebook) that leaves out a graded item that X's reference code refers to."""
    nb = nb or notebooks.read(course.notebook_path(assignment, "solutions"))
    graded = {name for a in ASSIGNMENTS for name in solution_bodies(a)}
    references = {notebooks.cell_id(c): _globals_read(_code(c.source)) for c in nb.cells if notebooks.is_solution(c)}
    problems = []
    for cell in nb.cells:
        if not notebooks.is_test(cell):
            continue
        for node in ast.walk(ast.parse(_code(cell.source))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Item"):
                continue
            if not isinstance(node.args[1], ast.Constant):  # a question's answer wrapped: `Item(..., answer.name, ...)`
                continue
            name = node.args[1].value
            declared = next((ast.literal_eval(k.value) for k in node.keywords if k.arg == "uses"), ())
            missing = sorted((references.get(name, set()) & graded) - {name} - set(declared))
            if missing:
                problems.append(f"{notebooks.cell_id(cell)}: Item {name!r} does not declare uses={missing}")
    return problems


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_wrong_answer_changes_only_its_own_items_definitions(assignment):
    found = {
        bug.name: problems
        for bug in BUG_MODULES[assignment].BUGS
        if (problems := cross_item_problems(assignment, {bug.item: bug.code}, bug.item))
    }
    assert not found, found


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_item_declares_the_graded_items_its_reference_uses(assignment):
    assert undeclared_uses(assignment) == []


def test_a_wrong_answer_that_reaches_another_item_is_found():
    """Planted violations of the first rule: each is found, and names what it does."""
    a = "ch03_multi_head"
    right = solution_bodies(a)["split_heads"]
    wrong = right.replace("transpose(1, 2)", "transpose(2, 1)")

    def problems(code: str, item: str = "split_heads") -> list[str]:
        return cross_item_problems(a, {item: code}, item)

    statement = problems(wrong + "\ntorch.manual_seed(1)\n")
    assert any("not a definition" in p and "manual_seed" in p for p in statement), statement
    rebinding = problems(wrong + "\n\ndef merge_heads(x):\n    return x\n")
    assert any("merge_heads" in p and "other cells bind" in p for p in rebinding), rebinding
    constant = problems(solution_bodies(a)["reweighted_heads"].replace("W_q", "Wq"), "reweighted_heads")
    assert any("not a definition" in p for p in constant), constant
    two_cells = cross_item_problems(a, {"split_heads": wrong, "merge_heads": "pass"}, "split_heads")
    assert any("not 'split_heads'" in p for p in two_cells), two_cells
    assert any("does not define" in p for p in problems("def split(x, num_heads):\n    return x\n"))
    assert problems(wrong) == []


def test_an_item_that_leaves_out_a_graded_item_it_uses_is_found():
    """A planted violation of the second rule: MultiHeadAttention declared without merge_heads."""
    a = "ch03_multi_head"
    nb = copy.deepcopy(notebooks.read(course.notebook_path(a, "solutions")))
    for cell in nb.cells:
        if notebooks.is_test(cell):
            cell.source = cell.source.replace('uses=("split_heads", "merge_heads")', 'uses=("split_heads",)')
    found = undeclared_uses(a, nb)
    assert found and all("MultiHeadAttention" in p and "merge_heads" in p for p in found), found
    assert undeclared_uses(a) == []


def test_every_item_has_at_least_three_bugs_each_with_its_cause():
    for assignment, module in BUG_MODULES.items():
        for item in module.TESTS:
            assert sum(b.item == item for b in module.BUGS) >= 3, (assignment, item)
        assert all(bug.cause for bug in module.BUGS), [b.name for b in module.BUGS if not b.cause]


def test_every_item_has_correct_answers_in_at_least_four_idioms():
    for assignment, module in BUG_MODULES.items():
        for item in module.TESTS:
            assert sum(item in answers for answers in CORRECT[assignment]) >= 4, (assignment, item)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_each_items_test_cells_are_those_the_catalogue_names(assignment):
    """The catalogue's table of each item's test cells (``TESTS``) is the notebook's: a wrong answer graded on
    its item's cells alone is graded on all of them. Its items are those the test cells grade; anything else an
    answer cell defines is a helper of the item whose cell it is in (chapter 11's Triton kernels)."""
    source = Source.load(assignment)
    table = BUG_MODULES[assignment].TESTS
    graded = {name for gid, _, _ in source.tests for name in source.graded_in(gid)}
    assert set(table) == graded, sorted(set(table) ^ graded)
    in_their_cells = {
        name
        for item, code in solution_bodies(assignment).items()
        if item in table
        for name in notebooks.defined_names(code)
    }
    assert set(source.items) <= in_their_cells, sorted(set(source.items) - in_their_cells)
    for item, tests in table.items():
        assert [gid for gid, _, _ in source.tests_of({item})] == tests, item


def visible_failure(assignment: str, item: str, code: str, gid: str) -> CheckFailed | None:
    """The failure that the visible checks of test cell ``gid`` raise for ``code`` as ``item``, run here as in
    the student's notebook (the setup, the answers, the reference's but ``item``'s, the test cell as released),
    or None."""
    nb = fill(assignment, {item: code})
    namespace = {"__name__": "__main__"}

    def run(cell) -> None:  # each cell's source registered, as IPython does: Triton and the kernel checks read it
        filename = f"<cell {notebooks.cell_id(cell) or nb.cells.index(cell)}>"
        register_source(_code(cell.source), filename)
        exec(compile(_code(cell.source), filename, "exec"), namespace)

    for cell in nb.cells:
        if notebooks.is_setup(cell) or notebooks.is_solution(cell):
            run(cell)
    test = next(cell for cell in nb.cells if notebooks.cell_id(cell) == gid)
    try:
        run(test)
    except CheckFailed as failure:
        return failure
    return None


SEEN_FIRST = [(a, b) for a in ASSIGNMENTS for b in BUG_MODULES[a].BUGS if b.visible]


@pytest.mark.parametrize("assignment,bug", SEEN_FIRST, ids=lambda v: getattr(v, "name", v))
def test_a_mask_bug_fails_the_visible_checks_before_it_is_submitted(assignment, bug):
    gid = bug.visible
    assert gid in BUG_MODULES[assignment].TESTS[bug.item], f"{gid} is not a test cell of {bug.item}"
    failure = visible_failure(assignment, bug.item, bug.code, gid)
    assert failure is not None, (
        f"{bug.name} ({bug.why}) passes the visible checks of {gid}: the student finds it only in the grade"
    )
    if assignment == "ch11_flash_attention":  # its visible hints (the checks' own, before any diagnosis) name the cause
        assert bug.cause.lower() in failure.hint.lower(), f"{bug.name}: the visible hint misses it: {failure.hint}"


EVERY_HINT = [(a, b) for a in ASSIGNMENTS for b in BUG_MODULES[a].BUGS if b.every_hint]


@pytest.mark.parametrize("assignment,bug", EVERY_HINT, ids=lambda v: getattr(v, "name", v))
def test_each_visible_failure_of_a_bug_names_its_cause(assignment, bug):
    """A mistake that fails several test cells names its cause in each one's visible hint (the check's own, which is
    what a student reads where no reference diagnoses it), not in one of them alone."""
    failures = {
        gid: visible_failure(assignment, bug.item, bug.code, gid) for gid in BUG_MODULES[assignment].TESTS[bug.item]
    }
    failing = {gid: failure.hint for gid, failure in failures.items() if failure is not None}
    assert len(failing) > 1, f"{bug.name} fails {sorted(failing)} visibly: one cell, nothing to name in each"
    unnamed = sorted(gid for gid, hint in failing.items() if bug.cause.lower() not in hint.lower())
    assert not unnamed, f"{bug.name}: the visible hints of {unnamed} do not name {bug.cause!r}"


@pytest.mark.parametrize("assignment,gid", sorted({(a, b.visible) for a, b in SEEN_FIRST}))
def test_the_reference_passes_those_visible_checks(assignment, gid):
    item = next(i for i, tests in BUG_MODULES[assignment].TESTS.items() if gid in tests)
    assert visible_failure(assignment, item, solution_bodies(assignment)[item], gid) is None


def _uncalled(*args, **kwargs) -> None:
    return None


def declared_mistakes(assignment: str, notebook: str | None = None) -> dict[str, list[items.Mistake]]:
    """The known mistakes that each test cell of the instructor notebook declares (grade id -> its mistakes),
    each built in a strict record (a broken one raises :class:`~autograder.api.items.BrokenMistake`): the setup and
    each test cell up to its last ``mistakes(...)`` run here with the reference as the items, no check called."""
    source = Source.load(assignment, notebook)
    namespace = {"__name__": "__main__"}
    for code in source.setup.values():
        exec(_code(code), namespace)
    namespace.update({name: reference.get(assignment, name) for name in source.items})
    namespace.update({name: _uncalled for name in autograder.__all__ if name.startswith("check_")})
    declared: dict[str, list[items.Mistake]] = {}
    for gid, code, _ in source.tests:
        tree = ast.parse(_code(code))
        declaring = [i for i, node in enumerate(tree.body) if "mistakes" in _called(node)]
        if not declaring:
            continue

        def recorded(item, *known, gid=gid, **options):
            marked = items.mistakes(item, *known, **options)
            declared.setdefault(gid, []).extend(marked.known)
            return marked

        namespace["mistakes"] = recorded
        with items.known_mistakes(items.KnownMistakes(strict=True)):
            exec(compile(ast.Module(tree.body[: declaring[-1] + 1], []), f"<test {gid}>", "exec"), namespace)
    return declared


def _called(node: ast.AST) -> set[str]:
    return {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_known_mistake_a_notebook_declares_can_be_built(assignment):
    """Each known mistake of each test cell applies to the reference's code and gives code that runs: built
    strictly, a broken one raises here, where graded it would only be left out."""
    declared = declared_mistakes(assignment)
    source = Source.load(assignment)
    declaring = {gid for gid, code, _ in source.tests if "mistakes" in _called(ast.parse(_code(code)))}
    assert set(declared) == declaring, sorted(declaring - set(declared))
    assert all(declared.values()), [gid for gid, known in declared.items() if not known]


def test_a_known_mistake_that_cannot_be_built_is_found():
    """The planted violation: a mistake whose replacement is not in the reference's code raises, naming it."""
    item = items.Item("ch02_scaled_dot_product", "softmax", None)
    broken = items.Mistake("a planted mistake", ("no such code", "x"))
    with items.known_mistakes(items.KnownMistakes(strict=True)):
        with pytest.raises(items.BrokenMistake, match="'a planted mistake' cannot be built"):
            items.mistakes(item, broken)
