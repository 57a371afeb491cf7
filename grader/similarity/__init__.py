"""Similarity across a class, for the instructor only: which submissions share code or the same wrong or unusual
values. A reason to look, never a verdict: nothing here enters a grade or anything a student sees.

`tokens` turns code into normalised statement units, `fingerprints` winnows their k-grams, `code_match` compares
every document with every other through an index of fingerprints, `value_match` finds rare wrong values and rare
free choices that submissions share, `store` keeps each submission's code and exercise values under
OUT/similarity/, and `report` puts it together into a `SimilarityReport` (drawn by grader/outputs/similarity_view.py).
`documents` holds the types they share (`Chunk`, `Document`: what is compared).
"""
