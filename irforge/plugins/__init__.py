"""Plugin hook specs and registries (pluggy project ``irforge``)."""
