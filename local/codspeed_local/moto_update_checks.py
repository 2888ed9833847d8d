"""moto's update expressions, checked and parsed once: shortcuts of ``moto_speedups`` (installed with the
others), held to moto's own checks by ``tests/integration/test_moto_speedups.py``, which runs moto's own
through ``moto_own_update_checks``."""

import copy
import functools
import pickle
from collections.abc import Iterator
from contextlib import contextmanager

_MOTO_OWN_UPDATE_CHECKS: list[tuple[type, str, object]] = []  # (class, attribute, moto's own) once swapped


def update_expressions_checked_once() -> None:
    """moto checks an update expression's clause counts and paths at every node of its tree (each
    check walking the node's whole subtree), and each of its ten checkers rebuilds its table of
    node types at every node: a third of an update's time, most of a shard's arrival (twenty
    actions). Each table is built once, and the two checks run on the whole expression only, without
    walking its tree (an eighth of what was left of an update): what holds for all of it holds for
    each part. An expression they refuse is checked again node by node, in moto's order, for moto's
    own error. The other checkers' walks look a node's class up once per checker class, not with
    ``isinstance`` against moto's abstract node classes at every node (an eighth of an update)."""
    from moto.dynamodb.parsing import ast_nodes, validators

    if _swapped(ast_nodes.DepthFirstTraverser):
        return
    shortcuts = [(ast_nodes.DepthFirstTraverser, "traverse_node_recursively", _traverse_node_recursively)]
    for checker, name in (
        (validators.ActionCountValidator, "verify_action_counts"),
        (validators.OverlappingPathsValidator, "check_for_overlapping_paths"),
    ):
        shortcuts.append((checker, name, _on_the_whole(getattr(checker, name), ast_nodes.UpdateExpression)))
        shortcuts.append((checker, "traverse", _the_whole_only))
    _swap(shortcuts)


def _processing(checker) -> dict:
    """The checker's table of node classes and their processors, made once (moto made it at every node)."""
    table = vars(checker).get("_table")
    if table is None:
        table = checker._table = checker._processing_map()
    return table


def _the_whole_only(checker, node):
    """The traversal of a check made on the whole: its every other node is returned as it is."""
    kind = _kind(checker, type(node))
    return node if kind is _NOT_A_NODE or kind is _LEFT_AS_IT_IS else _processing(checker)[kind](node)


def _traverse_node_recursively(checker, node, child_id=-1):
    """moto's walk, children first, each node replaced by what its processor answers."""
    kind = _kind(checker, type(node))
    if kind is _NOT_A_NODE:
        return node
    parent_node = node.parent
    if node.children is not None:
        for i, child_node in enumerate(node.children):
            checker.pre_processing_of_child(node, i)
            checker.traverse_node_recursively(child_node, i)
    if kind is not _LEFT_AS_IT_IS:
        node = _processing(checker)[kind](node)
        node.parent = parent_node
        if parent_node:
            parent_node.children[child_id] = node
    return node


_NOT_A_NODE, _LEFT_AS_IT_IS = object(), object()
_KINDS: dict[tuple[type, type], object] = {}


def _kind(checker, node_class: type) -> object:
    """The class in ``checker``'s table that processes a node of ``node_class`` (the first it is a subclass
    of, in the table's order, as moto's ``process`` picks), ``_LEFT_AS_IT_IS`` for a node none processes,
    ``_NOT_A_NODE`` else."""
    key = (type(checker), node_class)
    if key not in _KINDS:
        from moto.dynamodb.parsing.ast_nodes import Node

        if not issubclass(node_class, Node):
            _KINDS[key] = _NOT_A_NODE
        else:
            _KINDS[key] = next((t for t in _processing(checker) if issubclass(node_class, t)), _LEFT_AS_IT_IS)
    return _KINDS[key]


def update_expressions_parsed_once() -> None:
    """moto parses an update expression twice at each update (to find the names and values it uses,
    then to apply it) and deep-copies the tree before its checks, which rewrite their copy: a third of
    what the checks above leave of a shard's arrival. Each expression is parsed once (nobody
    changes the tree: the checks work on their copy, the rest only reads it), and the tree is copied
    by a pickle round trip, a third of deepcopy's time. A refused expression raises at each parse."""
    from moto.dynamodb.parsing import expressions, validators
    from moto.dynamodb.parsing.ast_nodes import Node

    if _swapped(expressions.UpdateExpressionParser):
        return
    parse = expressions.UpdateExpressionParser.make

    @functools.lru_cache(maxsize=512)
    def parsed(expression):
        return parse(expression)

    def tree_copy(value, memo=None):
        if isinstance(value, Node):
            return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
        return copy.deepcopy(value, memo)

    _swap([(expressions.UpdateExpressionParser, "make", staticmethod(parsed)), (validators, "deepcopy", tree_copy)])


def _swapped(owner) -> bool:
    return any(swapped is owner for swapped, _, _ in _MOTO_OWN_UPDATE_CHECKS)


_INHERITED = object()  # moto's own is its base class's: put back by removing the shortcut


def _swap(shortcuts: list[tuple[object, str, object]]) -> None:
    """Each (owner, name, shortcut) in place of moto's own, which ``moto_own_update_checks`` puts back."""
    for owner, name, shortcut in shortcuts:
        _MOTO_OWN_UPDATE_CHECKS.append((owner, name, vars(owner).get(name, _INHERITED)))
        setattr(owner, name, shortcut)


def _put(owner, name: str, value) -> None:
    if value is _INHERITED:
        delattr(owner, name)
    else:
        setattr(owner, name, value)


@contextmanager
def moto_own_update_checks() -> Iterator[None]:
    """moto's own update checks for the block: what the shortcut is tested and measured against."""
    shortcuts = [(owner, name, vars(owner)[name]) for owner, name, _ in _MOTO_OWN_UPDATE_CHECKS]
    for owner, name, own in _MOTO_OWN_UPDATE_CHECKS:
        _put(owner, name, own)
    try:
        yield
    finally:
        for owner, name, shortcut in shortcuts:
            _put(owner, name, shortcut)


def _on_the_whole(check, checked_type):
    def on_the_whole(self, node):
        if node.parent is not None:
            return node
        try:
            return check(self, node)
        except Exception:
            for part in _post_order(node, checked_type):
                check(self, part)
            raise

    return on_the_whole


def _post_order(node, checked_type) -> list:
    """The nodes moto's traversal checks, in its order: children first."""
    from moto.dynamodb.parsing.ast_nodes import Node

    found = []
    for child in node.children or []:
        if isinstance(child, Node):
            found += _post_order(child, checked_type)
    return found + [node] if isinstance(node, checked_type) else found
