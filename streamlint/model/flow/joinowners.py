"""Whose stream does an ordering found by name order? (the owner of a searched stream field, issue 16 recall)

:func:`~streamlint.model.flow.leaves.stream_joined_elsewhere` answers "does some other code join this stream?" by
the stream's *name*: any ``<x>.copy_stream.synchronize()`` anywhere in the project. In a large project a field
name like ``copy_stream`` or ``stream`` belongs to many classes, and one unrelated class joining its own
``self.copy_stream`` hid every missing join of the others. This module resolves the searched name to its owner,
the class whose field it is, and says which orderings can reach that owner's stream:

* the owner's stream is *private* (:func:`private_stream`) when every assignment of the field in the owner (the
  bases the project declares for it and its subclasses) makes a stream of its own (``Stream(...)``, or that or None
  under a test) and none of these classes hands it out (:func:`hands_out`: as an argument of a call other than a
  stream API — ``torch.cuda.stream(s)``, ``wait_stream``, ``record_event``, ``record_stream`` —, in a return /
  yield, a display, an assignment to anything but the field itself, by name in a string, ``getattr``). Only then
  can an ordering elsewhere reach it solely through an object of the owner;
* an ordering's receiver (:func:`may_reach`) reaches the owner's object when it is ``self`` / ``cls`` in the owner,
  a base or a subclass (the bases the project declares), a parameter annotated with such a class or with no
  project class, a local or a field the code cannot type (precision first: an untyped receiver counts); it does
  not when it is ``self`` of an unrelated class, a parameter annotated only with unrelated project classes or one
  that every call binds to ``self`` of unrelated classes (:mod:`~streamlint.model.flow.receivers`), a field or
  local every assignment of which constructs an unrelated project class, or a bare name that is a parameter (a
  private stream is handed to no function; a local bound from ``self.<name>`` is followed to it);
* past the caller-file bound the search stays the silent one: narrowing it to the files naming the owner class
  would miss an untyped helper handed the object (``drain(pf)``, ``pf = build(...)``) in a file that never names it.

A stream that is not private (handed in by a creator that may join it under another name, handed out) keeps the
name-based answer: precision first. All decisions read the syntax tree (comments and strings never count as
orderings); :func:`code_without_comments` strips comments from the text searches of the protocol modules.
"""

from __future__ import annotations

import io
import re
import textwrap
import tokenize
from typing import TYPE_CHECKING

from streamlint._lazy import cst
from streamlint.model.file import dotted
from streamlint.model.streams import derived
from streamlint.model.walk import descendants

if TYPE_CHECKING:
    from streamlint.model.file import FileModel
    from streamlint.model.filefacts import ClassInfo, FunctionInfo
    from streamlint.model.project import Project

# calls that take a stream without keeping it or handing it to other code
_STREAM_USES = frozenset({"stream", "StreamContext", "wait_stream", "wait_event", "record_event", "record",
                          "record_stream", "synchronize", "query", "set_stream", "use_stream", "Event",
                          "isinstance", "id", "bool", "str", "repr", "hash", "print", "len"})


def code_without_comments(code: str) -> str:
    """``code`` (a module, a function or an indented block of one) with every comment blanked, for the text
    searches of the protocol modules; code that does not tokenize loses ``#`` to end-of-line outside quotes."""
    text = textwrap.dedent(code.lstrip("\n"))
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return re.sub(r"#[^\n'\"]*$", "", text, flags=re.M)
    lines = text.splitlines(keepends=True)
    for tok in tokens:
        (row, col), end = tok.start, tok.end[1]
        lines[row - 1] = lines[row - 1][:col] + " " * (end - col) + lines[row - 1][end:]
    return "".join(lines)


def _class(project: Project, name: str) -> list[tuple[FileModel, ClassInfo]]:
    """The project classes called ``name`` (by the bytes ``class <name>``: only those files are parsed)."""
    out = []
    for model in filter(None, map(project.file, project.paths_containing((f"class {name}".encode(),)))):
        cls = model.classes.get(name)
        if cls is not None:
            out.append((model, cls))
    return out


