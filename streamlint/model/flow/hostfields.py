"""Which ``self.*`` fields and module names hold host values (issue 16 §3, "Only device data races"): a field
that holds a name, a port, a count or a container of pinned host buffers, a module constant — none of them is a
device tensor of a stream. A mixin of the interpreter (:class:`~streamlint.model.flow.interp.Interp`); the answer
is a fact of the class and the key, memoised per project."""

from __future__ import annotations

from streamlint.model.filefacts import ClassInfo, FunctionInfo
from streamlint.model.flow.hostinstances import host_instance_field
from streamlint.model.flow.values import KVal
from streamlint.model.lifetimes import module_constant, module_container
from streamlint.model.placement import host_container_field
from streamlint.model.streams import derived
from streamlint.model.hostattrs import host_attr, host_data_attr
from streamlint.model.hostresults import returns_host_values
from streamlint.model.hostpools import host_pool_field, pool_key


# Attributes of a stream / event object that are host integers (its raw handle for a native launch, its id,
# its device's index): reading one is no device access.
STREAM_HANDLE_ATTRS = frozenset({"cuda_stream", "npu_stream", "xpu_stream", "stream_id", "device_index", "cuda_event",
                                 "npu_event"})


class HostFields:
    def host_attribute(self, v: KVal) -> bool:
        """``self.<attr>`` holding a host value (a name, a port: :func:`~streamlint.model.hostattrs.host_attr`), a
        module constant (``HEAD_DIM = 128``: :func:`~streamlint.model.lifetimes.module_constant`)."""
        if "." in v.key and v.key.rsplit(".", 1)[1] in STREAM_HANDLE_ATTRS:
            return True  # `self.side.cuda_stream`: a stream's raw handle (an integer), not a tensor
        if v.glob and v.key.isidentifier():
            return module_constant(self.cfile, v.key) or module_container(self.cfile, v.key)
        if not v.key.startswith("self."):
            return False
        frame_file, frame_fn = next(((f, fn) for f, fn in reversed(self.frames) if fn.class_name),
                                    (self.file, self.fn))
        memo = derived(self.project, "host_attribute")  # (a fact of the class and the key: asked per access)
        mkey = (id(frame_file), frame_fn.class_name, v.key)
        held = memo.get(mkey)
        if held is None or held[0] is not frame_file:  # (the file is kept with its answer: an id is never reused under it)
            held = memo[mkey] = (frame_file, self._host_field(frame_file, frame_fn, v.key))
        if held[1]:
            return True
        # a field allocated on the constructor's device, read in a method run only on host-built objects
        return v.key.count(".") == 1 and "[" not in v.key and host_instance_field(
            self.project, frame_file, frame_file.classes.get(frame_fn.class_name or ""), frame_fn, v.key[5:])

    def returns_host(self, fn: FunctionInfo, mod) -> bool:
        """Does the helper ``fn`` (of module ``mod``) hand back host values only
        (:func:`~streamlint.model.hostresults.returns_host_values`), its class's host fields counted as such?"""
        cls = mod.classes.get(fn.class_name or "") if mod is not None else None
        if cls is None:
            return returns_host_values(fn)
        return returns_host_values(fn, lambda attr: bool(self._field_host(cls, mod, attr)))

    def host_pool(self, v: KVal) -> bool:
        """``self.<attr>`` (or a slot of it) is a pool of host buffers of the class
        (:func:`~streamlint.model.hostpools.host_pool_field`): what is taken out of it is host memory."""
        attr = pool_key(v.key)
        if attr is None:
            return False
        frame_file, frame_fn = next(((f, fn) for f, fn in reversed(self.frames) if fn.class_name),
                                    (self.file, self.fn))
        return host_pool_field(frame_file, frame_file.classes.get(frame_fn.class_name or ""), attr)

    def _host_field(self, frame_file, frame_fn: FunctionInfo, key: str) -> bool:
        """:meth:`host_attribute` of a ``self.*`` key seen from a method of ``frame_fn``'s class."""
        if "[" in key and key.split("[", 1)[0].count(".") == 1:  # `self.host[name]`: an element of a container of
            field = key[5:].split("[", 1)[0]  # host buffers, or of a host value (`self.snapshot_np[layer]`)
            cls = frame_file.classes.get(frame_fn.class_name or "")
            return host_container_field(frame_file, cls, field) or bool(self._field_host(cls, frame_file, field,
                                                                                        judge=host_data_attr))
        if key.count(".") != 1 or "[" in key:
            return False
        cls, attr = frame_file.classes.get(frame_fn.class_name or ""), key[5:]
        if host_container_field(frame_file, cls, attr):
            return True
        found = self._field_host(cls, frame_file, attr)
        if found is None and cls is not None:
            # a mixin's field is set by the classes it is mixed into (`class Pool(GatherMixin, BasePool)`, the
            # base setting `self.start_layer = start_layer or 0`): host when every one of this file setting it does
            found_in = [self._field_host(sub, frame_file, attr) for sub in frame_file.classes.values()
                        if sub is not cls and any(b.rsplit(".", 1)[-1] == cls.name for b in sub.bases)]
            found_in = [f for f in found_in if f is not None]
            found = bool(found_in) and all(found_in)
        return bool(found)

    def _field_host(self, cls: ClassInfo | None, file, attr: str, depth: int = 0, judge=host_attr) -> bool | None:
        """Does the class (else its nearest base that sets it, every base in order) hold a host value in
        ``self.<attr>``? None when neither it nor a base within three levels sets the field."""
        if cls is None or depth > 3:
            return None
        if host_attr(self.project, file, cls, attr) \
                or any(a.target == f"self.{attr}" for m in cls.methods.values() for a in m.assigns):
            return judge(self.project, file, cls, attr)  # a field the class never sets is its base's
        for b in cls.bases:
            sym = self.project.symbol(b, file)
            if sym is not None and isinstance(sym[0], ClassInfo):
                found = self._field_host(sym[0], sym[1], attr, depth + 1, judge)
                if found is not None:
                    return found
        return None
