"""Graph rendering (DOT, SVG, HTML) and pass-by-pass diffs."""
