"""JSON Schema compatibility after Confluent's rules: the differences between a writer's schema (the original) and a
reader's (the update), named with Confluent's difference types, of which some are compatible and the rest not.

As in Confluent's registry, objects follow content models: an *open* model (`additionalProperties` absent or true)
may already carry any property, so a reader adding a typed property to it is incompatible
(PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL); a *closed* one (`additionalProperties: false`) carries only its properties,
so a reader may add optional ones but not drop any (PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL); a *partially open*
one (`additionalProperties` a schema) allows what that schema covers. Arrays in tuple form follow the same rules
with `additionalItems`. Types compare as sets ("integer" within "number"); numeric, length, item and property
bounds may only relax; `enum` may only grow; `oneOf`/`anyOf` may gain branches, `allOf` lose them, and the branches
are matched pairwise by compatibility.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from referencing.exceptions import Unresolvable

COMPATIBLE = frozenset({
    "ID_CHANGED", "DESCRIPTION_CHANGED", "TITLE_CHANGED", "DEFAULT_CHANGED", "SCHEMA_REMOVED", "TYPE_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED", "MIN_LENGTH_REMOVED", "PATTERN_REMOVED",
    "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED", "EXCLUSIVE_MAXIMUM_INCREASED",
    "EXCLUSIVE_MAXIMUM_REMOVED", "EXCLUSIVE_MINIMUM_DECREASED", "EXCLUSIVE_MINIMUM_REMOVED", "MULTIPLE_OF_REDUCED",
    "MULTIPLE_OF_REMOVED", "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
    "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED", "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL", "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED",
    "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED", "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED",
    "ADDITIONAL_ITEMS_EXTENDED", "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "ENUM_ARRAY_EXTENDED", "COMBINED_TYPE_EXTENDED",
    "PRODUCT_TYPE_NARROWED", "SUM_TYPE_EXTENDED", "NOT_TYPE_NARROWED",
})

TYPE_KEYWORDS: dict[str, frozenset[str]] = {
    "object": frozenset({"properties", "required", "additionalProperties", "patternProperties", "maxProperties",
                         "minProperties", "dependencies", "dependentRequired", "dependentSchemas", "propertyNames"}),
    "array": frozenset({"items", "prefixItems", "additionalItems", "maxItems", "minItems", "uniqueItems",
                        "contains"}),
    "string": frozenset({"maxLength", "minLength", "pattern"}),
    "number": frozenset({"maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf"}),
}
ALL_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
COMBINERS = ("allOf", "anyOf", "oneOf")


@dataclass(frozen=True)
class Node:
    """A schema (a dict or a boolean) with what resolves its `$ref`s: the resolver in scope and the draft."""

    contents: Any
    resolver: Any
    specification: Any

    def child(self, contents: Any) -> Node:
        resolver = self.resolver
        if isinstance(contents, dict) and ("$id" in contents or "id" in contents):
            resolver = resolver.in_subresource(self.specification.create_resource(contents))
        return Node(contents, resolver, self.specification)

    def deref(self) -> Node:
        node = self
        for _ in range(64):  # a chain of references, not a loop
            ref = node.contents.get("$ref") if isinstance(node.contents, dict) else None
            if not isinstance(ref, str):
                return node
            try:
                resolved = node.resolver.lookup(ref)
            except Unresolvable:
                return Node(True, node.resolver, node.specification)
            node = Node(resolved.contents, resolved.resolver, node.specification).child(resolved.contents)
        return node

    def get(self, key: str, default: Any = None) -> Any:
        return self.contents.get(key, default) if isinstance(self.contents, dict) else default

    def sub(self, key: str) -> Node | None:
        value = self.get(key)
        return None if value is None else self.child(value)


def is_empty(node: Node) -> bool:
    """Accepts everything: `true` or an object without constraining keywords."""
    contents = node.deref().contents
    if contents is True:
        return True
    metadata = {"$id", "id", "$schema", "title", "description", "default", "examples", "$comment", "definitions",
                "$defs"}
    return isinstance(contents, dict) and not set(contents) - metadata


def is_false(node: Node) -> bool:
    return node.deref().contents is False


def types_of(node: Node) -> frozenset[str] | None:
    """The instance types a schema allows by its `type`, or guessed from its keywords when one family is used;
    None when any type goes."""
    declared = node.get("type")
    if isinstance(declared, str):
        return frozenset({declared})
    if isinstance(declared, list):
        return frozenset(str(item) for item in declared)
    if not isinstance(node.contents, dict):
        return None
    families = {kind for kind, words in TYPE_KEYWORDS.items() if words & set(node.contents)}
    return frozenset(families) if len(families) == 1 else None


def widen(types: frozenset[str] | None) -> frozenset[str]:
    """The types as a set where "number" also holds "integer"."""
    result = set(ALL_TYPES if types is None else types)
    if "number" in result:
        result.add("integer")
    return frozenset(result)


class Diff:
    """The differences found, as (type, path, detail)."""

    def __init__(self, in_progress: set[tuple[int, int]] | None = None) -> None:
        self.found: list[tuple[str, str, str]] = []
        # (writer node, reader node) pairs being compared, shared with the trial comparisons made on the way: a pair
        # met again through a $ref cycle counts as compatible there, and the recursion ends.
        self.in_progress = in_progress if in_progress is not None else set()

    def add(self, kind: str, path: str, detail: str = "") -> None:
        self.found.append((kind, path, detail))

    def incompatible(self) -> list[str]:
        return [f"{kind} at '{path}'" + (f": {detail}" if detail else "")
                for kind, path, detail in dict.fromkeys(self.found) if kind not in COMPATIBLE]


def schema_diff(writer: Node, reader: Node) -> list[str]:
    """Why `reader` cannot read data valid under `writer`, one message per incompatible difference."""
    diff = Diff()
    compare(diff, "#", writer, reader)
    return diff.incompatible()


def compatible(parent: Diff, original: Node, update: Node) -> bool:
    """Whether `update` reads what `original` allows: a trial comparison within `parent`'s."""
    diff = Diff(parent.in_progress)
    compare(diff, "#", original, update)
    return not diff.incompatible()


