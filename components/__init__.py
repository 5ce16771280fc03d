"""Building blocks of HPO algorithms, one module per category; each registers its components."""
