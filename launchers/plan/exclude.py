"""A sweep's exclusion rules: the points of a cartesian sweep it skips, each with one line
(Ramble's `exclude`/`where` idea). Without a rule, one impossible point still refuses the
whole sweep (launchers/plan/sweep.py).

    python -m launch -m parallel.tp=1,2,4,8 nodes=1,2 gpus_per_node=4 \\
        'exclude=[{parallel.tp:8,nodes:1}]'
    python -m launch -m parallel.tp=1,2,4,8 parallel.pp=1,2 nodes=1,2 gpus_per_node=4 \\
        'exclude=[{where:"parallel.tp * parallel.pp > nodes * gpus_per_node"}]'

`exclude` is a list of rules. A rule is a mapping of config keys (dotted) to a value or a
list of values: a point matches it when every key's value is that value or one of the list.
A rule `{where: EXPRESSION}` matches where the expression is true: arithmetic (+ - * / // %),
comparisons (== != < <= > >= in, not in), and, or, not, parentheses, numbers, strings,
true/false/null and dotted config keys; nothing else is evaluated. A point matching any
rule is skipped.
"""
import ast
import functools
import operator

from omegaconf import OmegaConf

KEY = "exclude"
_MISSING = object()
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
            ast.NotIn: lambda a, b: a not in b}
_NAMES = {"true": True, "false": False, "null": None}   # True, False, None parse as constants


class RuleError(ValueError):
    """A rule that is not a rule, said in one line."""


def rules(cfg) -> list:
    """The sweep's rules, as plain data, checked for shape (RuleError)."""
    raw = cfg.get(KEY)
    if raw is None:
        return []
    raw = OmegaConf.to_container(raw, resolve=True) if OmegaConf.is_config(raw) else raw
    if not isinstance(raw, list):
        raise RuleError(f"exclude must be a list of rules, got {raw!r}")
    for rule in raw:
        if not isinstance(rule, dict) or not rule:
            raise RuleError(f"exclude rule {rule!r}: a rule is a mapping of keys to values, or {{where: ...}}")
        if "where" in rule:
            if set(rule) != {"where"} or not isinstance(rule["where"], str):
                raise RuleError(f"exclude rule {rule!r}: `where` takes one expression and nothing beside it")
            _parse(rule["where"])
    return raw


def describe(rule: dict) -> str:
    if "where" in rule:
        return f"where {rule['where']}"
    return ", ".join(f"{k}={v}" for k, v in rule.items())


def matching(cfg, rule_list: list):
    """The first rule the point `cfg` matches, or None (RuleError for a key it lacks)."""
    for rule in rule_list:
        if "where" in rule:
            if _evaluate(_parse(rule["where"]).body, cfg, rule["where"]):
                return rule
        elif all(_matches(_select(cfg, key, rule), want) for key, want in rule.items()):
            return rule
    return None


def _matches(value, want) -> bool:
    wants = want if isinstance(want, list) else [want]
    # true is not 1 here: a boolean matches a boolean only, as the config's types say
    return any(value == w and isinstance(value, bool) == isinstance(w, bool) for w in wants)


def _select(cfg, key: str, rule):
    value = OmegaConf.select(cfg, key, default=_MISSING)
    if value is _MISSING:
        raise RuleError(f"exclude rule {describe(rule) if isinstance(rule, dict) else rule}: "
                        f"no key {key!r} in the config")
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


@functools.lru_cache(maxsize=None)   # checked once by rules(), then read for every point
def _parse(text: str) -> ast.Expression:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise RuleError(f"exclude rule where {text!r}: not an expression ({exc.msg})") from None
    allowed = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub,
               ast.BinOp, ast.Compare, ast.Name, ast.Attribute, ast.Constant, ast.List,
               ast.Tuple, ast.Load, *_BINARY, *_COMPARE)
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            raise RuleError(f"exclude rule where {text!r}: {type(node).__name__} is not allowed "
                            "(arithmetic, comparisons, and/or/not, numbers, strings and keys only)")
    return tree


def _dotted(node) -> str:
    return _dotted(node.value) + "." + node.attr if isinstance(node, ast.Attribute) else node.id


def _evaluate(node, cfg, text):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_evaluate(e, cfg, text) for e in node.elts]
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, (ast.Name, ast.Attribute)):
        return _select(cfg, _dotted(node), f"where {text}")
    if isinstance(node, ast.BoolOp):
        values = (_evaluate(v, cfg, text) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, cfg, text)
        return (not value) if isinstance(node.op, ast.Not) else -value
    try:
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](_evaluate(node.left, cfg, text), _evaluate(node.right, cfg, text))
        left = _evaluate(node.left, cfg, text)
        for op, right_node in zip(node.ops, node.comparators):
            right = _evaluate(right_node, cfg, text)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    except (TypeError, ZeroDivisionError) as exc:
        raise RuleError(f"exclude rule where {text!r}: {exc}") from None