def compare(diff: Diff, path: str, original: Node, update: Node) -> None:
    original, update = original.deref(), update.deref()
    key = (id(original.contents), id(update.contents))
    if key in diff.in_progress:
        return
    diff.in_progress.add(key)
    try:
        compare_nodes(diff, path, original, update)
    finally:
        diff.in_progress.discard(key)


def compare_nodes(diff: Diff, path: str, original: Node, update: Node) -> None:
    if is_false(update) and not is_false(original):
        diff.add("TYPE_CHANGED", path, "the reader accepts nothing")
        return
    if is_false(original) or is_empty(update):
        if not is_empty(original) and not is_false(original):
            diff.add("TYPE_EXTENDED", path, "the reader accepts anything")
        return
    compare_metadata(diff, path, original, update)
    if compare_combined(diff, path, original, update):
        return
    compare_types(diff, path, original, update)
    compare_enum(diff, path, original, update)
    compare_not(diff, path, original, update)


def compare_metadata(diff: Diff, path: str, original: Node, update: Node) -> None:
    for keyword, kind in (("$id", "ID_CHANGED"), ("title", "TITLE_CHANGED"), ("description", "DESCRIPTION_CHANGED"),
                          ("default", "DEFAULT_CHANGED")):
        if original.get(keyword) != update.get(keyword):
            diff.add(kind, path)


def only_combiner(node: Node) -> str | None:
    """The one combining keyword of a schema that is nothing else (beyond metadata), if so."""
    present = [word for word in COMBINERS if isinstance(node.get(word), list)]
    if len(present) != 1 or types_of(node) is not None or node.get("enum") is not None or "const" in (
            node.contents if isinstance(node.contents, dict) else {}):
        return None
    return present[0]


def compare_combined(diff: Diff, path: str, original: Node, update: Node) -> bool:
    """Compare combining keywords; True when that was the whole comparison (a plain schema against a sum type)."""
    o_only, u_only = only_combiner(original), only_combiner(update)
    if u_only in ("anyOf", "oneOf") and not any(isinstance(original.get(word), list) for word in COMBINERS):
        branches = [update.child(item) for item in update.get(u_only)]
        if any(compatible(diff, original, branch) for branch in branches):
            diff.add("SUM_TYPE_EXTENDED", path, f"the reader's {u_only} has a branch for the writer's schema")
        else:
            diff.add("TYPE_CHANGED", path, f"no branch of the reader's {u_only} reads the writer's schema")
        return True
    if o_only in ("anyOf", "oneOf") and not any(isinstance(update.get(word), list) for word in COMBINERS):
        branches = [original.child(item) for item in original.get(o_only)]
        unread = [index for index, branch in enumerate(branches) if not compatible(diff, branch, update)]
        if unread:
            diff.add("SUM_TYPE_NARROWED" if len(unread) < len(branches) else "TYPE_CHANGED", path,
                     f"the reader cannot read the writer's {o_only} branches {unread}")
        return True
    if o_only and u_only and o_only != u_only:
        changed_combiner(diff, path, o_only, u_only, original, update)
        return True
    for word in COMBINERS:
        compare_combiner(diff, path, word, original, update)
    return False


