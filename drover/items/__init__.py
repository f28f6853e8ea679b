"""The item file and what is read from it: the file itself (file.py, sections.py), its frontmatter
(strict_yaml.py through python-frontmatter, frontmatter_rules.py), ids (ids.py), deps (deps.py)
and the catalogue's parse of many files (parsing.py)."""
