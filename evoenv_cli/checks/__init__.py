"""The admission contracts' checks. Each validation check is one module here that ends by
registering its `Check` (static.py, load.py, run.py, determinism.py, diversity.py,
reference.py, discrimination.py, constant_answer.py, leak.py, budget.py); registry.py holds
the registry and imports every module of this package, so a new check is one new file and
nothing else is edited; context.py is the `Checker` they all share. Beside them, the
machinery the checks and other stages use: probe answers (probes.py), the scorer fuzzer
(fuzz.py), prompt-only leak solvers (leak_solvers.py), the training-shaped burst
(training_shape.py), the composite-leak rule (composite_leaks.py), composites probed per part
(composite_parts.py) and solve signatures (solve_signature.py). The stages that run them (validate, compose, dedupe) live in `stages/`.

The policy writes the `score` it is later rewarded by, so the checks assume a verifier that
may be gamed on purpose: instance seeds come from the whole training range (not 0..7), score
is re-run (twice in one worker, in a fresh one, and after as many calls as a reward worker
serves before it is replaced), and the probes include floods, random answers of the
reference's shape, the constants score compares against and the reference hidden in simple
encodings. Beyond those fixed lists, the scorer fuzzer searches mutations of the reference,
prompt-only solvers read the prompt as a policy would, and one worker is fed what training
feeds it. Probes are answers no valid response can be; whether any order of a list is
accepted is measured apart (`order_free`) and never rejects.
"""
