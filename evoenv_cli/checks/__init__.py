"""The machinery of the admission contracts' checks: probe answers, the scorer fuzzer, leak
solvers, the composite-leak rule, solve signatures and the training-shape check. The stages
that run them (validate, compose, dedupe) live in `stages/`."""
