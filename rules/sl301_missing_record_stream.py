from __future__ import annotations

import os

from streamlint._lazy import cst

from streamlint.finding import Confidence, Edit, FixSafety, Location, Severity, Span
from streamlint.model.apis import STREAM_MARKERS
from streamlint.rule import Invalid, Option, Rule, RuleContext, Valid, first_line


_FREE_LABEL = {"unset": "attribute rebinding", "unset-shared": "attribute rebinding"}  # (storage.unset_place)


def _import_model() -> None:
    """The model modules this rule uses, imported at its first check (a run that analyses no file
    never loads them)."""
    global class_step_joined, file_flows, path_tag, unrecorded_siblings, unrecorded_data_swaps, unrecorded_stored_siblings, broken_records, device_module, \
        function_at, MAIN, entry_stream_name, stream_expr, stream_label, lifetime_reported_at, taken_over, function_flow, \
        noop_taken, handed_callable, chosen_by_caller, chosen_upstream, orders_chosen, unread_choice
    from streamlint.model.flow.handedcallables import handed_callable
    from streamlint.model.flow.chosenstreams import chosen_by_caller, orders_chosen
    from streamlint.model.flow.callerstreams import chosen_upstream, unread_choice
    from streamlint.model.dataflow import file_flows, function_flow, lifetime_reported_at, path_tag
    from streamlint.model.flow.callerwaits import class_step_joined
    from streamlint.model.flow.callerfrees import noop_taken, taken_over
    from streamlint.model.handoffs import unrecorded_siblings, unrecorded_stored_siblings
    from streamlint.model.recorders import broken_records
    from streamlint.model.dataswaps import unrecorded_data_swaps
    from streamlint.model.devicenames import device_module, function_at
    from streamlint.model.streams import MAIN, entry_stream_name, stream_expr, stream_label


def _chosen_other(fn, issue) -> str | None:
    """The parameter the caller chooses the issue's other stream with, when one of its two streams (allocating,
    using) is the entry stream and the other is reached from a parameter (``stream``, ``args.stream``), else None."""
    if MAIN not in (issue.alloc, issue.use_stream) or issue.alloc == issue.use_stream:
        return None
    chosen = chosen_by_caller(fn, issue.use_stream if issue.alloc == MAIN else issue.alloc)
    return None if chosen is None or orders_chosen(fn, chosen) else chosen  # (a fork of it: a side stream here)