def related(project: Project, a: str, b: str) -> bool:
    from streamlint.model.flow.guardedwork import _related

    return _related(project, a, b)


def _fresh(v: cst.BaseExpression | None) -> bool:
    if isinstance(v, cst.IfExp):
        return all(_fresh(x) or isinstance(x, cst.Name) and x.value == "None" for x in (v.body, v.orelse)) \
            and (_fresh(v.body) or _fresh(v.orelse))
    return isinstance(v, cst.Call) and (dotted(v.func) or "").endswith("Stream")


def _is_self_field(node: cst.CSTNode, name: str) -> bool:
    while isinstance(node, cst.Subscript):
        node = node.value
    return isinstance(node, cst.Attribute) and node.attr.value == name and isinstance(node.value, cst.Name) \
        and node.value.value in ("self", "cls")


def _parents(root: cst.CSTNode) -> dict[int, cst.CSTNode]:
    out: dict[int, cst.CSTNode] = {}
    stack = [root]
    while stack:
        n = stack.pop()
        for c in n.children:
            out[id(c)] = n
            stack.append(c)
    return out


def _kept_in_place(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> bool:
    """Is the mention ``node`` (``self.<name>``, an element of it) one that keeps the stream in the object: a method
    called on it, a stream API handed it, a store into it, a test of it, a loop over its elements?"""
    parent = parents.get(id(node))
    while isinstance(parent, cst.Subscript) and parent.value is node:
        node, parent = parent, parents.get(id(parent))
    if isinstance(parent, cst.Attribute) and parent.value is node:
        return True  # its method (``.synchronize()``), an attribute of it
    if isinstance(parent, cst.IfExp):
        return parent.test is node  # (a value chosen, `s = self.x if c else y`, goes on)
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.If, cst.While, cst.BooleanOperation,
                           cst.UnaryOperation, cst.Assert, cst.WithItem)):
        return True
    if isinstance(parent, cst.AssignTarget) or isinstance(parent, (cst.AnnAssign, cst.AugAssign)) \
            and parent.target is node:
        return True
    if isinstance(parent, cst.For) and parent.iter is node:
        return True
    if isinstance(parent, cst.Arg):
        call = parents.get(id(parent))
        if isinstance(call, cst.Call):
            func = call.func
            last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) \
                else None
            return last in _STREAM_USES
    return False


def _alias(node: cst.CSTNode, parents: dict[int, cst.CSTNode]) -> str | None:
    """The local name ``node`` is bound to (``s = self.copy_stream``), if that is all the statement does."""
    parent = parents.get(id(node))
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target.value
    return None


def _method_hands_out(method: FunctionInfo, name: str) -> bool:
    """Does the method let ``self.<name>`` leave the object (through a local alias too: its uses judged alike)?"""
    parents = _parents(method.node)
    aliases: set[str] = set()
    for n in descendants(method.node):
        if _is_self_field(n, name):
            alias = _alias(n, parents)
            if alias is not None:
                aliases.add(alias)
            elif not _kept_in_place(n, parents):
                return True
    if not aliases:
        return False
    for n in descendants(method.node):
        if isinstance(n, cst.Name) and n.value in aliases and not isinstance(parents.get(id(n)), cst.AssignTarget) \
                and not _kept_in_place(n, parents):
            return True
    return False


def _classes_of(project: Project, model: FileModel, cls: ClassInfo) -> list[tuple[FileModel, ClassInfo]] | None:
    """``cls``, the bases the project declares for it (by name) and the project classes deriving from it (their
    methods use ``self.<name>`` too: a subclass may hand it out or rebind it); None when the files naming the class
    are too many to search for subclasses."""
    from streamlint.model.flow.guardedwork import _bases
    from streamlint.model.flow.joinedreads import _subclasses_of
    from streamlint.model.options import MAX_CALLER_FILES

    if len(project.paths_containing((cls.name.encode(),))) > MAX_CALLER_FILES:
        return None
    out = [(model, cls)]
    for base in _bases(project, cls.name):
        out += _class(project, base)
    return out + _subclasses_of(project, model, cls)