def changed_combiner(diff: Diff, path: str, old: str, new: str, original: Node, update: Node) -> None:
    """oneOf or allOf becoming anyOf relaxes, if every writer branch is readable by a reader branch; other
    changes of the combining keyword are incompatible."""
    if new != "anyOf":
        diff.add("COMBINED_TYPE_CHANGED", f"{path}/{new}", f"the writer's {old} became {new}")
        return
    o_nodes = [original.child(item) for item in original.get(old)]
    u_nodes = [update.child(item) for item in update.get(new)]
    relaxes = (matching(diff, o_nodes, u_nodes) == len(o_nodes) if old == "oneOf"
               else any(compatible(diff, o, u) for o in o_nodes for u in u_nodes))
    if relaxes:
        diff.add("COMBINED_TYPE_EXTENDED", f"{path}/{new}")
    else:
        diff.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED", f"{path}/{new}",
                 f"the writer's {old} branches do not pair up with the reader's {new}")


def compare_combiner(diff: Diff, path: str, word: str, original: Node, update: Node) -> None:
    o_list, u_list = original.get(word), update.get(word)
    if not isinstance(o_list, list) and not isinstance(u_list, list):
        return
    if not isinstance(o_list, list) or not isinstance(u_list, list):
        # Dropping a combination drops constraints; adding one adds them.
        if word == "allOf":
            kind = "PRODUCT_TYPE_NARROWED" if isinstance(o_list, list) else "PRODUCT_TYPE_EXTENDED"
        else:
            kind = "COMBINED_TYPE_EXTENDED" if isinstance(o_list, list) else "COMBINED_TYPE_CHANGED"
        diff.add(kind, f"{path}/{word}", f"{word} {'removed' if isinstance(o_list, list) else 'added'} by the reader")
        return
    o_nodes, u_nodes = [original.child(x) for x in o_list], [update.child(x) for x in u_list]
    if len(u_nodes) != len(o_nodes):
        grew = len(u_nodes) > len(o_nodes)
        if word == "allOf":
            diff.add("PRODUCT_TYPE_EXTENDED" if grew else "PRODUCT_TYPE_NARROWED", f"{path}/{word}")
        else:
            diff.add("SUM_TYPE_EXTENDED" if grew else "SUM_TYPE_NARROWED", f"{path}/{word}")
    # As in Confluent's registry: the smaller list must pair up, one to one, with compatible members of the larger.
    if matching(diff, o_nodes, u_nodes) < min(len(o_nodes), len(u_nodes)):
        unread = [i for i, o in enumerate(o_nodes) if not any(compatible(diff, o, u) for u in u_nodes)]
        detail = f"the writer's {word} members {unread} are read by none of the reader's" if unread else (
            "the subschemas cannot be paired up one to one compatibly")
        diff.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED", f"{path}/{word}", detail)


def matching(diff: Diff, originals: list[Node], updates: list[Node]) -> int:
    """The size of a largest one-to-one pairing of writer and reader subschemas where the reader's is compatible
    with the writer's (augmenting paths; the lists are short)."""
    edges = [[j for j, update in enumerate(updates) if compatible(diff, original, update)] for original in originals]
    owner: dict[int, int] = {}

    def augment(i: int, visited: set[int]) -> bool:
        for j in edges[i]:
            if j not in visited:
                visited.add(j)
                if j not in owner or augment(owner[j], visited):
                    owner[j] = i
                    return True
        return False

    return sum(augment(i, set()) for i in range(len(originals)))


