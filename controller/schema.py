"""Strict loading of YAML mappings into frozen dataclasses.

Rules: unknown keys, missing required keys, wrong types and out-of-range values are errors that
name the key path (``plant.friction.Fs: must be >= Fc (0.1 < 0.2)``). ``inf`` means "no limit";
YAML spellings ``.inf`` and the strings ``inf``/``-inf`` are accepted for floats. Only
``yaml.safe_load`` is ever used.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any, Callable, Literal, Union

import yaml  # type: ignore[import-untyped]  # no stubs needed: safe_load only


class ConfigError(ValueError):
    """A configuration problem; ``str()`` is one line starting with the key path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)


# Custom parsers for types the generic rules do not cover: type -> fn(value, path) -> object
_PARSERS: dict[Any, Callable[[Any, str], Any]] = {}


def require(ok: bool, name: str, message: str) -> None:
    """Validator helper for ``__post_init__``: raise ``ValueError("name: message")`` unless ok;
    the loader turns it into a ConfigError at the field's key path."""
    if not ok:
        raise ValueError(f"{name}: {message}")


def register_parser(tp: Any, fn: Callable[[Any, str], Any]) -> None:
    _PARSERS[tp] = fn


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def parse(tp: Any, value: Any, path: str = "") -> Any:
    """Convert a YAML value to type ``tp``, raising :class:`ConfigError` at ``path``."""
    if tp in _PARSERS:
        return _PARSERS[tp](value, path)
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return parse_dataclass(tp, value, path)
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        rest = tuple(a for a in args if a is not type(None))
        if len(rest) > 1 and Union[rest] in _PARSERS:  # Optional[a registered union]
            return _PARSERS[Union[rest]](value, path)
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return parse(arg, value, path)
            except ConfigError as err:
                errors.append(err)
        raise errors[0] if len(errors) == 1 else ConfigError(path, f"unexpected value {value!r}")
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices or isinstance(value, bool):
            hint = " (YAML reads bare on/off/yes/no as booleans: quote it)" if isinstance(value, bool) else ""
            raise ConfigError(path, f"must be one of {', '.join(map(str, choices))}; got {value!r}{hint}")
        return value
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(path, f"must be a list, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(parse(args[0], item, _join(path, i)) for i, item in enumerate(value))
        if len(value) != len(args):
            raise ConfigError(path, f"must be a list of {len(args)} items, got {len(value)}")
        return tuple(parse(a, item, _join(path, i)) for i, (a, item) in enumerate(zip(args, value)))
    if origin is dict:
        key_t, val_t = typing.get_args(tp)
        if not isinstance(value, dict):
            raise ConfigError(path, f"must be a mapping, got {type(value).__name__}")
        return {parse(key_t, k, path): parse(val_t, v, _join(path, k)) for k, v in value.items()}
    if tp is float:
        if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "-inf", ".inf"):
            value = float(value.replace(".", ""))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(path, f"must be a number, got {value!r}")
        if math.isnan(value):
            raise ConfigError(path, "must not be NaN")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(path, f"must be an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, f"must be true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(path, f"must be a string, got {value!r}")
        return value
    if tp is Any:
        return value
    raise TypeError(f"schema: no rule for type {_type_name(tp)} at {path}")


def parse_dataclass(cls: type, value: Any, path: str = "") -> Any:
    """Build dataclass ``cls`` from a mapping; field validation errors get the key path."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ConfigError(path, f"must be a mapping, got {type(value).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key in value:
        if key not in known:
            raise ConfigError(_join(path, key), f"unknown key (known: {', '.join(sorted(known))})")
    kwargs = {}
    for name, f in known.items():
        if name in value:
            kwargs[name] = parse(hints[name], value[name], _join(path, name))
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(_join(path, name), "required key missing")
    try:
        return cls(**kwargs)
    except ConfigError as err:
        # already carries the path of the field that failed, relative to this dataclass
        raise ConfigError(_join(path, err.path) if err.path else path, err.message) from None
    except ValueError as err:
        raise prefixed(path, err) from None


def prefixed(path: str, err: ValueError) -> ConfigError:
    """Turn a validator's ``"field: message"`` into a ConfigError at ``path.field``."""
    text = str(err)
    head, sep, rest = text.partition(": ")
    if sep and head.replace("_", "").replace(".", "").replace("[", "").replace("]", "").isalnum():
        return ConfigError(_join(path, head), rest)
    return ConfigError(path, text)


# Deeper than this is no config a person wrote (the schema's deepest key path is 5 levels).
MAX_YAML_DEPTH = 32


def _check_nodes(root: yaml.Node, source: Path) -> None:
    """Duplicate mapping keys (YAML's "last one wins" would silently drop a value) and absurd
    nesting are errors naming the key path and line. Iterative: no recursion to exhaust."""
    stack: list[tuple[yaml.Node, str, int]] = [(root, "", 0)]
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_YAML_DEPTH:
            raise ConfigError("", f"{source}: line {node.start_mark.line + 1}: nested deeper "
                                     f"than {MAX_YAML_DEPTH} levels")
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in node.value:
                key = str(key_node.value)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise ConfigError(_join(where, key),
                                      f"{source}: line {line}: duplicate key (first at line "
                                      f"{seen[key]}; YAML would keep only the last)")
                seen[key] = line
                stack.append((value_node, _join(where, key), depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                stack.append((item, f"{where}[{i}]", depth + 1))


def load_yaml(path: str | Path) -> Any:
    """Read a YAML file with the safe loader; syntax errors, duplicate keys and absurd nesting
    become one-line ConfigErrors."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError("", f"{p}: cannot read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise ConfigError("", f"{p}: not UTF-8 text (byte offset {err.start})") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, p)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError("", f"{p}:{where}: invalid YAML ({problem})") from None
    except RecursionError:
        raise ConfigError("", f"{p}: nested deeper than {MAX_YAML_DEPTH} levels") from None
    finally:
        loader.dispose()


def to_plain(obj: Any) -> Any:
    """Dataclasses -> dicts, tuples -> lists (for headers, params.yaml and summaries)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, float) and math.isinf(obj):
        return ".inf" if obj > 0 else "-.inf"
    return obj