def hands_out(project: Project, model: FileModel, cls: ClassInfo, name: str) -> bool:
    """Does the class (or a base) let ``self.<name>`` reach other code otherwise than through the object (module
    docstring), or name it in a string (``getattr(self, "copy_stream")``)?"""
    memo = derived(project, "joinowners_hands_out")
    key = (id(cls), name)
    if key not in memo:
        classes = _classes_of(project, model, cls)
        found = classes is None  # (subclasses that cannot be searched may hand it out)
        for m, c in classes or ():
            if re.search(rf"""['"]{re.escape(name)}['"]""", m.code(c.node)) \
                    or any(_method_hands_out(method, name) for method in c.methods.values()):
                found = True
                break
        memo[key] = found
    return memo[key]



def private_stream(project: Project, model: FileModel, cls: ClassInfo | None, name: str) -> bool:
    """Is ``self.<name>`` a stream the class makes for itself and never hands out (module docstring)?"""
    if cls is None:
        return False
    values = [a.value for _, c in _classes_of(project, model, cls) or () for m in c.methods.values() for a in m.assigns
              if a.target == f"self.{name}"]
    return bool(values) and all(_fresh(v) for v in values) and not hands_out(project, model, cls, name)


def _annotation_names(ann: cst.BaseExpression) -> set[str] | None:
    """The class names an annotation names (``Optional["Loader"]`` -> {Loader}); None for one it cannot read."""
    out: set[str] = set()
    for n in descendants(ann):
        if isinstance(n, cst.SimpleString):
            text = n.evaluated_value if isinstance(n.evaluated_value, str) else ""
            out |= set(re.findall(r"[A-Za-z_]\w*", text))
        elif isinstance(n, cst.Name):
            out.add(n.value)
    return out or None


def _unrelated_classes(project: Project, names: set[str], owner: str) -> bool:
    """Do the names hold at least one project class and no class related to ``owner``, no structural type (a
    ``typing.Protocol``: any object with the field matches it) and no class the project does not define (``Any``,
    ``object``, a library class)?"""
    from streamlint.model.flow.guardedwork import _bases

    known = {n for n in names if n[:1].isupper() and _class(project, n)}
    if not known or any(related(project, n, owner) or "Protocol" in _bases(project, n) for n in known):
        return False
    unknown = {n for n in names if n[:1].isupper() and n not in known}
    return not (unknown - {"Optional", "Union", "List", "Dict", "Tuple", "Sequence", "Iterable", "None"})


def _constructs_unrelated(project: Project, values: list, owner: str) -> bool:
    """Is every value a construction of a project class unrelated to ``owner`` (``Worker(...)``)?"""
    if not values:
        return False
    names = set()
    for v in values:
        if not isinstance(v, cst.Call):
            return False
        d = dotted(v.func)
        if d is None:
            return False
        names.add(d.rsplit(".", 1)[-1])
    return _unrelated_classes(project, names, owner) and all(n[:1].isupper() for n in names)


def may_reach(project: Project, model: FileModel, fn: FunctionInfo, node: cst.CSTNode, name: str, owner: str) -> bool:
    """Can the ordered expression ``node`` (ending in ``.<name>`` or ``<name>``) in ``fn`` be the private stream of an
    object of class ``owner`` (module docstring)?"""
    while isinstance(node, cst.Subscript):
        node = node.value
    if isinstance(node, cst.Name):  # a parameter: a private stream is handed to no function; a local: its values
        return any(isinstance(v, (cst.Attribute, cst.Subscript)) and may_reach(project, model, fn, v, name, owner)
                   for v in fn.name_assigns.get(node.value, ()) if v is not node)
    if not isinstance(node, cst.Attribute):
        return True
    recv = node.value
    if isinstance(recv, cst.Name):
        if recv.value in ("self", "cls") and fn.class_name is not None and fn.params[:1] == (recv.value,):
            return related(project, fn.class_name, owner)
        from streamlint.model.devobjects import param_annotation

        if recv.value in fn.all_params:
            ann = param_annotation(fn, recv.value)
            names = _annotation_names(ann) if ann is not None else None
            if names is not None:
                return not _unrelated_classes(project, names, owner)
            return not _bound_unrelated(project, model, fn, recv.value, owner)
        return _by_values(project, model, list(fn.name_assigns.get(recv.value, ())), name, owner)
    if isinstance(recv, cst.Attribute) and isinstance(recv.value, cst.Name) and recv.value.value == "self" \
            and fn.class_name is not None:
        cls = model.classes.get(fn.class_name)
        if cls is not None:
            values = [a.value for m in cls.methods.values() for a in m.assigns if a.target == f"self.{recv.attr.value}"]
            return _by_values(project, model, values, name, owner)
    return _untyped_counts(project, model, name, owner)


