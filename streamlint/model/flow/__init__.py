"""The dataflow interpreter of one function, split by concern (layer 3 of the model).

``values`` (the value lattice and per-path state) → ``orderings`` (stream / event keys, vector clocks)
→ ``storage`` (tensor storages, accesses, races, lifetimes; ``unsets``: frees seen through their effect, an
attribute rebound or a helper / closure that frees) → ``exprs`` (expression evaluation, call
dispatch) → ``calls`` (inlining of project helpers) → ``control`` (statements, branches, loops, scopes)
→ ``interp`` (the mixins composed into :class:`~streamlint.model.flow.interp.Interp`; ``records``: records on
the allocating stream, and the caller's tensors a helper uses on the side stream its callers run it on,
summarised over its call sites by ``sidecalls``; ``argdrops``: tensor parameters a function leaves in use on a
side stream at its return, and whether a caller drops the argument right after the call (``argkeeps``: what
keeps it alive or joins it in the function); ``callerfrees``: such a
death a caller's own analysis sees at its call, reported once, in the function; ``ambient``: the ``self.*`` stream every caller runs a
method under, and two field names of one stream object; ``callerscopes``: the stream scopes every caller enters
around a call, when they may be the method's own stream). ``results`` holds
what rules read. The public entry is :mod:`streamlint.model.dataflow`.
"""
