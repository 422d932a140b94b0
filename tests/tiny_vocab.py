"""The words of the tiny test models' vocabularies (conftest's tiny Llama and tiny NLI tokenizer): prompts and
responses built from them tokenize without unknown tokens."""

WORDS = (
    "what",
    "is",
    "the",
    "capital",
    "of",
    "france",
    "paris",
    "it",
    "rome",
    "city",
    "a",
    "an",
    "big",
    "small",
    "yes",
    "no",
)
