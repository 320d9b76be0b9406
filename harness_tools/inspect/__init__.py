"""One case under an external tool, in a launcher process of its own: Nsight Compute (profile) and
compute-sanitizer or the cpu race check (sanitize).
"""
