"""The novelty machinery `evoenv dedupe` judges with (docs/admission.md, "Novelty and re-skins"):

- `tokens`: the code tokenizer, a source as normalized tokens per top-level statement;
- `minhash`: shingle hashes, MinHash values, the code and behaviour signatures, the scaffold;
- `index`: `NoveltyIndex` (the kept environments, one LSH index per signature kind) and
  `decide`, the verdict on one candidate;
- `index_file`: a pool's saved index (`save_index`, `load_index`) and the keys that say when
  it is stale.

The stage itself (sampling prompts in the sandbox, the admission log, the record) is
`stages/dedupe.py`.
"""
