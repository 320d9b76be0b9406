"""Float64 reference for vector_add: c = a + b."""


def reference(inputs: dict, sizes: dict) -> dict:
    return {"c": inputs["a"] + inputs["b"]}
