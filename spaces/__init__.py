"""The design space of HPO algorithms, its named restrictions, and known algorithms as presets."""