class MissingRecordStream(Rule):
    """## What it does
    Flags a tensor allocated on one stream (the stream current where it was created) and used on
    another, whose last reference can die (`del`, rebinding, `untyped_storage().resize_(0)`, the end of
    the function) before the allocating stream waits on the using stream after that use, with no
    `x.record_stream(stream)` (`npu_record_tagged_stream(x, tag)` in reduce-overhead). Reported at the
    first unprotected use on the other stream.

    ## Why is this bad?
    The caching allocator only knows the allocation stream. When the tensor is freed, its block can be
    handed out again for work queued on the allocating stream while the other stream is still reading
    or writing it. A wait by the *consumer* orders the data but does not protect the memory; only a
    join of the allocating stream before the free, or `record_stream`, does.

    A freed block returns to the pool of the stream that allocated it, and only that stream's next
    allocation can hand it out again: a join of the allocating stream on the using stream after the free
    but before that stream allocates anything covers the free.

    An event recorded on the using stream after the use and handed out (returned, or given to a receiver call
    together with the tensors it guards: `self.attn(q, k, v, rel_bias=bias, rel_bias_event=ev)`) carries the
    join: its waiter joins before its own work, and the death at the return is reported only with `strict`; not when
    the receiver is a project function whose code only keeps the event (`self.inflight[key] = (host, ready)` for a
    writer thread) and waits on it nowhere: the free at the return is then reported, medium. So
    is the death of tensors handed to a call outside the project inside another package's record object
    (`connector.start_load(LoadRequest(slot_mapping=slots))`): the library may keep the record.

    A side stream whose every entry begins with a wait on the current stream (`side.wait_stream(main)`
    before each `with torch.npu.stream(side):`, or an event wait as the scope's first statement) cannot
    take a block back before the current stream's earlier reads: a side-stream tensor read on the current
    stream after the join is then not reported.

    Code that implements the `record_stream` protocol for a caller (an object's `record_stream(self,
    stream)`, a helper that only records tensors on a stream it is given) must record on that stream:
    a record on the current stream instead, a loop over the held tensors that records none of them, a
    `record_stream` method that never uses its stream, an empty override of a base class's records, or a
    function named for recording (`record_stream(tensor, stream)`, a record op's kernel) that records
    nothing, or a branch of an object's `record_stream` that establishes a held value is a device tensor
    (`if isinstance(value, torch.Tensor):`) and records nothing while sibling branches still record, is
    reported where it happens (medium confidence: the caller's use of the stream is not seen).

    A free left unjoined only where a flag the caller passes turns the function's join off (`if sync:
    current.wait_stream(load_stream)`, `if not sync: return` before it) is reported at medium confidence: the
    caller passing the flag clear takes the join on itself, later, where this function cannot see it. A local
    that shares a rebound attribute's storage (`orig = p.grad.data`) keeps it alive: the free is judged when
    that local dies, against its own records (`orig.record_stream(side)`). A value the analysis takes for a
    device tensor only because a call was handed a `self.*` place of unknown type (`batch = attach(batch,
    self.loader.graph)`: perhaps a sampler's host batch) is reported at low confidence when it is freed.

    A free at the return of a block allocated on a stream the function makes for itself (`staging =
    torch.cuda.Stream()`, used only in its scopes, waits and synchronizes: never stored, returned or handed to a call)
    is reported at low confidence: nothing of the code allocates on that stream after the return, only torch's stream
    pool handing the same stream to a later `Stream()` could take the block back.

    A record on the stream the tensor's memory already belongs to (the stream it was allocated on; for a
    tensor handed in, the caller's current stream) is a no-op: when the tensor is also used on another
    stream that is neither recorded nor joined back before the function returns, the record is reported
    (medium confidence), even for a tensor the caller owns and even when an event is handed out: the record
    says the author relies on it. Not when the function hands the tensor (or, for a parameter, its use) back in a
    work record whose method joins the using stream (`return GatherWork(out=out, stream=side)`, `GatherWork.wait()`
    making the current stream wait for `side`; or a tuple `return work, buf, side` every seen caller re-wraps so)
    and no seen caller drops the record: the record holds the memory until the join, no record is needed at all. With
    no caller seen, low.

    A helper runs on whatever stream its caller has current. When a caller runs it inside a stream scope on
    a side stream (`with torch.cuda.stream(s):`, a project context manager that switches streams, through
    forwarding helpers) and hands it one of its own parameters that it neither keeps (on `self`), nor
    records, nor joins after the scope, the helper's use of that tensor is a use on the side stream: with no
    record in the helper, it is reported there (medium confidence).

    A function that reads a tensor parameter in work it queues on a side stream and returns while that work
    may still run (no join, no host synchronisation, no `record_stream` on that stream) leaves the argument's
    memory to its callers: when a caller in the project drops it right after the call (`p.grad = None` after
    `acc.add(p.grad)`, a temporary argument `push(g * scale)`, a local deleted or dying at the caller's return)
    before joining, the use is reported in the function (medium confidence, the caller's drop as related
    location); so is a death a caller's own analysis sees right after its call (a temporary, a local at its return,
    a `del`), which would otherwise be reported at that call: the missing record is the function's, reported at the
    confidence the caller's finding had (high when it saw the death and no join on every path). Silent when
    every caller keeps the tensor (a field of its object, a view of a persistent buffer,
    its own parameter that it returns), joins or records after the call, or when no caller is seen; when the
    function stores the tensor itself or hands it to a torch.distributed collective; when the argument is a
    host tensor; when a caller's local is dropped with nothing allocated after it before the caller joins or
    returns (as for the function-local case). A function that returns an event recorded after the use escapes
    like a returned tensor: reported only with `strict`, low.
    Every caller whose own analysis sees the death at its call is a related location of that one finding, matched
    by what the call binds to the parameter; a record of the parameter on the stream its memory belongs to (a
    no-op) is then the one finding, at the confidence of the surest caller's.

    A method that reads what a field of its object holds (`self._plan`, an element `self._staged[rid]`, through
    a local alias too) in work it queues on a side stream, and returns with that work pending and unrecorded
    there, is reported at that use (medium confidence, the drop as related location) when another method of
    the class drops the field's value with no join first (`self._plan = blocks` in `plan()`, `= None`, `del`,
    `.pop(rid)`). Silent when every drop follows a wait or a synchronisation; when a value bound to the field
    is long-lived storage or a view of it, host memory, made inside a stream scope or kept elsewhere too; when
    a setter's argument is, at some seen caller, a field or a parameter of that caller (or no caller is seen);
    when the reading method binds the field itself or keeps what it reads.

    A tensor an object keeps in a field (`self.blocks[req] = t`, `self.ready.append((t, ev))`, `self.next_w =
    t`, or the result of a method its class's callers keep so) lives until another method drops it (`del`,
    `pop`, `clear`, `= None`). When some method drops it without joining first (no wait or synchronisation
    before the drop), its use on another stream must be recorded: a use in the storing function, or a read
    by another method of the class on a stream it is not recorded on (the stream scope around the read, or
    the current stream), is reported (medium confidence) at the use, at the store when the readers are in
    other methods, or at a record on the allocating stream. A field never dropped, or dropped only after a
    join, is not. A record helper given several streams (`*streams`) records on each; one that records two or
    more fields of a holder (a dataclass of this file) and leaves out another that every construction of
    the holder fills with device memory is reported at its records.

    A tensor allocated on a side stream and handed over (returned or yielded to the caller, kept in a field of
    the object that another method drops or takes out with `pop`, bound as a parameter's `.data`) after the
    function joined that stream into the current one (`current.wait_stream(side)`, `current.wait_event(ev)` of
    an event recorded on it here), with no `record_stream` on the current stream: the join is the author's
    statement that the current stream consumes it, but it only orders the read; once the consumer drops the
    tensor, the block returns to the side stream's pool and its next allocation (the next prefetch) can
    overwrite it while the current stream still reads it. Reported at the hand-over (medium confidence: the
    consumer's use is inferred from the join; high when the function itself uses it on the current stream,
    shown as a related location). Not when the side stream is forked from the current stream in that function
    or at every entry (entry discipline), when it reads the current stream's work there unforked (the SL201 fork
    wait is the one remedy), when a caller of the function records tensors, nor for a field that is never dropped
    (a persistent buffer or workspace).

    A pipeline stage that hands objects from a producer stream to a consumer (it waits on the producer,
    then records what it hands on: `kjt.record_stream(cur)`, `ctx.record_stream(cur)`) must record each
    of them on every stream it records their siblings on: an object given to the same consumer call as a
    recorded sibling but not recorded on that stream is reported at the call (medium confidence: its
    device contents are presumed from a record on another stream, its making inside the producer's
    stream scope, or the declared type of the field it is taken from).

    The producer side of such a hand-off between methods of one object: a method that stores tensors
    together in one of the object's fields for a sibling method (`self.prefetched.append((locs, rows))`,
    `self.ready[layer + 1] = (k, v)`) and records some of them on a stream it does nothing else with (only
    `record_stream` and tests like `if forward_stream is not None:`: the stream the field's reader runs on)
    must record each stored element that is evidently device memory (placed with `device=` / `.cuda()` /
    `.to(dev)`, or recorded on some stream) there too. The store is reported (medium confidence: the
    reader's stream is inferred from the records). Not when the element is given to a call together with
    that stream (a record helper), when the record is on the current stream, nor when a function taking
    the values out of the field records them itself.

    A layer offloader that binds a parameter's or buffer's `.data` to a device copy made on a side stream
    (`with torch.cuda.stream(up): p.data = p.data_cpu.to(dev, non_blocking=True)`) makes a storage the
    parameter does not keep: when another function of the package swaps `.data` back (`p.data = p.data_cpu`), the
    block returns to the side stream's pool. A binding recorded on no stream other than the side stream, in a
    function that records its siblings on another stream (the one that runs the layer), is reported at the binding,
    or at its record on the side stream (a no-op) (medium confidence).

    ## Example
    ```python
    probs = torch.softmax(logits, dim=-1)
    self.side.wait_stream(main)
    with torch.npu.stream(self.side):
        tokens = torch.multinomial(probs, 1)
    del probs
    scores = torch.log_softmax(logits, dim=-1)  # main may hand probs' block out while side still samples from it
    main.wait_stream(self.side)
    ```

    ## Use instead
    ```python
    probs = torch.softmax(logits, dim=-1)
    self.side.wait_stream(main)
    with torch.npu.stream(self.side):
        tokens = torch.multinomial(probs, 1)
        probs.record_stream(self.side)
    del probs
    scores = torch.log_softmax(logits, dim=-1)
    main.wait_stream(self.side)
    ```

    ## Fix safety
    Inserting `x.record_stream(stream)` after the use is unsafe: it delays memory reuse (more peak
    memory) and the right place may be elsewhere (before a `del`, in a helper).

    ## Options
    - `strict` (bool, default false): also report tensors whose ownership escapes (returned, stored on
      `self`, appended to a container) with no join that names their consumer, at low confidence; tensors kept in fields another method of the
      object drops without a join, and tensor parameters callers run on a side stream and drop (these
      presume what the object's other methods or the callers do).
    """

    code = "SL301"
    name = "missing-record-stream"
    severity = Severity.ERROR
    confidence = Confidence.HIGH
    mode_tagged = True
    markers = STREAM_MARKERS
    fix_safety = FixSafety.UNSAFE
    options = (Option("strict", bool, False, "Also report tensors that escape the function (low confidence)."),)

    def check(self, ctx: RuleContext) -> None:
        _import_model()
        strict = bool(ctx.options.get("strict", False))
        seen: set[int] = set()
        for fn, flow in file_flows(ctx.project, ctx.file):
            main = entry_stream_name(ctx.project, ctx.file, fn)
            for issue in flow.lifetimes:
                if issue.mode == "ge" or id(issue.node) in seen or (issue.escaped and not strict):
                    continue
                seen.add(id(issue.node))
                use, alloc = stream_label(issue.use_stream, main), stream_label(issue.alloc, main)
                if issue.kind == "noop-record":
                    taken = noop_taken(ctx.project, ctx.file, fn, issue)
                    if taken is None and issue.kept_by_record == "kept":
                        continue  # a work record handed back holds it until its join (flow/recordkeeps.py)
                    self._noop_record(ctx, issue, main, use, alloc, taken)
                    continue
                if issue.kind == "handoff":  # (flow/consumers.py)
                    self._handoff(ctx, issue, main, use, alloc)
                    continue
                if issue.kind == "held":
                    if strict:  # readers in other methods and a drop elsewhere: on torch-npu 2.14.0 / torchft 0.2.0
                        self._held(ctx, issue, main, use, alloc)  # not judged yet (off unless strict)
                    continue
                if issue.free == "release" and not strict:  # the object's other methods are presumed (vLLM 0.33.0
                    continue  # gpu_model_runner: the drop follows a host sync of an event field): strict only
                if issue.kind == "caller-free":  # (flow/argdrops.py)
                    self._caller_free(ctx, issue, main, use, alloc)
                    continue
                if issue.kind == "field-drop":  # (flow/fielddrops.py)
                    self._field_drop(ctx, issue, main, use, alloc)
                    continue
                if taken_over(ctx.project, ctx.file, fn, issue):
                    continue  # the function called here reports it, at its own unrecorded use (flow/callerfrees.py)
                if issue.kind == "caller-drop":
                    if strict:  # it rests on what callers do with their tensors: on real code mostly they join
                        self._caller_side(ctx, issue)  # inside a parallel-executor helper (off unless strict)
                    continue
                freed = {"function end": "dies at return", "del": "is deleted",
                         "rebinding": "loses its last name", "resize_(0)": "is resized to 0",
                         "call end": "dies when the call it is passed to returns",
                         "release": "is kept on the object, which drops it unjoined",
                         "unset": "loses its last owner (the attribute is rebound)",
                         "unset-shared": "loses the owner seen (the attribute is rebound)"}[issue.free]
                message = f"`{issue.name}` {freed} before {alloc} waits on its use here on {use} [{issue.mode}]"
                if len(message) > 120:
                    message = (f"`{issue.name}` {freed} before its allocating stream waits on its use here "
                               f"[{issue.mode}]")
                confidence = None
                span = ctx.file.span(issue.node)
                hint = self._hint(ctx, issue, main, span.end_line, flow)
                if issue.free == "release":
                    confidence = Confidence.MEDIUM  # (what the object's other methods do is presumed)
                    line = ctx.file.span(issue.free_node).start_line
                    hint += f"; the object drops it at line {line} without a join"
                if issue.free == "unset-shared":
                    confidence = Confidence.MEDIUM  # (the function keeps it in a local / returns it too)
                    hint += "; this assumes no other owner outlives the rebinding"
                if issue.flag and confidence is None:
                    confidence = Confidence.LOW if issue.flag_tests else Confidence.MEDIUM  # (flow/flagjoins.py)
                    hint += (f"; this assumes a caller passes `{issue.flag}` so that the join is skipped and joins "
                             "too late itself" + (" (only the project's tests do)" if issue.flag_tests else ""))
                if issue.kept_event and confidence is None:
                    confidence = Confidence.MEDIUM  # (the receiver's code is read, its later use of the event not)
                    hint += (f"; `{issue.kept_event}` is handed on with the results, but the receiver only keeps it: "
                             "nothing waits on it on the current stream before the free")
                if issue.coarse and confidence is None:
                    confidence = Confidence.MEDIUM  # (flow/coarse.py: one outcome of its ordering-free branches)
                    hint += "; found on the function's coarse run (too many paths): some branches took one outcome"
                if issue.assumed and confidence is None:
                    confidence = Confidence.MEDIUM  # (flow/recordresults.py)
                    hint += ("; this assumes the call runs the only project method of its name, which hands back "
                             "this record")
                if confidence is None and (callee := handed_callable(fn, issue.node, issue.name)) is not None:
                    confidence = Confidence.LOW  # (flow/handedcallables.py; no such finding was a bug on real code)
                    hint += (f"; its use on {use} is a call of `{callee}`, code the caller hands in: this assumes that "
                             "code reads it there and keeps no reference of its own until that work ends")
                if issue.guess and issue.guess.endswith("()"):
                    confidence = Confidence.LOW  # (flow/hosthelpers.py: a helper's guessed result)
                    hint += (f"; this assumes the value is a device tensor, which rests only on what `{issue.guess}` "
                             "hands back: its code makes no tensor, it passes on what code not seen here gives")
                elif issue.guess:
                    confidence = Confidence.LOW  # (flow/guessedresults.py)
                    hint += (f"; this assumes the value is a device tensor, which rests only on `{issue.guess}` (of "
                             "unknown type) being one")
                if issue.foreign_use and confidence is None:
                    confidence = Confidence.LOW  # (flow/foreignuses.py)
                    hint += (f"; its use here is only `{issue.name}.{issue.foreign_use}()`, a method no torch tensor has "
                             "(a library's own): this assumes it queues work reading the tensor on that stream")
                if issue.escaped:
                    confidence = Confidence.LOW
                    hint += "; this assumes the caller drops the escaped tensor"
                if issue.pooled:
                    confidence = Confidence.LOW  # (flow/localstreams.py)
                    hint += (f"; {alloc} is made here and dies with the call: this assumes a later `Stream()` is handed "
                             "the same pool stream and allocates the block before that use ends")
                chosen = _chosen_other(fn, issue)
                if chosen is not None and confidence is not Confidence.LOW \
                        and chosen_upstream(ctx.project, ctx.file, fn, chosen, issue.mode):
                    confidence = Confidence.LOW  # (flow/chosenstreams.py, as SL201 judges the same pair of streams)
                    hint += (f"; the other stream comes from `{chosen}`, which the caller chooses, and no call in the "
                             "project chooses it: this assumes a caller passes a stream other than its current one")
                elif chosen is not None and confidence is not Confidence.LOW \
                        and unread_choice(ctx.project, ctx.file, fn, chosen, issue.mode, issue.use_stream
                                          if issue.alloc == MAIN else issue.alloc) is not None:
                    confidence = Confidence.LOW  # (flow/callerstreams.py: no call read passes another stream)
                    hint += (f"; the other stream comes from `{chosen}`, which the caller chooses, and no call of "
                             f"`{fn.node.name.value}` the analysis reads passes a stream other than its current one: "
                             "this assumes a caller not read does")
                related = []
                ambient = _ambient_race(issue, flow)
                if ambient is not None:  # SL201 on the same access is low for it (flow/ambient.py): so is this
                    confidence = Confidence.LOW
                    hint += ("; the two streams may be one: a call in the project runs this code with that stream "
                             "current, and its other calls are not all seen to run elsewhere" if len(ambient) == 2 else
                             f"; the two streams may be one: every call in the project runs this code inside its "
                             f"caller's scope on `{ambient[2]}`, which may be that very stream")
                    related.append(Location(ambient[0].path, ambient[0].span(ambient[1]), "called here with that "
                                            "stream current" if len(ambient) == 2 else
                                            f"called here inside a scope on `{ambient[2]}`"))
                if issue.free_node is not None:
                    related.append(Location(ctx.file.path, ctx.file.span(issue.free_node),
                                            f"freed here ({_FREE_LABEL.get(issue.free, issue.free)})"))
                fix = None
                if issue.mode != "reduce-overhead":
                    joins = _joins(ctx, issue, flow, span.end_line)
                    alloc_obj = stream_expr(issue.alloc, main, _dev(ctx, issue))
                    use_obj = stream_expr(issue.use_stream, main, _dev(ctx, issue))
                    join = (f"`{alloc_obj}.wait_stream({use_obj})`" if alloc_obj and use_obj else "a join") \
                        + f" before line {joins}, which also clears the SL201 there" if joins else ""
                    forks = _forks(issue, flow, ctx, span.end_line) if issue.use_stream == MAIN else ""
                    if forks and not join and alloc_obj and use_obj:
                        join = (f"`{alloc_obj}.wait_stream({use_obj})` at every entry onto {alloc}, the wait SL201 "
                                f"asks for at line {forks}, which clears both")
                    fix = self._fix(ctx, issue.node, issue.name, issue.use_stream, issue.mode, main, join)
                ctx.report(issue.node, message, confidence=confidence, related=related, fix=fix, hint=hint)
        for broken in broken_records(ctx.project, ctx.file):
            first, hint = self._forwarder_message(broken)
            tag = path_tag(ctx.project, ctx.file, broken.function) if broken.function is not None else "eager"
            ctx.report(broken.node, f"{first} [{tag}]", confidence=Confidence.MEDIUM, hint=hint)
        for miss in unrecorded_siblings(ctx.project, ctx.file):
            tag = path_tag(ctx.project, ctx.file, miss.function)
            first = first_line(f"`{miss.obj}` is handed on with `{miss.sibling}`, recorded on `{miss.stream}`, but is "
                               f"not recorded there [{tag}]",
                               f"`{miss.obj}` is handed on with an object recorded on a stream it is not [{tag}]")
            hint = (f"add `{miss.obj}.record_stream({miss.stream})` like `{miss.sibling}`: both come from the stream "
                    f"this function waits for, and `{miss.obj}`'s memory can otherwise be reused by that stream while "
                    f"`{miss.stream}` still uses it (its device contents are presumed from `{miss.sibling}`)")
            ctx.report(miss.node, first, confidence=Confidence.MEDIUM, hint=hint)
        for miss in unrecorded_stored_siblings(ctx.project, ctx.file):
            tag = path_tag(ctx.project, ctx.file, miss.function)
            elsewhere = " (only on another stream)" if miss.recorded_elsewhere else ""
            first = first_line(f"`{miss.obj}` is stored with `{miss.sibling}`, recorded on `{miss.stream}` for the "
                               f"field's reader, but is not recorded there{elsewhere} [{tag}]",
                               f"`{miss.obj}` is stored with a tensor recorded on `{miss.stream}` but is not recorded "
                               f"there [{tag}]",
                               f"`{miss.obj}` is stored with a tensor recorded on a stream it is not [{tag}]")
            hint = (f"add `{miss.obj}.record_stream({miss.stream})` like `{miss.sibling}`: this function uses "
                    f"`{miss.stream}` only to record what it stores, so the method taking them out of the field "
                    f"runs there, and `{miss.obj}`'s memory can otherwise go back to this stream's pool while "
                    f"`{miss.stream}` still uses it")
            ctx.report(miss.node, first, confidence=Confidence.MEDIUM, hint=hint)
        for swap in unrecorded_data_swaps(ctx.project, ctx.file):  # (model/dataswaps.py)
            fn = function_at(ctx.file, swap.node)
            tag = path_tag(ctx.project, ctx.file, fn) if fn is not None else "eager"
            back = swap.swap_file.span(swap.swap_node).start_line
            where = "" if swap.swap_file is ctx.file else f" of {os.path.basename(swap.swap_file.path)}"
            if swap.noop:
                first = first_line(f"`{swap.name}` is recorded only on `{swap.alloc}`, the stream it is allocated on, "
                                   f"not on `{swap.other}` [{tag}]",
                                   f"`{swap.name}` is recorded only on the stream it is allocated on [{tag}]")
            else:
                first = first_line(f"`{swap.name}` is allocated on `{swap.alloc}` and recorded on no other stream, "
                                   f"unlike its siblings recorded on `{swap.other}` [{tag}]",
                                   f"`{swap.name}` is allocated on a side stream and recorded on no other stream [{tag}]")
            hint = (f"add `{swap.name}.record_stream({swap.other})`: the parameter is long-lived but this storage is "
                    f"not; the `.data` rebinding at line {back}{where} drops it, and its block can go back to "
                    f"`{swap.alloc}`'s next allocation while `{swap.other}` still reads it (the reader's stream is "
                    "inferred from the records of its siblings)")
            related = [Location(swap.swap_file.path, swap.swap_file.span(swap.swap_node), "the storage is dropped here")]
            ctx.report(swap.node, first, confidence=Confidence.MEDIUM, related=related, hint=hint)

    @staticmethod
    def _noop_record(ctx: RuleContext, issue, main: str | None, use: str, alloc: str, taken=None) -> None:
        """A record on the stream the tensor's memory belongs to, while it is used on another one. ``taken``: the
        callers' deaths of the argument at their calls this finding takes over (flow/callerfrees.py), shown as
        related locations, as sure as the surest of them (medium at least, as without them)."""
        line = ctx.file.span(issue.free_node).start_line
        first = first_line(f"`{issue.name}` is recorded on {alloc}, the stream its memory belongs to, but is used on "
                           f"{use} (line {line}) [{issue.mode}]",
                           f"this record is on the stream the tensor's memory belongs to, not the one using it "
                           f"(line {line}) [{issue.mode}]")
        target = _record_on_user(ctx, issue, main, use)
        hint = (f"recording on {alloc} is a no-op for the allocator: use {target}, or the memory can be handed to new "
                f"work on {alloc} while {use} still uses it")
        related = [Location(ctx.file.path, ctx.file.span(issue.free_node), "used here")]
        if issue.entry is not None:  # the allocating stream is the callers' (flow/entryctx.py)
            model, call = issue.entry[:2]
            related.append(Location(model.path, model.span(call), "called here (every call site of the project hands it so)"))
            hint += "; this assumes the callers shown (every call site in the project hands it so)"
        confidence = Confidence.LOW if issue.kept_by_record == "unseen" and taken is None else Confidence.MEDIUM
        if taken is not None:  # the callers' own findings at their calls yield to this one: one defect, one finding
            # (never below medium: the record on the wrong stream is a defect of its own, whatever the callers)
            confidence = max(Confidence.MEDIUM, _taken_sites(ctx, taken[6], related, shown=0),
                             key=(Confidence.LOW, Confidence.MEDIUM, Confidence.HIGH).index)
            hint += "; a caller drops the tensor right after the call"
        ctx.report(issue.node, first, confidence=confidence, related=related, hint=hint)

    @staticmethod
    def _handoff(ctx: RuleContext, issue, main: str | None, use: str, alloc: str) -> None:
        """A side-stream allocation handed over (returned, kept in a field another method drops, bound as a
        parameter's data) after the function joined its stream into the current one, never recorded there
        (flow/consumers.py). Reported at the hand-over, where the record belongs: high confidence with the function's
        own use on the current stream as a related location (the consumer is seen), else medium (the consumer is
        inferred from the join)."""
        where = {"<return>": "handed to the caller", "<data>": "bound as a parameter's data"}.get(
            issue.free, f"kept in `{issue.free}`")
        seen = issue.free_node is not None
        if seen:
            line = ctx.file.span(issue.free_node).start_line
            first = first_line(f"`{issue.name}` is allocated on {alloc}, used on {use} (line {line}) and {where} "
                               f"without a record on {use} [{issue.mode}]",
                               f"`{issue.name}` is allocated on a side stream, used on {use} (line {line}) and handed "
                               f"over unrecorded [{issue.mode}]")
        else:
            first = first_line(f"`{issue.name}` is allocated on {alloc} and {where} for {use}, which waits on it, "
                               f"but it is not recorded on {use} [{issue.mode}]",
                               f"`{issue.name}` is allocated on a side stream and handed to {use} unrecorded "
                               f"[{issue.mode}]")
        target = _record_on_user(ctx, issue, main, use)
        hint = (f"add {target} before handing it over: the wait orders the read after the copy but does not "
                f"protect the memory; once the consumer drops it, the block returns to {alloc}'s pool and its next "
                f"allocation can overwrite it while {use} still reads it (or begin every entry onto {alloc} with a "
                f"wait on {use})")
        if not seen:
            hint += f"; this assumes the consumer is {use}, as the wait says"
        related = [Location(ctx.file.path, ctx.file.span(issue.free_node), f"used here on {use}")] if seen else []
        ctx.report(issue.node, first, confidence=Confidence.HIGH if seen else Confidence.MEDIUM, related=related,
                   hint=hint)

    @staticmethod
    def _held(ctx: RuleContext, issue, main: str | None, use: str, alloc: str) -> None:
        """A tensor kept in a field of the object, used by another method on another stream, dropped by a
        method without a join, and not recorded on the user's stream (reported at the store)."""
        line = ctx.file.span(issue.free_node).start_line
        first = first_line(f"`{issue.name}` is kept on the object and used on {use}, but is dropped at line {line} "
                           f"without a join of {alloc} and not recorded on {use} [{issue.mode}]",
                           f"`{issue.name}` is kept on the object, used on another stream and dropped unjoined at line "
                           f"{line} [{issue.mode}]")
        target = _record_on_user(ctx, issue, main, use)
        hint = (f"add {target} before storing it, or join {alloc} on {use} before dropping it: otherwise its memory "
                f"can be handed to new work on {alloc} while {use} still uses it")
        ctx.report(issue.node, first, confidence=Confidence.LOW,
                   related=[Location(ctx.file.path, ctx.file.span(issue.free_node), "dropped here")], hint=hint)

    @staticmethod
    def _caller_free(ctx: RuleContext, issue, main: str | None, use: str, alloc: str) -> None:
        """A tensor parameter still read by work this function left pending on a side stream at its return,
        never recorded there, which a caller drops right after the call (flow/argdrops.py)."""
        model, drop, call, caller = issue.entry[:4]
        if not issue.free.startswith("caller ") and lifetime_reported_at(ctx.project, model, caller, call):
            return  # the caller's own analysis follows the call and reports its tensor's death there
        how = {"call end": "a temporary argument, dropped when the call returns",
               "caller call end": "a temporary argument, dropped when the call returns",
               "caller function end": "dropped when the caller returns", "caller del": "deleted by the caller",
               "caller rebinding": "rebound by the caller after the call",
               "unset": "dropped by the caller right after the call", "del": "deleted by the caller after the call",
               "rebinding": "rebound by the caller after the call",
               "function end": "dropped when the caller returns"}.get(issue.free, "dropped by the caller")
        where = "" if model is ctx.file else f" in {os.path.basename(str(model.path))}"
        line = model.span(drop).start_line
        first = first_line(f"`{issue.name}` is still read on {use} when this returns, unrecorded, and a caller drops "
                           f"it (line {line}{where}) [{issue.mode}]",
                           f"`{issue.name}` is read on {use} past the return, unrecorded; a caller drops it "
                           f"[{issue.mode}]",
                           f"a parameter is read on a side stream past the return and a caller drops it [{issue.mode}]")
        target = _record_on_user(ctx, issue, main, use)
        hint = (f"add {target} after this use (or join {use} before returning): `{issue.name}` is the caller's "
                f"tensor, its memory belongs to {alloc}; once the caller drops it the block can be handed to new work "
                f"there while {use} still reads it; this assumes the caller shown")
        related = [Location(model.path, model.span(drop), f"{how}")]
        # (a function that hands out an event recorded after the use escapes like a returned tensor: strict, low)
        confidence = Confidence.LOW if issue.escaped else Confidence.MEDIUM
        if len(issue.entry) > 5 and not issue.escaped:  # deaths the callers' own analyses saw at their calls
            confidence = _taken_sites(ctx, issue.entry[5], related)  # (flow/callerfrees.py): as sure, every caller
        ctx.report(issue.node, first, confidence=confidence, related=related, hint=hint)

    @staticmethod
    def _field_drop(ctx: RuleContext, issue, main: str | None, use: str, alloc: str) -> None:
        """A field's tensor read on a side stream, pending at the return, unrecorded there, which another method
        of the object drops with no join first (flow/fielddrops.py)."""
        line = ctx.file.span(issue.free_node).start_line
        first = first_line(f"`{issue.name}` is still read on {use} when this returns, unrecorded, and the object "
                           f"drops it unjoined (line {line}) [{issue.mode}]",
                           f"`{issue.name}` is read on {use} past the return, unrecorded; the object drops it "
                           f"unjoined [{issue.mode}]",
                           f"a field is read on a side stream past the return and dropped unjoined [{issue.mode}]")
        target = _record_on_user(ctx, issue, main, use)
        hint = (f"add {target} after this use (or join {use} before `{issue.name}` is rebound): its memory belongs "
                f"to {alloc}; once the field is rebound the block can be handed to new work there while {use} "
                "still reads it; this assumes the drop may follow this call before the side stream is done")
        related = [Location(ctx.file.path, ctx.file.span(issue.free_node), "the field is dropped here, unjoined")]
        confidence = Confidence.MEDIUM
        fn = function_at(ctx.file, issue.node)
        step = class_step_joined(ctx.project, ctx.file, fn, issue.use_stream) if fn is not None else None
        if step is not None:  # (flow/callerwaits.py: the class's users join that stream before its mark step)
            confidence = Confidence.LOW
            hint += (f"; every caller of `{step}()` joins {use} before it calls it: this assumes the drop can come "
                     "before that join")
        ctx.report(issue.node, first, confidence=confidence, related=related, hint=hint)

    @staticmethod
    def _caller_side(ctx: RuleContext, issue) -> None:
        """A tensor handed in, used on the side stream every caller runs this function on, never recorded."""
        named = not issue.use_stream.startswith("<")
        where = f"`{issue.use_stream}`, the side stream callers run this on," if named else \
            "the side stream callers run this on"
        first = first_line(f"`{issue.name}` is used here on {where} and is not recorded there [{issue.mode}]",
                           f"`{issue.name}` is used on the callers' side stream and not recorded there [{issue.mode}]")
        record = f"`{issue.name}.record_stream({issue.use_stream})`" if named else \
            f"`{issue.name}.record_stream({_dev(ctx, issue)}.current_stream())` (the callers' side stream here)"
        hint = (f"`{issue.name}` is the caller's tensor, allocated on its own stream; some caller drops it without "
                f"a join of that stream: add {record} after this use, or its memory can be reused while the side "
                "stream still reads it")
        ctx.report(issue.node, first, confidence=Confidence.LOW, hint=hint)

    @staticmethod
    def _forwarder_message(broken) -> tuple[str, str]:
        """(first line, hint) for a record_stream forwarder that does not record on the stream it is given."""
        given = f"`{broken.stream}`"
        if broken.kind == "wrong-stream":
            first = first_line(f"`{broken.detail}` is recorded on the current stream, not on the given {given}",
                               "a tensor is recorded on the current stream, not on the stream this function is given")
            return first, (f"record `{broken.detail}` on {given}, the stream this function is asked to record on: "
                           f"its memory can otherwise be reused while {given} still uses it")
        if broken.kind == "unrecorded-loop":
            first = first_line(f"this loop over `{broken.detail}` records none of them on {given}",
                               "this loop records none of its tensors on the given stream")
            return first, (f"call `.record_stream({broken.stream})` on each element: their memory can otherwise be "
                           f"reused while {given} still uses them")
        if broken.kind == "unrecorded-branch":
            first = first_line(f"this branch for the tensor `{broken.detail}` records it on no stream, not on {given}",
                               "this tensor branch records nothing on the given stream")
            return first, (f"call `{broken.detail}.record_stream({broken.stream})` here: the tensors taking this branch "
                           f"are otherwise no longer recorded and can be reused while {given} still uses them")
        if broken.kind == "records-nothing":
            first = first_line(f"this function records `{broken.detail}` on no stream, not even the given {given}",
                               "this recording function records nothing on its stream")
            return first, (f"call `{broken.detail}.record_stream({broken.stream})`: its memory can otherwise be "
                           f"reused while {given} still uses it")
        if broken.kind == "unrecorded-holder-field":
            first = first_line(f"the fields of `{broken.detail.split('.')[0]}` are recorded on {given} but not "
                               f"`{broken.detail}`", "a holder's device field is left out of the records")
            return first, (f"add `{broken.detail}.record_stream({broken.stream})` like its siblings: every construction "
                           f"of the holder fills it with device memory, which can otherwise be reused while {given} "
                           "still uses it")
        if broken.kind == "unrecorded-field":
            first = first_line(f"`record_stream` records the object's fields on {given} but not `self.{broken.detail}`",
                               "`record_stream` leaves out one of the object's tensor fields")
            return first, (f"add `self.{broken.detail}.record_stream({broken.stream})`: the class declares it as device "
                           f"memory, and it can otherwise be reused while {given} still uses it")
        if broken.kind == "ignores-stream":
            first = first_line(f"`record_stream` never records on {given}", "`record_stream` never records on its stream")
            return first, (f"record every tensor this object holds on {given}: they can otherwise be reused while "
                           f"{given} still uses them")
        first = first_line(f"this empty `record_stream` drops what `{broken.detail}.record_stream` records",
                           "this empty `record_stream` drops what the base class records")
        return first, (f"call `super().record_stream({broken.stream})` or record the held tensors on {given}: the "
                       "tensors the base class records are otherwise no longer recorded")

    @staticmethod
    def _hint(ctx: RuleContext, issue, main: str | None, line: int, flow) -> str:
        """Where the remedy goes: the `record_stream` after this use, on the using stream; or the
        allocating stream's wait on the using stream before the free (naming an SL201 it also clears)."""
        use, alloc = stream_label(issue.use_stream, main), stream_label(issue.alloc, main)
        if issue.mode == "reduce-overhead":
            tag = _tag_expr(issue.use_stream)
            record = f"`npu_record_tagged_stream({issue.name}, {tag})`" if tag else \
                f"`npu_record_tagged_stream({issue.name}, <tag of {use}>)`"
        else:
            expr = stream_expr(issue.use_stream, main, _dev(ctx, issue))
            record = f"`{issue.name}.record_stream({expr})`" if expr else f"`{issue.name}.record_stream(...)` for {use}"
        free = (f"the {_FREE_LABEL.get(issue.free, issue.free)} at line {ctx.file.span(issue.free_node).start_line}" if issue.free_node is not None
                else "the return")
        dev = _dev(ctx, issue)
        alloc_obj, use_obj = stream_expr(issue.alloc, main, dev), stream_expr(issue.use_stream, main, dev)
        wait = (f"`{alloc_obj}.wait_stream({use_obj})`" if alloc_obj and use_obj and issue.mode != "reduce-overhead"
                else f"a wait of {alloc} on {use}")
        if isinstance(issue.node, cst.Return):
            # the use is inside the return statement: nothing can follow it there
            hint = (f"`{issue.name}` was allocated on {alloc}: bind the result of line {line} to a name, then add "
                    f"{record} (or {wait}) before returning it")
        else:
            hint = (f"`{issue.name}` was allocated on {alloc}: add {record} after line {line}, or {wait} after line "
                    f"{line} and before {free}")
        joins = _joins(ctx, issue, flow, line)
        if joins:
            hint += f" (that wait also clears SL201 at line {joins})"
        if issue.use_stream == MAIN and alloc_obj and use_obj and not issue.alloc.startswith(("tag", "<")):
            # entry discipline: a side stream that waits on the current stream at every entry cannot take the
            # block back before the current stream's reads (the fork wait SL201 asks for)
            hint += f"; or begin every entry onto {alloc} with `{alloc_obj}.wait_stream({use_obj})`"
            forks = _forks(issue, flow, ctx, line)
            if forks:
                hint += f" (the wait SL201 asks for at line {forks}, which clears both)"
        return hint

    def _fix(self, ctx: RuleContext, node: cst.CSTNode, name: str, stream: str, mode: str, main: str | None = None,
             join: str = ""):
        dev = device_module(ctx.project, ctx.file, function_at(ctx.file, node), mode)
        stream_text = stream_expr(stream, main, dev)
        if not name.isidentifier() or stream_text is None:
            return None
        if not isinstance(node, cst.BaseSmallStatement) or isinstance(
                node, (cst.Return, cst.Raise, cst.Continue, cst.Break, cst.Pass)):
            return None
        span = ctx.file.span(node)
        line = ctx.file.source.line_text(span.start_line)
        end_line = ctx.file.source.line_text(span.end_line)
        if ";" in line or end_line.rstrip("\r\n")[span.end_col:].strip() not in ("", ) \
                and not end_line.rstrip("\r\n")[span.end_col:].lstrip().startswith("#"):
            return None
        indent = line[: len(line) - len(line.lstrip())]
        text = f"{indent}{name}.record_stream({stream_text})\n"
        at = Span(span.end_line + 1, 0, span.end_line + 1, 0)
        title = f"Add `{name}.record_stream({stream_text})` after line {span.end_line}"
        if join:  # the other remedy, a join, also clears an SL201: say so where the user looks
            title += f" (or {join})"
        return ctx.fix(title, Edit(at, text))

    VALID = [
        Valid(
            """
            import torch

            class S:
                def __init__(self):
                    self.side = torch.npu.Stream()

                def sample(self, logits: torch.Tensor):
                    main = torch.npu.current_stream()
                    probs = torch.softmax(logits, dim=-1)
                    self.side.wait_stream(main)
                    with torch.npu.stream(self.side):
                        tokens = torch.multinomial(probs, 1)
                        probs.record_stream(self.side)
                    del probs
                    scores = torch.log_softmax(logits, dim=-1)
                    main.wait_stream(self.side)
                    return tokens, scores
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class S:
                def __init__(self):
                    self.side = torch.npu.Stream()

                def sample(self, logits: torch.Tensor):
                    main = torch.npu.current_stream()
                    probs = torch.softmax(logits, dim=-1)
                    self.side.wait_stream(main)
                    with torch.npu.stream(self.side):
                        tokens = torch.multinomial(probs, 1)
                    del probs
                    scores = torch.log_softmax(logits, dim=-1)
                    main.wait_stream(self.side)
                    return tokens, scores
            """,
            line=12,
            fixed="""
            import torch

            class S:
                def __init__(self):
                    self.side = torch.npu.Stream()

                def sample(self, logits: torch.Tensor):
                    main = torch.npu.current_stream()
                    probs = torch.softmax(logits, dim=-1)
                    self.side.wait_stream(main)
                    with torch.npu.stream(self.side):
                        tokens = torch.multinomial(probs, 1)
                        probs.record_stream(self.side)
                    del probs
                    scores = torch.log_softmax(logits, dim=-1)
                    main.wait_stream(self.side)
                    return tokens, scores
            """,
        ),
    ]