def compare_types(diff: Diff, path: str, original: Node, update: Node) -> None:
    o_types, u_types = types_of(original), types_of(update)
    o_wide, u_wide = widen(o_types), widen(u_types)
    if o_wide != u_wide:
        if o_wide <= u_wide:
            diff.add("TYPE_EXTENDED", path)
        elif u_wide <= o_wide:
            diff.add("TYPE_NARROWED", path, f"the reader allows {sorted(u_wide - {'integer'} or u_wide)} "
                                            f"but the writer {sorted(o_wide - {'integer'} or o_wide)}")
            return
        else:
            diff.add("TYPE_CHANGED", path, f"the reader allows {sorted(u_types or ALL_TYPES)} but the writer "
                                           f"{sorted(o_types or ALL_TYPES)}")
            return
    common = o_wide & u_wide
    if "object" in common:
        compare_object(diff, path, original, update)
    if "array" in common:
        compare_array(diff, path, original, update)
    if "string" in common:
        compare_string(diff, path, original, update)
    if common & {"number", "integer"}:
        compare_number(diff, path, original, update)


def compare_bound(diff: Diff, path: str, keyword: str, original: Node, update: Node) -> None:
    """A bound keyword: the reader may drop a bound or relax it, not add or tighten it (COMPATIBLE holds which
    of INCREASED/DECREASED relaxes)."""
    name = {"maxLength": "MAX_LENGTH", "minLength": "MIN_LENGTH", "maximum": "MAXIMUM", "minimum": "MINIMUM",
            "exclusiveMaximum": "EXCLUSIVE_MAXIMUM", "exclusiveMinimum": "EXCLUSIVE_MINIMUM",
            "maxItems": "MAX_ITEMS", "minItems": "MIN_ITEMS", "maxProperties": "MAX_PROPERTIES",
            "minProperties": "MIN_PROPERTIES"}[keyword]
    old, new = bound_value(original, keyword), bound_value(update, keyword)
    where = f"{path}/{keyword}"
    if old == new:
        return
    if old is None:
        diff.add(f"{name}_ADDED", where, f"the reader adds {keyword} {new}")
    elif new is None:
        diff.add(f"{name}_REMOVED", where)
    elif new > old:
        diff.add(f"{name}_INCREASED", where, f"{keyword} {old} -> {new}")
    else:
        diff.add(f"{name}_DECREASED", where, f"{keyword} {old} -> {new}")


def bound_value(node: Node, keyword: str) -> float | None:
    """The keyword's number; draft 4's boolean `exclusiveMaximum`/`exclusiveMinimum` moves the bound across."""
    value = node.get(keyword)
    if keyword in ("exclusiveMaximum", "exclusiveMinimum"):
        if isinstance(value, bool):
            return node.get(keyword.replace("exclusiveM", "m")) if value else None
    elif keyword in ("maximum", "minimum") and node.get(f"exclusive{keyword.capitalize()}") is True:
        return None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def compare_string(diff: Diff, path: str, original: Node, update: Node) -> None:
    compare_bound(diff, path, "maxLength", original, update)
    compare_bound(diff, path, "minLength", original, update)
    old, new = original.get("pattern"), update.get("pattern")
    if old != new:
        kind = "PATTERN_ADDED" if old is None else "PATTERN_REMOVED" if new is None else "PATTERN_CHANGED"
        diff.add(kind, f"{path}/pattern", "" if new is None else f"the reader requires pattern {new!r}")


def compare_number(diff: Diff, path: str, original: Node, update: Node) -> None:
    for keyword in ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum"):
        compare_bound(diff, path, keyword, original, update)
    old, new = original.get("multipleOf"), update.get("multipleOf")
    if old == new:
        return
    where = f"{path}/multipleOf"
    if old is None:
        diff.add("MULTIPLE_OF_ADDED", where, f"the reader requires multiples of {new}")
    elif new is None:
        diff.add("MULTIPLE_OF_REMOVED", where)
    elif divides(new, old):
        diff.add("MULTIPLE_OF_REDUCED", where)
    elif divides(old, new):
        diff.add("MULTIPLE_OF_EXPANDED", where, f"multipleOf {old} -> {new}")
    else:
        diff.add("MULTIPLE_OF_CHANGED", where, f"multipleOf {old} -> {new}")


def divides(divisor: float, value: float) -> bool:
    quotient = value / divisor
    return math.isclose(quotient, round(quotient), rel_tol=1e-9)


def content_model(node: Node, keyword: str) -> tuple[str, Node | None]:
    """("open" | "closed" | "partial", the schema of additional members when partial)."""
    value = node.get(keyword)
    if value is None or value is True or (isinstance(value, dict) and is_empty(node.child(value))):
        return "open", None
    if value is False or is_false(node.child(value)):
        return "closed", None
    return "partial", node.child(value)


