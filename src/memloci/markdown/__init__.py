"""The entity document and other Markdown renderings: pure functions over text, no files."""