def _tag_expr(key: str) -> str | None:
    """The tag argument of `npu_record_tagged_stream` for a stream key ("default" for the main stream)."""
    if key == MAIN:
        return '"default"'
    if key.startswith("tag:"):
        return f'"{key[4:]}"'
    if key.startswith("tag?:"):
        return key[5:]
    return None


def _taken_sites(ctx: RuleContext, sites, related: list, shown: int = 1) -> Confidence:
    """The confidence of a finding that takes over the callers' findings at ``sites`` ((file, call, caller,
    lifetime), flow/callerfrees.py): the surest of theirs; each call after the first ``shown`` is added to
    ``related``."""
    order = (Confidence.LOW, Confidence.MEDIUM, Confidence.HIGH)
    best = Confidence.LOW
    for k, (model, call, caller, lifetime) in enumerate(sites):
        c = _taken_confidence(ctx, lifetime, model, caller)
        best = max(best, c, key=order.index)
        if k >= shown and len(related) < 6:
            related.append(Location(model.path, model.span(call), "a caller drops it right after this call"))
    return best


def _taken_confidence(ctx: RuleContext, lifetime, model, caller) -> Confidence:
    """The confidence the caller's own finding for ``lifetime`` (a death at its call) would have had, which the
    called function's finding takes over (flow/callerfrees.py): high when the caller's analysis saw the free and no
    join on every path, lowered by the same evidence as in :meth:`MissingRecordStream.check`."""
    if lifetime.guess or lifetime.foreign_use or lifetime.escaped \
            or _ambient_race(lifetime, function_flow(ctx.project, model, caller)):
        return Confidence.LOW
    if lifetime.flag or lifetime.kept_event or lifetime.assumed:
        return Confidence.MEDIUM
    return Confidence.HIGH


