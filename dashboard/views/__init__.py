"""What the pages show beside their figures: per-page view computations, tables, notes and
explanations in words."""
