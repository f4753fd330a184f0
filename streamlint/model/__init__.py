"""The semantic model of a linted project, in layers. Each fact is computed in one place, and imports
point down the layers only (``tests/test_architecture.py`` fails on any import cycle).

::

    4  rules/ (SLxxx)            ask questions of 1-3, never recompute them
           |
    3  per-function flow        dataflow (entry) -> flow/ (interpreter), breaks, waits, families, scopes,
           |                    environment, tensors + tensoruse (is this value a tensor?)
           |
    2  project facts            project (the index) -> paths -> compile -> wrappers, accelerators, captures, all
           |                    through queries (ProjectQueries), streams (stream typing and identity)
           |
    1  per-file syntax facts    file (FileModel: names, imports, scopes, calls, assignments), uses
                                (ApiUse, bind_arguments), syntax, walk, positions, lifetimes, apis (the
                                API table), options (ModelOptions), summary (stdlib-ast module summaries)

Which question each module answers (where a fix belongs):

Layer 1 — one file, no knowledge of other files
    ``apis``        which known API is this qualified name (role, family, parameters, modes)?
    ``file``        what does this file define, import, call, assign; which ``with`` is around a call?
    ``filefacts``   the records ``file`` fills (FunctionInfo, ClassInfo, CallSite, ScopeSite, AttrAssign, Guard)
    ``hostannotations`` does a parameter's or a return annotation declare a host value (no tensor)?
    ``paramrefs``   is a stored value a local container of module parameters held by reference (no tensor write)?
    ``slotpools``   which tensor fields does a class touch only at caller-chosen slots (a leased byte arena)?
    ``stepchains``  which methods of a class enter a side stream unwaited only as later steps of a protocol whose
                    first step waits (each requires, ``assert self.f is not None``, and consumes a field only its
                    predecessor sets), and which steps leave the protocol open (``entries`` asks it)?
    ``uses``        what does a call site bind (``bind_arguments``); ApiUse / ScopeUse values
    ``syntax``      node containment, local nodes, names bound by a target
    ``walk`` / ``positions``   traversal and source positions over LibCST
    ``lifetimes``   which tensors live as long as the module (parameters, buffers, globals)
    ``options``     the user options the model reads (execution path, declared wrappers)
    ``placement``   which factory calls and copies give host (CPU) memory (``device="cpu"``, ``pin_memory``)
    ``tensornames`` every public attribute name of ``torch.Tensor`` (generated from torch's stubs by
                    ``bench/tensornames.py``): a method outside it shows its receiver is no tensor
    ``hostguards``  which parameters does a function's own guard make host tensors (``if src.device.type != "cpu":
                    raise``, ``assert src.is_cpu`` before any other use)?
    ``hostpools``   which ``self.*`` containers are pools of host buffers (emptied containers filled only with host
                    memory: ``self.free[shape].append(h)`` under ``if h.device.type == "cpu":``): what they hand out is
                    host memory
    ``modpaths``    which file does a dotted module name lead to, seen from a file (``__init__.py`` chains,
                    checkouts, ``src/``, a namespace package's top folder named like the import)
    ``summary``     what may this module call (compile APIs, names), which class fields does it annotate,
                    from ``ast`` and bytes, without LibCST: which files a project-wide question must parse
                    (cached by content hash)
    ``compilecalls`` which calls of a module's ``ast`` may resolve to a compile API (``summary``'s step 3)
    ``wordindex``   which files may contain this marker, from the words of each file (a persistent index in
                    the project cache, by content stamp) instead of a scan of the tree's bytes
    ``release``     what does a released tree let go at once (its reference cycles broken, its objects turned
                    into stand-ins that raise when asked): ``Engine.release_models`` frees without a collection

Layer 2 — the project
    ``project``     where does a name lead (modules, symbols), which API does a call reach through
                    wrappers, what does a function call (call graph)?
    ``projectscans`` which project files may contain a marker, compile, or call a name, without parsing them
                    (byte searches, module summaries: a mixin of ``Project``)
    ``wrappers``    is this project function a stream wrapper, and of which API?
    ``captures``    does ``with obj:`` enter a graph capture through the class's own ``__enter__``
                    (``torch.cuda.graph`` inside: synchronising; ``capture_begin()``: deferred)?
    ``accelerators`` which device API does a method of an accelerator object reach
                    (``get_accelerator().stream(s)``, ``torch.get_device_module().Stream()``)?
    ``ctxfactories`` which stream does ``with self.side_ctx():`` enter when the field holds a context factory
                    (``partial(torch.cuda.stream, s)``, a lambda, a method, ``... if c else nullcontext``), and
                    under which test does a stream that may be None exist (correlated guards)?
    ``streamviews`` is a project function a conversion of the stream its caller passes into a torch stream
                    (``as_torch_stream(stream, device)``): its result is the caller's stream, as a parameter is?
    ``argkinds``    is what a join is handed certainly a stream or an event (``cur.wait_event(side_stream)``
                    raises: reported once at the join, the later uses judged by the join meant)?
    ``devobjects``  which objects stand for the device module without a getter (a module-level
                    ``current_platform`` whose class forwards ``__getattr__`` to ``torch.<device>``, an
                    annotated parameter, an object imported from another package)?
    ``modvalues``   which module does a value hold that a project loader returned (``self._torch =
                    load_torch_npu()``, the loader importing ``torch`` inside and returning it on every path), and
                    so which API does ``self._torch.npu.stream(s)`` call?
    ``devfields``   what does a member of a project object hold (``self.dev = torch.get_device_module(t)``
                    in any method, a property, ``cls(handle=...)`` keyword constructions), and which
                    project classes may a receiver be?
    ``compile``     where is code compiled, with which backend / config, reaching what?
    ``paths``       which execution path (ge / reduce-overhead / npugraph_ex / eager / cuda) does a
                    function run on?
    ``reaching``    which modules may reach a file through calls (and which a set of modules may reach), from
                    bytes only: the compile sites ``paths`` must follow for one file's functions
    ``queries``     what 2's modules may ask of ``project`` (a Protocol: no import back)
    ``streams``     which names hold streams or events, and which stream does a scope / tag denote
                    (``scope_stream_key``, ``tagged_stream_key``: the one stream-identity answer)
    ``entries``     does every entry onto a side stream begin with a wait on the entering stream (the entry
                    discipline, per stream family: ``streams[0]`` and ``streams[1]`` are two, ``streams[i]``
                    may be either), and which functions enter it again behind one wait?
    ``waithelpers`` which arguments of a call does the project function it calls make wait on every path
                    (``order_after(waiter=s, producer=cur)``: an eager-only wrapper of ``s.wait_stream(cur)``)?
    ``heldslots``   which methods of a class use the tensors it keeps in a field (on which stream), and
                    which drop them, joined or not (SL301's class-level lifetimes); a hook closure a method defines
                    (`def release(...)` in ``__init__``) recording what it reads of a field is one of its recorders
    ``eventguards`` which fields of an object does an event it holds guard (written on a side stream
                    before the record), and which readers of them skip the wait (guarded-by inference)
    ``hostobjects`` is a value an instance of a class that is no tensor type (``self.opts =
                    DecodeOptions(...)``: host state, never device data)? does a parameter annotation name a
                    tensor only through a project record's name (``ref: ShardTensorRef``)?
    ``hostresults`` is an expression a host value of the function's own making, and does a helper without a
                    return annotation hand back only such values (a layout policy of ints cached on a dict)?
    ``devicenames`` which device module does a function's code spell (``torch.xpu`` / ``torch.cuda`` /
                    ``torch.npu``, ``torch.accelerator`` for device-generic code): the words of fix hints and
                    the path tag (``[xpu]``) of its findings
    ``handedevents`` is an event a class waits on (``self.done``) handed to it at construction (a record
                    class's field, an ``__init__`` parameter) and so its constructor caller's to record?
    ``freeing``     which parameters (or, for a closure, captured names) does a function's body free with
                    ``resize_(0)``, itself or through a helper it hands them to (a free seen at the call)?

Layer 3 — one function's flow
    ``tensors``     is this value a tensor? (``TensorTyper`` for expressions, ``param_kinds`` for
                    parameters: the one tensor-typing module)
    ``tensorvocab`` the name tables ``tensors`` decides with (tensor methods, views, copies, factories,
                    metadata, non-tensor builtins and torch calls): names only, no decision
    ``calleekinds`` its companion for parameters: an unannotated one handed as is to a project function
                    whose own code takes it for a tensor is a tensor
    ``opaqueparams`` its companion for parameters annotated with no type (``kv: Any``, an opaque project alias):
                    a tensor when the function uses it as only a torch tensor is used (``kv.detach()``); medium
                    evidence (``guessed_params``) unless it records it on a stream
    ``tensoruse``   its companion for values the flow does not track yet: loop elements of a collection
                    handed in, places (``bucket.grad_data``) a function uses as tensors
    ``dataflow``    which hazards (races, lifetimes, unjoined streams, view escapes) does a function
                    have on each execution path? The interpreter is ``flow/``: ``values`` (lattice,
                    state), ``orderings`` (vector clocks), ``storage`` (accesses, lifetimes),
                    ``handouts`` (tensors handed back to the caller on an unjoined side stream),
                    ``argdrops`` (tensor parameters left in use on a side stream that a caller drops; ``argkeeps``:
                    what a function does with an argument that keeps it alive or joins it),
                    ``exprs`` (evaluation; ``outsidecalls``: the calls it does not inline, a function outside the
                    project or a method of a value), ``calls`` (inlining; ``inlinecallees``: which function a call may run inline), ``control`` (branches, loops, scopes),
                    ``choices`` (``s = [a, b][i]``: one path per listed stream), ``polls``
                    (what a branch on ``query()`` / ``is_cuda`` tells), ``protocols`` / ``fieldfamilies`` (what
                    a class's methods leave for each other on a side stream in its fields and container fields;
                    ``unproven``: such a hand-off whose reader lost the class's only join, low unless the class
                    runs the producer then the reader itself, or the reader leaves the write pending at its own
                    exit (its next call reads it: ``next_call_order``); ``priorreaders``: a reader the class runs before its own
                    join, not expected to join; ``producerbound``: a producer whose run can make current no stream but
                    the entry stream, the host or TorchAir tag streams (with what it inlines) leaves nothing pending,
                    and is not run; ``releasestreams``: buffers an object was last used
                    on by the stream stored on it, which a side-stream overwrite must wait for;
                    ``handlesources``: getters and fields a returned handle travels through;
                    ``joinhelpers``: a package helper that only joins the stream / event it is handed;
                    ``handedjoins``: a function every seen caller hands the only event it recorded after its
                    work (a join step by its callers' evidence, whatever its name);
                    ``joinedreads``: an object whose results leave it only through a method that waits its
                    event first, so a drop of that event loses no join; ``droppedevents``: an event of the object
                    tested and dropped with no wait, an event recorded and never named again;
                    ``queuehandoffs``: an event a method queues with the data it covers (``self.q.put((b, ev))``)
                    that the taker unpacks and never names again before using the data;
                    ``hookfields``: the calls of a method handed into a project record of hooks, made through
                    the record's field; ``receivers``: a call on a parameter every caller binds to another class
                    is no call of a method found by name;
                    ``handbacks``: a consumer handing the pending field back to its caller, on a stream nothing in
                    the project joins, is where the join belongs;
                    ``joinowners``: which orderings found by a stream's name can reach its owner's stream (a class's
                    own stream it never hands out: only through its objects; past the caller-file bound, the files
                    naming the class), and field mentions with comments stripped),
                    ``ambient`` / ``provenance`` (the stream a
                    method's callers run it on; which object a stream path held through other objects denotes:
                    constructor and factory arguments, field copies, properties, parameters at every call;
                    ``confined``: the calls of a method whose instances only live in one field of their builder;
                    ``fieldfacts``: a field that is one object for the object's life, callers that may be unseen;
                    ``settledargs``: a setup-time field a caller hands a callee that nothing in the step or out
                    of the class may rewrite (no producer for the callee's side-stream read to wait for);
                    ``callerstreams``: what the seen callers pass as a stream parameter (the current stream,
                    also one left to a wrapper's None default or to an options field its callers never set;
                    under a side-stream block of the caller, that block's stream) -- a race resting on it is low;
                    ``capturedreads``: a reader of an event-guarded field run only inside graph captures whose
                    replays wait on the event, or eagerly after its caller's own write of the field;
                    ``retainedstreams``: a stream argument that names the stream its caller made current (a worker
                    thread's ``set_stream``, in it or in the caller's own callers through ``self``; a scope entered
                    through a method of the object);
                    ``callerscopes``: the stream scopes every caller enters around a call, and whether they may
                    be the callee's own stream -- a race resting on the two differing is then low;
                    ``inlinewrappers``: a scope wrapper that runs its block inline only where its stream is None,
                    and whether the callee's stream may be None too;
                    ``handlestreams``: a stream wrapped from a handle the caller passes, the caller's stream as a
                    stream parameter is; ``chosenstreams``: a race whose other stream the caller chooses, in a
                    function no seen code calls, rests wholly on that unseen caller -- low; ``paramfields``: a
                    stream field of a parameter annotated with a project class -- the current stream when the
                    class binds ``current_stream()`` there, a side stream for sure (no caller's choice) when it
                    builds one, ordered at entry when every seen caller forks it -- and that class's methods called
                    on the parameter), ``typedholders`` (the project class a name holds by the annotation the code
                    states: a parameter's -- ``Optional[...]`` / ``X | None`` / string forms, the ``self``-like
                    parameter of an ``autograd.Function`` staticmethod --, an annotated local, an annotated field;
                    a function holding such an object reads that class's protocol through it, medium),
                    ``elementtypes`` (the project class a loop variable holds by the annotation of the container
                    it walks: ``for c in reversed(self.pending.get(k, ()))`` over ``dict[K, list[Chunk]]``),
                    ``recordwriters`` (a record class's fields a function outside the class leaves written on a
                    side stream through such a name, with an event stored on the record after the write: read as
                    the record's protocol by a holder of the record, medium, unless it hands the record to a
                    callee that may wait the event),
                    ``fielddrops`` (a plain field's tensor read on a side stream, pending and unrecorded at the
                    return, which another method of the class rebinds or drops with no join first),
                    ``selfjoins`` (a class whose other methods each join the work they queue on its own stream:
                    a method returning with its writes into the object's storage unjoined breaks that protocol,
                    reported where the work leaves, by ``leaves``, unless every seen caller joins after the call),
                    ``calleerecords`` / ``handedholders`` (an event a callee's scope re-records after the work it
                    was handed; an event handed on with its holder object), ``helperrecords`` (a project helper or
                    storage tracker that records a tensor argument on stream arguments: the caller's record_stream),
                    ``handedearly`` (an event recorded
                    before writes of the tensors it is handed out with), ``pendingfields`` (an event field recorded
                    before a non-blocking copy into a pinned field, which another method synchronises on the host
                    and then reads the field after: the record is early), ``releaseguards`` (an event recorded after the
                    work but kept only with other values, a release of its source, covers no write of that work
                    for the readers of a field event recorded before it), ``threadwaiters`` (a field event waited by a
                    method the class runs as a thread target: no join after the record orders that waiter),
                    ``waitertouch`` (those two report only when the work after the record reads a field the
                    waiters write or writes one they name; a local never stored away is invisible to them),
                    ``deadevents`` (an event nobody
                    consumes on a stream joined otherwise), ``ticketjoins`` (a record a producer hands back with
                    the event it recorded after its side-stream work, ``Receipt(slot, done)``: the caller's
                    ``receipt.done`` is that event, and a join step handed such a record that never waits on the
                    field, when nothing in the project does, is where the lost wait belongs; a join step joining
                    its handle parameter on an early-return branch only, falling through without it), ``lostjoins`` (the join method a class knows by what it
                    consumes -- the pending flag its producer raised after side-stream work, the container of side
                    streams it walks -- that no longer joins), ``pendingmarks`` (the flag a recorder raises with its
                    event, lowered by a fence that waits on nothing, also over module-global dicts; an event slot
                    of another object taken, only tested and cleared), ``pendingflags`` (those flags' fences; a
                    join gated on one is an alternative to the event's waiter, aside from the protocol), ``handles`` (a collective's work handle or a future
                    made from it: a host object whose ``wait()`` is the join, unless its done-callback queues
                    stream work), ``heldhandles`` (a local handed to a project holder that waits it -- a
                    function or class whose parameter / field is used only as a handle -- is such a handle,
                    whatever produced it), ``gradplaces`` (``handle.flat_param.grad`` of an object of unknown type:
                    a gradient, device data backward left on the current stream, an argument in effect),
                    ``scopenone`` (a stream whose scope a path entered
                    is not None there), ``notnone`` (a name bound to ``a + b``, a display or a comprehension is
                    not None), ``absentevents`` (``if rec.ev is not None: s.wait_event(rec.ev)``: on the arm where a
                    record's event of unknown origin is None, no work is pending on the record; that arm is ordered
                    as the waiting one), ``roundtests`` (a stream-list walk's round decides ``if i > 0:`` / ``if s is not
                    main:``: its index, and new streams are never the entry stream; two stream names a path
                    takes for one stream know each other's work), ``indexsets`` (a loop over every index of a collection picking streams
                    from a list joins / forks every stream picked through it: family keys ``xs[I[*]]``),
                    ``hostwrites`` (a host op writing certainly-host memory, pinned fields included, is on the host
                    timeline: later stream work is ordered after it), ``hostgrads`` (a host optimizer's ``step()``
                    reads the pinned ``.grad`` slots a non-blocking copy still fills), ``membership``
                    (comparisons; ``k in d`` on a dict / set reads no tensor), ``frames`` (a local container's
                    name is its frame's own: an inlined helper's ``staged`` is not its caller's, nor another
                    helper's), ``listreads`` (``torch.stack(outs)`` / ``[o[0] for o in outs]`` read every device
                    tensor a local list was handed, each with the stream of its own fork-loop round),
                    ``opaqueresults`` (the result of an opaque callable run in a side-stream scope, ``outs[k] =
                    branch()``, a parameter or a loop element of one, that the function hands back: device data
                    made on that stream, SL201 medium when the call is handed device data, low when nothing),
                    ``nativewrites`` (a native communicator's collective in a side-stream scope,
                    ``comm.allreduce_inplace(t.to_native())``: writes what it is handed, by its name; medium),
                    ``devicecopies`` (a project helper copying what it is handed to a device,
                    ``to_accel(batch, dev, non_blocking=True)``: its result is a device value made at the call),
                    ``hosthelpers`` (a project helper handing back only settled host memory, a ``torch.frombuffer``
                    of file bytes or a slot of a pinned slab the class allocated: its result is a host tensor),
                    ``unseenbuilds`` (what a helper builds only from what code not seen gives: a local list it
                    fills in a loop over what a store hands out, a tuple of it and a count; its result is a guess),
                    ``foreignuses`` (a use reading a tensor only through a method no tensor has, a library's own
                    ``x.ensure_registered()``: the stream of that use is a guess, SL301 low),
                    ``recordresults`` (a project call handing back a record, or a list of records, of device data
                    it makes, ``pages = tier.promote(dev)`` building ``DevicePages(k.to(dev, non_blocking=True), ...)``:
                    one storage produced at the call, its fields and methods reads of it),
                    ``paramcontents`` (a loop over a parameter's contents, ``req.blocks[tier]``, narrowed by
                    ``isinstance(item, torch.Tensor)``: the caller's tensors), ``flagjoins`` (a free unjoined only where a
                    caller's flag, ``sync``, turned the function's join off: SL301 medium; ``flagvalues``: the literals every seen
                    caller hands that flag, through forwarded ``**kwargs`` too -- a path none takes is no hazard), ``batchguards`` (a
                    race whose producer and use each run under a different test of one caller-given object,
                    ``batch.gather_meta`` / ``batch.mode``: both must hold, SL201 medium), ``phaseguards`` (those
                    two tests name two phases of the batch, prefill and decode: SL201 low), ``flagclauses`` (a plan decided once in boolean
                    flags, ``staged = two_stream and (factored or post_reduce)``: the clauses each binding and each
                    test taken give, and what they force on a path, so a fork under one flag meets its join under
                    the flags it implies), ``localstreams`` (a stream
                    the function makes for itself and lets die, used only to run and order work: a free of its block at
                    the return is taken back only through torch's stream pool, SL301 low), ``guessedresults`` (a
                    call's result taken for a tensor only because a ``self.*`` place of unknown type was handed
                    to it: its free is SL301 low), ``interp`` (the
                    composition), ``results`` (what rules read)
    ``breaks``      where does a compiled region break the graph, and what reaches a no-break scope?
    ``waits``       syntactic facts around npu_wait_tensor / ops.record / event waits
    ``families``    which API families does a function mix, and on which execution paths?
    ``scopes``      what runs inside a scope (transitive call search, SuperKernel options)?
    ``environment`` does the project set an environment variable (launch scripts, YAML, Python)?
    ``recorders``   does a ``record_stream`` forwarder (an object's ``record_stream(stream)``, a helper
                    recording a set of tensors on a stream parameter) record what it holds on that stream?
    ``handoffs``    does a pipeline stage that hands objects from a producer stream to its consumers
                    record each of them on every stream it records their siblings on? Does a method
                    storing tensors together in a field for a sibling method record each on the reader's?
    ``hostattrs``   which fields of a class hold host values (literals, host-typed parameters, instances of
                    non-tensor classes, declared host types such as ``Dict[str, str]``)?
    ``dataswaps``   which parameter / buffer storages bound on a side stream (``p.data = host.to(dev)``,
                    swapped back by another function of the package) are recorded on no stream their
                    siblings are recorded on?
    ``paramjoins``  which join loops over an events parameter leave out its first or last element while
                    another parameter (the inputs the events guard) is iterated whole after the loop?
    ``slotevents``  which methods hand out a buffer field's contents that another method writes on a
                    stream and marks with an element of a list event field nobody waits?
    ``streamjoins`` which container fields (or fields of the records they hold) keep side streams the
                    project made, so a join loop over them that leaves one out leaves its work unjoined?
"""