def _ambient_race(issue, flow) -> tuple | None:
    """The ambient evidence (flow/ambient.py) of the SL201 race on this very access between the same two
    streams, which SL201 reports low: the two may be one stream."""
    for race in flow.races:
        if race.node is issue.node and race.ambient is not None and not race.task and not race.body \
                and {race.src, race.dst} == {issue.alloc, issue.use_stream}:
            return race.ambient
    return None


def _joins(ctx: RuleContext, issue, flow, line: int) -> str:
    """Lines of SL201 joins (a read on the allocating stream of something produced on the using stream,
    after this use and before the free) that the allocating stream's wait would also clear."""
    free_line = ctx.file.span(issue.free_node).start_line if issue.free_node is not None else None
    lines = []
    for race in flow.races:
        if race.kind != "read" or race.argument or race.dst != issue.alloc or race.src != issue.use_stream:
            continue
        at = ctx.file.span(race.node).start_line
        if at > line and (free_line is None or at <= free_line):
            lines.append(at)
    return ", ".join(str(n) for n in sorted(set(lines))[:3])


def _forks(issue, flow, ctx: RuleContext, line: int) -> str:
    """Lines of SL201 forks onto the allocating (side) stream, before this use: the wait they ask for,
    at every entry onto that stream, also protects this tensor's memory."""
    lines = sorted({ctx.file.span(r.node).start_line for r in flow.races
                    if r.kind == "read" and r.src == MAIN and r.dst == issue.alloc
                    and ctx.file.span(r.node).start_line < line})
    return ", ".join(str(n) for n in lines[:3])


def _dev(ctx: RuleContext, issue) -> str:
    """The device module the code of ``issue`` spells (``torch.xpu`` in Intel GPU code)."""
    return device_module(ctx.project, ctx.file, function_at(ctx.file, issue.node), issue.mode)


def _record_on_user(ctx: RuleContext, issue, main: str | None, use: str) -> str:
    """The record a hint asks for: on the stream that uses the tensor (its expression when it has one)."""
    expr = stream_expr(issue.use_stream, main, _dev(ctx, issue))
    return f"`{issue.name}.record_stream({expr})`" if expr else f"a record on {use}"