def properties(node: Node) -> dict[str, Node]:
    props = node.get("properties")
    return {name: node.child(schema) for name, schema in props.items()} if isinstance(props, dict) else {}


def required(node: Node) -> set[str]:
    names = node.get("required")
    return {str(name) for name in names} if isinstance(names, list) else set()


def has_default(node: Node) -> bool:
    contents = node.deref().contents
    return isinstance(contents, dict) and "default" in contents


def compare_object(diff: Diff, path: str, original: Node, update: Node) -> None:
    o_props, u_props = properties(original), properties(update)
    o_required, u_required = required(original), required(update)
    for name, schema in o_props.items():
        if name not in u_props:
            property_removed(diff, f"{path}/properties/{name}", schema, update)
    for name, schema in u_props.items():
        if name not in o_props:
            property_added(diff, f"{path}/properties/{name}", schema, name in u_required, original)
        else:
            compare(diff, f"{path}/properties/{name}", o_props[name], schema)
    for name in sorted(u_required - o_required):
        if name in o_props or name not in u_props:
            declared = u_props.get(name)
            with_default = declared is not None and has_default(declared)
            diff.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if with_default else "REQUIRED_ATTRIBUTE_ADDED",
                     f"{path}/required/{name}", f"the reader requires '{name}', the writer does not")
    for name in sorted(o_required - u_required):
        diff.add("REQUIRED_ATTRIBUTE_REMOVED", f"{path}/required/{name}")
    compare_additional(diff, path, "additionalProperties", "ADDITIONAL_PROPERTIES", original, update)
    compare_bound(diff, path, "maxProperties", original, update)
    compare_bound(diff, path, "minProperties", original, update)


def property_removed(diff: Diff, where: str, schema: Node, update: Node) -> None:
    model, additional = content_model(update, "additionalProperties")
    if model == "open":
        diff.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", where)
    elif model == "partial" and additional is not None:
        covered = compatible(diff, schema, additional)
        diff.add(f"PROPERTY_REMOVED_{'IS' if covered else 'NOT'}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                 "" if covered else "the reader's additionalProperties cannot read the writer's property")
    elif is_false(schema):
        diff.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)
    else:
        diff.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where,
                 "the reader's closed content model rejects a property the writer allows")


def property_added(diff: Diff, where: str, schema: Node, is_required: bool, original: Node) -> None:
    model, additional = content_model(original, "additionalProperties")
    if model == "open":
        if is_empty(schema):
            diff.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", where)
        else:
            diff.add("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where,
                     "the writer's open content model may already carry this property with any value")
        return
    if additional is not None:
        covered = compatible(diff, additional, schema)
        diff.add(f"PROPERTY_ADDED_{'IS' if covered else 'NOT'}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                 "" if covered else "the property cannot read what the writer's additionalProperties allows")
    if not is_required:
        diff.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where)
    elif has_default(schema):
        diff.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL", where)
    else:
        diff.add("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", where,
                 "the reader requires a property the writer does not write")


def compare_additional(diff: Diff, path: str, keyword: str, name: str, original: Node, update: Node) -> None:
    o_model, o_schema = content_model(original, keyword)
    u_model, u_schema = content_model(update, keyword)
    where = f"{path}/{keyword}"
    if o_model == u_model == "partial" and o_schema is not None and u_schema is not None:
        compare(diff, where, o_schema, u_schema)
    elif o_model != u_model:
        if u_model == "closed":
            diff.add(f"{name}_REMOVED", where, "the reader closes the content model")
        elif o_model == "closed":
            diff.add(f"{name}_ADDED", where)
        elif u_model == "open":
            diff.add(f"{name}_EXTENDED", where)
        else:
            diff.add(f"{name}_NARROWED", where, "the reader constrains additional members the writer leaves open")


def tuple_items(node: Node) -> tuple[list[Node] | None, str]:
    """The positional item schemas and the keyword for the rest: draft 2020-12's `prefixItems` and `items`, older
    drafts' `items` list and `additionalItems`."""
    if isinstance(node.get("prefixItems"), list):
        return [node.child(item) for item in node.get("prefixItems")], "items"
    if isinstance(node.get("items"), list):
        return [node.child(item) for item in node.get("items")], "additionalItems"
    return None, ""


