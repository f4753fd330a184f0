"""The rule API: a rule is one module with a documented class, its metadata, its check and examples."""

from __future__ import annotations

import inspect
import sys
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Iterable

from streamlint._lazy import cst

from streamlint.finding import Confidence, Edit, Finding, Fix, FixSafety, Location, Severity, Span

if TYPE_CHECKING:
    from streamlint.model.apis import PatternMarker
    from streamlint.model.file import FileModel
    from streamlint.model.project import Project


@dataclass(frozen=True)
class Option:
    """A typed per-rule option, set under ``[tool.streamlint.rules.<CODE>]``."""

    name: str
    type: type
    default: Any
    description: str

    def validate(self, value: Any) -> Any:
        if self.type is bool:
            ok = isinstance(value, bool)
        elif self.type is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif self.type is list:
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        else:
            ok = isinstance(value, self.type)
        if not ok:
            raise ValueError(f"expected {self.type.__name__}, got {type(value).__name__} {value!r}")
        return value


@dataclass(frozen=True)
class Valid:
    """An example the rule must accept."""

    code: str


@dataclass(frozen=True)
class Invalid:
    """An example the rule must flag. ``line`` is 1-based within the dedented code; ``fixed`` is the
    expected source after applying the rule's fix (implies the rule is fixable)."""

    code: str
    line: int | None = None
    fixed: str | None = None


@dataclass
class RuleContext:
    """What a rule sees while checking one file: the model, its options, and a way to report."""

    rule: "Rule"
    file: "FileModel"
    project: "Project"
    options: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)

    def report(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        confidence: Confidence | None = None,
        severity: Severity | None = None,
        related: Iterable[Location] = (),
        fix: Fix | None = None,
        depends_on: Iterable[str] = (),
        hint: str = "",
        absorbs: Iterable[tuple[str, cst.CSTNode]] = (),
    ) -> None:
        rule = self.rule
        if rule.mode_tagged:  # the path tag spelled for the device of the code (`[xpu]` on Intel GPUs)
            from streamlint.model.devicenames import retag
            message = retag(self.project, self.file, node, message)
        related = tuple(related)
        deps = set(depends_on) | {loc.path for loc in related}
        deps.discard(self.file.path)
        self.findings.append(
            Finding(
                code=rule.code,
                name=rule.name,
                message=message,
                severity=severity or rule.severity,
                confidence=confidence or rule.confidence,
                path=self.file.path,
                span=self.file.span(node),
                related=related,
                fix=fix,
                hint=hint,
                depends_on=tuple(sorted(deps)),
                absorbs=tuple((code, self.file.span(other)) for code, other in absorbs),
            )
        )

    # ---- building fixes (edits are text replacements on the node's source range)
    def replace(self, node: cst.CSTNode, content: str) -> Edit:
        """An edit replacing ``node``'s source text with ``content`` (use "\\n" for newlines)."""
        return Edit(self.file.span(node), content)

    def remove_arg(self, call: cst.Call, arg: cst.Arg) -> Edit | None:
        """An edit deleting ``arg`` from ``call`` together with its separating comma, or None when that is
        not a plain textual removal (a comment inside the removed text, or ``arg`` not in the call)."""
        args = list(call.args)
        index = next((i for i, a in enumerate(args) if a is arg), None)
        if index is None:
            return None
        here = self.file.span(arg)
        if index > 0:
            before = self.file.span(args[index - 1])
            span = Span(before.end_line, before.end_col, here.end_line, here.end_col)
        elif len(args) > 1:
            after = self.file.span(args[1])
            span = Span(here.start_line, here.start_col, after.start_line, after.start_col)
        else:
            span = here
        removed = self.file.source.text[self.file.source.offset(span.start_line, span.start_col):
                                        self.file.source.offset(span.end_line, span.end_col)]
        if "#" in removed.replace(self.file.code(arg.value), ""):
            return None
        return Edit(span, "")

    def fix(self, title: str, *edits: Edit | None, safety: FixSafety | None = None) -> Fix | None:
        """A Fix of the rule's declared safety (None if any edit could not be built)."""
        if not edits or any(e is None for e in edits):
            return None
        return Fix(title, safety or self.rule.fix_safety or FixSafety.UNSAFE, tuple(e for e in edits if e))