def _by_values(project: Project, model: FileModel, values: list, name: str, owner: str) -> bool:
    """A receiver bound to ``values``: the owner's object when one constructs the owner (or a related class), not
    when every one constructs an unrelated project class, else as an untyped receiver."""
    if _constructs_unrelated(project, values, owner):
        return False
    if any(isinstance(v, cst.Call) and (d := dotted(v.func)) is not None
           and related(project, d.rsplit(".", 1)[-1], owner) for v in values):
        return True
    return _untyped_counts(project, model, name, owner)


def _untyped_counts(project: Project, model: FileModel, name: str, owner: str) -> bool:
    """Does an ordering through a receiver the analysis cannot type count as the owner's join? Yes (precision
    first): such a receiver is only searched where the name is rare enough (within the caller-file bound)."""
    return True


def owner_class(project: Project, owner: str) -> tuple[FileModel, ClassInfo] | None:
    """The one project class called ``owner`` (None when the name is ambiguous or unseen)."""
    found = _class(project, owner)
    return found[0] if len(found) == 1 else None


def unrelated_receiver(project: Project, model: FileModel, site, cls: str) -> bool:
    """Is the receiver of the method call ``site`` an object that cannot be of class ``cls``, a base or a subclass of
    it: a parameter annotated only with unrelated project classes, or one every call binds to ``self`` of such a class
    (:mod:`~streamlint.model.flow.receivers`); a local or a field of ``self`` every assignment of which constructs an
    unrelated project class? ``self`` and anything the analysis cannot type keep the call (False): a class calling a
    method it does not define may be a mixin of ``cls``."""
    from streamlint.model.devobjects import param_annotation

    recv, fn = site.receiver, site.function
    if fn is None or not isinstance(site.node.func, cst.Attribute):
        return False
    if isinstance(recv, cst.Name) and recv.value not in ("self", "cls"):
        if recv.value in fn.all_params and recv.value not in fn.name_assigns:
            ann = param_annotation(fn, recv.value)
            names = _annotation_names(ann) if ann is not None else None
            if names is not None:
                return _unrelated_classes(project, names, cls)
            return _bound_unrelated(project, model, fn, recv.value, cls)
        return recv.value not in fn.all_params \
            and _constructs_unrelated(project, list(fn.name_assigns.get(recv.value, ())), cls)
    if isinstance(recv, cst.Attribute) and isinstance(recv.value, cst.Name) and recv.value.value == "self" \
            and fn.class_name is not None and (klass := model.classes.get(fn.class_name)) is not None:
        values = [a.value for m in klass.methods.values() for a in m.assigns if a.target == f"self.{recv.attr.value}"]
        return _constructs_unrelated(project, values, cls)
    return False


def _bound_unrelated(project: Project, model: FileModel, fn: FunctionInfo, param: str, owner: str) -> bool:
    """Does every project call of the module function ``fn`` hand its unannotated parameter ``param`` ``self`` of a
    class unrelated to ``owner`` (:func:`~streamlint.model.flow.receivers._bound_elsewhere`)?"""
    from streamlint.model.flow.receivers import _bound_elsewhere

    return _bound_elsewhere(project, model, fn, param, owner, 0)
