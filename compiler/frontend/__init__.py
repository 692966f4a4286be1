"""The frontend: CPython bytecode -> FX graphs + guards (TorchDynamo's part).

Capture side (frontend-capture), in the order data flows:
  capture.py        capture_frame (docs/CONTRACTS.md section 6), the root tracer and its
                    restart plan (where to break / stop)
  instructions.py   the symbolic bytecode evaluator: one handler per opcode, 3.11 and 3.12
  data_ops.py       its handlers for operators, subscripts, slices, container displays
  bytecode_info.py  instructions, loops and exception-table regions of a code object
  variables.py      every kind of symbolic value, declared in one place
  dispatch.py       the evaluator's protocol: one table per operation (call, attribute, item,
                    operators, iteration, wrap, inline, reconstruct) keyed by the operand's
                    kind, plus the builtins table (@dispatch.builtin(len)); handler modules
                    register into it at import time and reach each other only through it, so
                    the frontend's import graph has no cycle (tests/test_layout.py checks)
  handlers.py       imports every handler module once (capture.py imports it)
  symbolic.py       helpers every handler uses: graph_value, record, specialize, tensor_shape,
                    python_type
  members.py        members read through a class (methods bound, properties run, constants)
  source.py         Dynamo-style sources: L['x'], G['w'], L['self'].layer.weight
  builder.py        wrapping real values into variables, with their guards
  calls.py          operators, subscripts, iteration, the call dispatcher
  builtin_calls.py  Python builtins (len, isinstance, range, zip, super, ...), class instantiation
  builtins_numbers.py, builtins_containers.py, builtins_objects.py  the builtins' handlers,
                    registered by function (@dispatch.builtin(len)), grouped by theme
  methods.py        methods of tensors, lists, dicts, tuples and constants
  torch_calls.py    torch.* / torch.nn.functional.* calls, grad-mode context managers
  attributes.py     attribute reads/writes (tensors, modules, objects, Python modules)
  inline.py         inlining user functions, methods, closures, lambdas, nn.Module.forward
  generators.py     generator objects stepped lazily (each next() runs the inlined frame to
                    its next yield), nn.Module tree walkers (modules(), named_parameters(), ...)
  model_outputs.py  Hugging Face ModelOutput dataclasses built in traced code (modelled, rebuilt
                    by calling the class)
  private_objects.py  copy.deepcopy of a pre-existing plain-data object (a model config) made at
                    trace time, read and mutated for real, reads guarded on the original
  new_modules.py    user nn.Modules with no __init__ of their own created in traced code
                    (forward inlined, rebuilt as cls())
  numpy_calls.py    numpy on tensors traced into the graph through torch._numpy (ndarrays as
                    tensors with numpy's dtypes), rebuilt as tensor.numpy() when they escape
  output_graph.py   the FX graph being built, fake-tensor propagation, ShapeEnv, guards
  side_effects.py   mutations of pre-existing objects, replayed after the graph
  codegen.py        bytecode that rebuilds values at runtime (+ readable source rendering)
  graph_compile.py  the GraphModule handed to the backend, graph/graph_code/graph_sizes logs
  emit_break.py     graph breaks and returns: the transformed function's bytecode
  static_inputs.py  the graph call: module parameters passed from chains walked once, re-walked
                    after a watched module mutation
  resume.py         resume functions and assembly of transformed code objects
  eager_calls.py    a frame that runs eagerly gets its call sites routed to compiled callees
                    (Dynamo's frame hook, emulated)
  errors.py         Unsupported (internal), FullgraphError (public, a GraphBreakError)

Runtime side (frontend-runtime): eval_frame.py, cache.py, guards.py (guard_kinds.py: one entry
per guard kind), dynamic.py (automatic
dynamic sizes and scalars; a str a graph break computed is left unspecialized once it changes),
explain.py;
guards.py reads module-tree sources once through static_sources.py, and reads outside the tree
(globals, closure cells, plain objects' and classes' attributes, methods through their class) as
Slots, and checks a fingerprint of what it read on each call (mutation.py: dict lookups and
identity tests; nothing in torch is patched).
Python semantics kept by: iterators.py (lazy map/zip/filter/enumerate/itertools, live dict views
and list iterators, the iterator protocol, fresh containers for values folded at trace time),
exceptions.py (exceptions raised and caught in traced code, unwound through the exception
table), stdlib_calls.py (functools/itertools/operator/collections/dataclasses by tables).
"""