FIRST_LINE = 120  # the longest first line of a message; the detail goes to related locations and `hint`


def first_line(*candidates: str) -> str:
    """The first candidate message that fits on a first line (the last one, shortened, if none does)."""
    for text in candidates:
        if len(text) <= FIRST_LINE:
            return text
    return candidates[-1][: FIRST_LINE - 1] + "…"


MODE_TAG_DOC = """## Execution path tag
The first line of a finding ends with the execution path the code was analysed for, in brackets,
because the right fix depends on it:
- `[ge]`: TorchAir graph mode (GE, `max-autotune`): `npu_stream_switch`, `npu_wait_tensor`;
- `[reduce-overhead]`: TorchAir aclgraph: `npu_stream_switch` with tagged events and
  `npu_record_tagged_stream`;
- `[npugraph_ex]`: `torch.compile(backend="npugraph_ex")`: native streams, events, `record_stream`;
- `[eager]`: torch_npu code that no compile reaches (or `force_eager`): native streams and events;
- `[cuda]`: `torch.cuda` streams (eager or captured);
- `[xpu]`: `torch.xpu` streams (Intel GPUs: the CUDA stream model under another module).

Paths joined by `/` (`[ge/reduce-overhead]`) mean the code runs on each of them. The path comes from
the compile sites that reach the function (a related location points at one); if it is wrong, set
`mode` or `per-path-mode` in the configuration."""


class Rule:
    """Base class. Subclasses set the metadata below, document themselves in the ruff template
    (What it does / Why is this bad? / Example / Use instead / Fix safety / Options) and implement
    :meth:`check`, which reads the semantic model and calls ``ctx.report``."""

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.WARNING
    confidence: ClassVar[Confidence] = Confidence.HIGH
    # Byte strings (or apis.PatternMarker) of which at least one must occur in a file for the rule to
    # possibly fire: the prefilter skips the parse of a file with no marker of any enabled rule.
    markers: ClassVar[tuple[bytes | PatternMarker, ...]] = ()
    options: ClassVar[tuple[Option, ...]] = ()
    fix_safety: ClassVar[FixSafety | None] = None
    # Findings end with the execution path tag (``[eager]``, ``[ge]``, …); documented by MODE_TAG_DOC.
    mode_tagged: ClassVar[bool] = False
    # Meta rules (SL000–SL003) are produced by the engine itself, not by a check.
    engine_emitted: ClassVar[bool] = False
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []

    def check(self, ctx: RuleContext) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    @classmethod
    def prepare(cls) -> None:
        """Import now what :meth:`check` needs. A rule module may import the model at its first check, from a
        module-level ``_import_model()`` (a run that analyses no file then never loads it); the parent of a
        forked pool prepares the enabled rules so that its workers inherit the modules."""
        loader = getattr(sys.modules.get(cls.__module__), "_import_model", None)
        if callable(loader):
            loader()

    @classmethod
    def documentation(cls) -> str:
        doc = textwrap.dedent(inspect.getdoc(cls) or "").strip()
        if cls.mode_tagged and doc:
            doc += "\n\n" + MODE_TAG_DOC
        return doc

    @classmethod
    def summary(cls) -> str:
        doc = cls.documentation()
        for block in doc.split("## "):
            if block.startswith("What it does"):
                body = block[len("What it does"):].strip()
                return " ".join(body.split("\n\n")[0].split())
        return doc.splitlines()[0] if doc else ""

    @classmethod
    def default_options(cls) -> dict[str, Any]:
        return {opt.name: opt.default for opt in cls.options}

    @classmethod
    def url(cls) -> str | None:
        """A documentation page for the rule: none (there is no documentation site; ``streamlint rule
        CODE`` prints the documentation)."""
        return None