def compare_array(diff: Diff, path: str, original: Node, update: Node) -> None:
    o_tuple, o_rest = tuple_items(original)
    u_tuple, u_rest = tuple_items(update)
    if o_tuple is None and u_tuple is None:
        compare_items(diff, f"{path}/items", original.sub("items"), update.sub("items"))
    elif o_tuple is not None and u_tuple is not None:
        for index, (old, new) in enumerate(zip(o_tuple, u_tuple, strict=False)):
            compare(diff, f"{path}/items/{index}", old, new)
        for index in range(len(u_tuple), len(o_tuple)):
            item_removed(diff, f"{path}/items/{index}", o_tuple[index], update, u_rest)
        for index in range(len(o_tuple), len(u_tuple)):
            item_added(diff, f"{path}/items/{index}", u_tuple[index], original, o_rest)
        compare_additional(diff, path, u_rest, "ADDITIONAL_ITEMS",
                           Node({u_rest: original.get(o_rest)}, original.resolver, original.specification),
                           update)
    else:
        diff.add("TYPE_CHANGED", f"{path}/items", "list validation and tuple validation do not mix")
    compare_bound(diff, path, "maxItems", original, update)
    compare_bound(diff, path, "minItems", original, update)
    if bool(original.get("uniqueItems")) != bool(update.get("uniqueItems")):
        diff.add("UNIQUE_ITEMS_ADDED" if update.get("uniqueItems") else "UNIQUE_ITEMS_REMOVED", f"{path}/uniqueItems")


def compare_items(diff: Diff, where: str, old: Node | None, new: Node | None) -> None:
    if new is None or is_empty(new):
        if old is not None and not is_empty(old):
            diff.add("SCHEMA_REMOVED", where)
    elif old is None or is_empty(old):
        diff.add("SCHEMA_ADDED", where, "the reader constrains items the writer leaves free")
    else:
        compare(diff, where, old, new)


def item_removed(diff: Diff, where: str, schema: Node, update: Node, rest: str) -> None:
    model, additional = content_model(update, rest)
    if model == "open":
        diff.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", where)
    elif additional is not None:
        covered = compatible(diff, schema, additional)
        diff.add(f"ITEM_REMOVED_{'IS' if covered else 'NOT'}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
    elif is_false(schema):
        diff.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)
    else:
        diff.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", where, "the reader's closed tuple rejects this item")


def item_added(diff: Diff, where: str, schema: Node, original: Node, rest: str) -> None:
    model, additional = content_model(original, rest)
    if model == "closed":
        diff.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", where)
    elif additional is not None:
        covered = compatible(diff, additional, schema)
        diff.add(f"ITEM_ADDED_{'IS' if covered else 'NOT'}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)
    elif is_empty(schema):
        diff.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", where)
    else:
        diff.add("ITEM_ADDED_TO_OPEN_CONTENT_MODEL", where, "the writer's open tuple may carry any value here")


def same_json(left: Any, right: Any) -> bool:
    """JSON equality: 1 and 1.0 are equal, 1 and true are not (Python's == says otherwise)."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(same_json(left[key], right[key]) for key in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(same_json(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


def enum_values(node: Node) -> list[Any] | None:
    if isinstance(node.contents, dict) and "const" in node.contents:
        return [node.contents["const"]]
    values = node.get("enum")
    return list(values) if isinstance(values, list) else None


def compare_enum(diff: Diff, path: str, original: Node, update: Node) -> None:
    old, new = enum_values(original), enum_values(update)
    if old == new and (old is None or new is None or same_json(old, new)):
        return
    where = f"{path}/enum"
    if new is None or (old is not None and all(contains(new, value) for value in old)):
        diff.add("ENUM_ARRAY_EXTENDED", where)
    elif old is None or all(contains(old, value) for value in new):
        missing = [value for value in (old or []) if not contains(new, value)]
        diff.add("ENUM_ARRAY_NARROWED", where, f"the reader lacks {missing}" if missing else "the reader adds an enum")
    else:
        diff.add("ENUM_ARRAY_CHANGED", where, f"the reader lacks {[v for v in old if not contains(new, v)]}")


def contains(values: list[Any], value: Any) -> bool:
    return any(same_json(item, value) for item in values)


def compare_not(diff: Diff, path: str, original: Node, update: Node) -> None:
    old, new = original.sub("not"), update.sub("not")
    if old is None and new is None:
        return
    where = f"{path}/not"
    if new is None:
        diff.add("NOT_TYPE_NARROWED", where)
    elif old is None or not compatible(diff, new, old):
        # `not` inverts: the reader's excluded set must lie within the writer's.
        diff.add("NOT_TYPE_EXTENDED", where, "the reader excludes values the writer allows")
